#include "rfuse/Frontend/CallKey.h"

namespace rfuse {
namespace {

// Percent-encodes the characters the key's structure uses, so that no name or type can imitate
// the separators around it.
void appendEscaped(std::string &out, const std::string &text) {
  static const char hex[] = "0123456789ABCDEF";
  for (unsigned char c : text) {
    if (c == '%' || c == ':' || c == ';' || c == '[' || c == ']' || c == '{' || c == '}' ||
        c == '=' || c < 0x20) {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += (char)c;
    }
  }
}

} // namespace

std::string callKey(const std::vector<ArgSignature> &args) {
  std::string key;
  for (const ArgSignature &a : args) {
    appendEscaped(key, a.name);
    if (a.kind == ArgSignature::Kind::Static) {
      key += "=?;";
      continue;
    }
    bool tensor = a.kind == ArgSignature::Kind::Tensor;
    key += ":";
    appendEscaped(key, a.type);
    key += tensor ? "{" : "[";
    if (a.hasDims) {
      key += "d";
      for (size_t d = 0; d < a.dims.size(); ++d)
        key += (d ? "x" : "") + std::to_string(a.dims[d]);
    } else {
      key += std::to_string(a.length);
    }
    key += tensor ? "};" : "];";
  }
  return key;
}

} // namespace rfuse
