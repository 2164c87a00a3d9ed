// rfuse's on-disk cache entries (see DiskCache.h).
#include "rfuse/Runtime/DiskCache.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

namespace rfuse {

std::string cacheKeyHex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
  return buf;
}

// The disk cache holds code that runs in this process, and a checksum is not authentication:
// only a directory of this user's that nobody else can write to is used. A missing one is made
// with mode 0700; another is refused, with one warning, and the disk cache bypassed.
bool trustedCacheDir(const std::string &dir) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    llvm::SmallString<256> parent(dir);
    llvm::sys::path::remove_filename(parent);
    if (!parent.empty())
      llvm::sys::fs::create_directories(parent);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return false; // caching is best effort
    if (::lstat(dir.c_str(), &st) != 0)
      return false;
  }
  std::string problem;
  if (S_ISLNK(st.st_mode))
    problem = "is a symbolic link";
  else if (!S_ISDIR(st.st_mode))
    problem = "is not a directory";
  else if (st.st_uid != ::geteuid())
    problem = "belongs to another user";
  else if (st.st_mode & (S_IWGRP | S_IWOTH))
    problem = "is writable by group or others";
  if (!problem.empty() && warned.insert(dir).second)
    llvm::errs() << "rfuse: warning: the cache directory " << dir << " " << problem
                 << "; not using it (kernels and programs are compiled and kept in memory only)\n";
  return problem.empty();
}

// Entry layout: magic, key (16 hex chars), payload size (u64), xxh3 of the payload (u64), payload.
bool readCacheEntry(const std::string &path, const char (&magic)[8], const std::string &key,
                    std::vector<char> &cubin, std::string &problem) {
  // Opened without following a link, then checked on the open file itself: a link or another
  // user's file planted there (even between a check and the open) is never read.
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP)
      problem = "a symbolic link";
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    ::close(fd);
    problem = "not a regular file of this user's";
    return false;
  }
  std::ifstream in("/proc/self/fd/" + std::to_string(fd), std::ios::binary);
  ::close(fd); // the stream holds its own descriptor of the same file
  if (!in)
    return false;
  char got[8], k[16];
  uint64_t size = 0, sum = 0;
  in.read(got, 8).read(k, 16).read((char *)&size, 8).read((char *)&sum, 8);
  if (!in || std::memcmp(got, magic, 8) != 0 || std::string(k, 16) != key) {
    problem = "foreign or corrupt header";
    return false;
  }
  if (size > (1u << 30)) {
    problem = "implausible size";
    return false;
  }
  cubin.resize(size);
  in.read(cubin.data(), size);
  if (!in || in.peek() != EOF) {
    problem = "truncated or oversized entry";
    return false;
  }
  if (llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>((const uint8_t *)cubin.data(), cubin.size())) != sum) {
    problem = "checksum mismatch";
    return false;
  }
  return true;
}

bool writeCacheEntry(const std::string &final, const char (&magic)[8], const std::string &key,
                     const std::vector<char> &cubin) {
  // A process-unique temporary file, renamed into place atomically: concurrent writers of the
  // same key each rename a complete file; readers never see a partial one.
  std::string tmp = final + ".tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
  {
    std::ofstream out(tmp, std::ios::binary);
    uint64_t size = cubin.size();
    uint64_t sum = llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>((const uint8_t *)cubin.data(), cubin.size()));
    out.write(magic, 8).write(key.data(), 16).write((const char *)&size, 8).write((const char *)&sum, 8);
    out.write(cubin.data(), cubin.size());
    if (!out) {
      llvm::sys::fs::remove(tmp);
      return false;
    }
  }
  if (llvm::sys::fs::rename(tmp, final)) {
    llvm::sys::fs::remove(tmp);
    return false;
  }
  return true;
}

} // namespace rfuse
