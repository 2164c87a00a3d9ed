#include "rfuse/Runtime/Npy.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include <cstring>
#include <fstream>
#include <sstream>

namespace rfuse {
namespace {

const char *descrOf(DType t) {
  switch (t) {
  case DType::F32: case DType::BF16: return "<f4";
  case DType::F64: return "<f8";
  case DType::F16: return "<f2";
  case DType::I1: return "|b1";
  case DType::I32: return "<i4";
  case DType::I64: return "<i8";
  }
  return "";
}

// `s` without the characters of `chars` at either end.
std::string trim(const std::string &s, const char *chars = " \t\n") {
  size_t b = s.find_first_not_of(chars);
  if (b == std::string::npos)
    return "";
  return s.substr(b, s.find_last_not_of(chars) - b + 1);
}

// Extracts the value of 'key' from the header dict, e.g. "'descr': '<f4'".
std::string field(const std::string &header, const std::string &key, const std::string &path) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos)
    throw NpyError(path + ": .npy header has no '" + key + "'");
  size_t colon = header.find(':', k);
  size_t end = key == "shape" ? header.find(')', colon) : header.find(',', colon);
  if (colon == std::string::npos || end == std::string::npos)
    throw NpyError(path + ": malformed .npy header (its '" + key + "' entry)");
  if (key == "shape")
    ++end;
  return trim(header.substr(colon + 1, end - colon - 1), " '\"");
}

} // namespace

HostTensor readNpy(const std::string &path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    throw NpyError("cannot open '" + path + "'");
  uint64_t size = (uint64_t)in.tellg();
  in.seekg(0);
  return readNpy(in, size, path);
}

// Every size is checked against the bytes the stream holds before anything is allocated: a
// file rfuse did not write (a truncated or hostile one) gives an NpyError, never a huge
// allocation, an overflow or a read past its end.
HostTensor readNpy(std::istream &in, uint64_t size, const std::string &name) {
  char magic[8];
  in.read(magic, 8);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    throw NpyError(name + ": not a .npy file (bad magic)");
  if (magic[6] < 1 || magic[6] > 3)
    throw NpyError(name + ": unsupported .npy format version " + std::to_string((int)magic[6]));
  uint64_t headerLen = 0, prefix = magic[6] == 1 ? 10 : 12;
  if (magic[6] == 1) {
    unsigned char b[2];
    in.read((char *)b, 2);
    headerLen = b[0] | (b[1] << 8);
  } else {
    unsigned char b[4];
    in.read((char *)b, 4);
    headerLen = b[0] | (b[1] << 8) | (b[2] << 16) | ((uint32_t)b[3] << 24);
  }
  if (!in || headerLen > size - std::min(size, prefix))
    throw NpyError(name + ": truncated header");
  std::string header(headerLen, '\0');
  in.read(header.data(), headerLen);
  if (!in)
    throw NpyError(name + ": truncated header");
  std::string descr = field(header, "descr", name);
  if (field(header, "fortran_order", name) != "False")
    throw NpyError(name + ": Fortran-ordered arrays are not supported; save with C order");
  std::string shapeText = field(header, "shape", name);
  std::vector<int64_t> shape;
  for (std::string rest = trim(shapeText, "() "); !rest.empty();) {
    size_t comma = rest.find(',');
    std::string dim = trim(rest.substr(0, comma));
    if (!dim.empty()) {
      char *endp = nullptr;
      errno = 0;
      long long d = std::strtoll(dim.c_str(), &endp, 10);
      if (errno || *endp || d < 0 || !std::isdigit((unsigned char)dim[0]))
        throw NpyError(name + ": bad shape " + shapeText);
      shape.push_back((int64_t)d);
    }
    rest = comma == std::string::npos ? "" : trim(rest.substr(comma + 1));
  }
  DType dt;
  if (descr == "<f4") dt = DType::F32;
  else if (descr == "<f8") dt = DType::F64;
  else if (descr == "<f2") dt = DType::F16;
  else if (descr == "|b1") dt = DType::I1;
  else if (descr == "<i4") dt = DType::I32;
  else if (descr == "<i8") dt = DType::I64;
  else throw NpyError(name + ": unsupported dtype '" + descr + "'");
  uint64_t available = size - std::min(size, prefix + headerLen), bytes = dtypeSize(dt);
  if (std::find(shape.begin(), shape.end(), 0) != shape.end())
    bytes = 0;
  else
    for (int64_t d : shape) // the product, stopping before it could overflow
      if (bytes > available / (uint64_t)d)
        throw NpyError(name + ": truncated data (its shape " + shapeText + " needs more than the " +
                       std::to_string(available) + " bytes the file holds)");
      else
        bytes *= (uint64_t)d;
  std::vector<char> raw(bytes);
  in.read(raw.data(), raw.size());
  if (!in)
    throw NpyError(name + ": truncated data (expected " + std::to_string(raw.size()) + " bytes)");
  return HostTensor::fromBytes(dt, shape, raw.data());
}

void writeNpy(const std::string &path, const HostTensor &t) {
  std::ostringstream dict;
  dict << "{'descr': '" << descrOf(t.dtype) << "', 'fortran_order': False, 'shape': (";
  for (size_t d = 0; d < t.shape.size(); ++d)
    dict << t.shape[d] << (t.shape.size() == 1 || d + 1 < t.shape.size() ? "," : "");
  dict << "), }";
  std::string header = dict.str();
  // Pad so that the data starts on a 64-byte boundary, header ending in '\n' (format 1.0).
  size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::ofstream out(path, std::ios::binary);
  if (!out)
    throw NpyError("cannot write '" + path + "'");
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = (uint16_t)header.size();
  char lenBytes[2] = {(char)(len & 0xff), (char)(len >> 8)};
  out.write(lenBytes, 2);
  out.write(header.data(), header.size());
  // bf16 has no NumPy dtype: its values are written as f4.
  std::vector<char> data = (t.dtype == DType::BF16 ? t.castTo(DType::F32) : t).toBytes();
  out.write(data.data(), data.size());
  if (!out)
    throw NpyError("error writing '" + path + "'");
}

} // namespace rfuse
