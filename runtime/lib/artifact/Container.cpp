#include "rfuse/Runtime/Artifact.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace rfuse::artifact {

namespace {
constexpr char kMagic[8] = {'R', 'F', 'U', 'S', 'E', 'A', 'R', 'T'};

uint64_t hash(const std::string &s) { return XXH3_64bits(s.data(), s.size()); }

template <class T> void put(std::string &out, T v) { out.append((const char *)&v, sizeof v); }

// Reads fixed-size fields from a string, with a clear error past its end.
struct Reader {
  const std::string &bytes;
  const std::string &name;
  size_t pos = 0;
  template <class T> T get(const char *what) {
    if (bytes.size() - pos < sizeof(T))
      throw ArtifactError(Status::Corrupt, name + ": truncated (its " + what + " at byte " + std::to_string(pos) +
                                               " is past the end of the file's " + std::to_string(bytes.size()) +
                                               " bytes)");
    T v;
    std::memcpy(&v, bytes.data() + pos, sizeof v);
    pos += sizeof v;
    return v;
  }
};
} // namespace

const char *statusName(Status s) {
  switch (s) {
  case Status::Ok: return "ok";
  case Status::InvalidArgument: return "invalid argument";
  case Status::Io: return "I/O error";
  case Status::Corrupt: return "corrupt artifact";
  case Status::Version: return "version mismatch";
  case Status::Architecture: return "architecture not in the artifact";
  case Status::NoDevice: return "no device";
  case Status::Shape: return "wrong shape";
  case Status::DType: return "wrong dtype";
  case Status::OutOfMemory: return "out of memory";
  case Status::Runtime: return "runtime failure";
  case Status::Unsupported: return "unsupported";
  }
  return "unknown";
}

void Container::write(const std::string &path) const {
  std::string table;
  uint64_t offset = 0;
  for (const auto &[name, data] : entries) {
    put<uint32_t>(table, (uint32_t)name.size());
    table += name;
    put<uint64_t>(table, offset);
    put<uint64_t>(table, data.size());
    put<uint64_t>(table, hash(data));
    offset += data.size();
  }
  std::string head(kMagic, 8);
  put<uint32_t>(head, kFormatVersion);
  put<uint32_t>(head, (uint32_t)entries.size());
  put<uint64_t>(head, hash(table));
  // A temporary renamed into place: a reader never sees half a file, and two writers of the same
  // path each leave a whole one.
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << head << table;
    for (const auto &entry : entries)
      out << entry.second;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw ArtifactError(Status::Io, "cannot write the artifact " + path);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw ArtifactError(Status::Io, "cannot write the artifact " + path + ": " + std::strerror(errno));
  }
}

Container Container::read(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ArtifactError(Status::Io, "cannot open the artifact " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    throw ArtifactError(Status::Io, "cannot read the artifact " + path);
  return parse(ss.str(), path);
}

Container Container::parse(const std::string &bytes, const std::string &name) {
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kMagic, 8) != 0)
    throw ArtifactError(Status::Corrupt, name + " is not an rfuse artifact (no RFUSEART header)");
  Reader r{bytes, name, 8};
  uint32_t version = r.get<uint32_t>("format version");
  if (version != kFormatVersion)
    throw ArtifactError(Status::Version, name + " is artifact format " + std::to_string(version) +
                                             "; this rfuse reads format " + std::to_string(kFormatVersion) +
                                             " (export it again with this rfuse)");
  uint32_t count = r.get<uint32_t>("entry count");
  uint64_t tableHash = r.get<uint64_t>("table checksum");
  size_t tableStart = r.pos;
  struct Entry {
    std::string name;
    uint64_t offset, size, hash;
  };
  std::vector<Entry> table;
  for (uint32_t k = 0; k < count; ++k) {
    uint32_t len = r.get<uint32_t>("entry name length");
    if (bytes.size() - r.pos < len)
      throw ArtifactError(Status::Corrupt, name + ": truncated (an entry's name is past the end)");
    Entry e;
    e.name = bytes.substr(r.pos, len);
    r.pos += len;
    e.offset = r.get<uint64_t>("entry offset");
    e.size = r.get<uint64_t>("entry size");
    e.hash = r.get<uint64_t>("entry checksum");
    table.push_back(std::move(e));
  }
  if (hash(bytes.substr(tableStart, r.pos - tableStart)) != tableHash)
    throw ArtifactError(Status::Corrupt, name + ": its table of entries does not match its checksum");
  size_t dataStart = r.pos;
  Container c;
  for (const Entry &e : table) {
    uint64_t available = bytes.size() - dataStart;
    if (e.offset > available || e.size > available - e.offset)
      throw ArtifactError(Status::Corrupt, name + ": truncated (entry " + e.name + " ends at byte " +
                                               std::to_string(dataStart + e.offset + e.size) + " of " +
                                               std::to_string(bytes.size()) + ")");
    std::string data = bytes.substr(dataStart + e.offset, e.size);
    if (hash(data) != e.hash)
      throw ArtifactError(Status::Corrupt, name + ": entry " + e.name + " does not match its checksum");
    c.entries[e.name] = std::move(data);
  }
  return c;
}

const std::string &Container::at(const std::string &name) const {
  auto it = entries.find(name);
  if (it == entries.end())
    throw ArtifactError(Status::Corrupt, "the artifact has no entry " + name);
  return it->second;
}

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string TensorType::str() const {
  std::string s = std::string(dtypeName(dtype)) + "[";
  for (size_t k = 0; k < shape.size(); ++k)
    s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + "]";
}

} // namespace rfuse::artifact
