// rfuse's on-disk caches (compiled GPU kernels, compiled programs): one entry format, written
// atomically and read back only from a directory of this user's that nobody else can write to.
#ifndef RFUSE_RUNTIME_DISKCACHE_H
#define RFUSE_RUNTIME_DISKCACHE_H

#include <cstdint>
#include <string>
#include <vector>

namespace rfuse {

/// Whether `dir` may hold a cache: a directory of this user's that group and others cannot write
/// to (made, mode 0700, when missing). Otherwise warns once per directory and returns false.
bool trustedCacheDir(const std::string &dir);

/// A cache key: 16 lowercase hex digits of a 64-bit hash.
std::string cacheKeyHex(uint64_t hash);

/// Reads the entry at `path` written by writeCacheEntry with the same 8-byte `magic` and `key`.
/// False when there is none; false with `problem` set when it is not a regular file of this
/// user's, is a link, or is foreign, truncated or fails its checksum.
bool readCacheEntry(const std::string &path, const char (&magic)[8], const std::string &key,
                    std::vector<char> &payload, std::string &problem);

/// Writes an entry (magic, key, payload size, xxh3 of the payload, payload) to a process-unique
/// temporary file renamed into place: concurrent writers each rename a whole file, readers never
/// see part of one. False when it could not be written.
bool writeCacheEntry(const std::string &path, const char (&magic)[8], const std::string &key,
                     const std::vector<char> &payload);

} // namespace rfuse

#endif
