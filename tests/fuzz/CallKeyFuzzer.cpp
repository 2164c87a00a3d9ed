// libFuzzer target: the cache key of a jitted call must be injective. Two argument lists are
// decoded from the input; if their keys are equal, so must be the lists (as far as the key
// covers them: a static argument by its name, its value is keyed by the R side).
#include "rfuse/Frontend/CallKey.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>

namespace {
using rfuse::ArgSignature;

std::vector<ArgSignature> decode(FuzzedDataProvider &in) {
  std::vector<ArgSignature> args(in.ConsumeIntegralInRange<int>(0, 4));
  for (ArgSignature &a : args) {
    a.kind = (ArgSignature::Kind)in.ConsumeIntegralInRange<int>(0, 2);
    a.name = in.ConsumeRandomLengthString(12);
    if (a.kind == ArgSignature::Kind::Static)
      continue;
    a.type = in.ConsumeRandomLengthString(12);
    a.hasDims = in.ConsumeBool();
    if (a.hasDims)
      a.dims.resize(in.ConsumeIntegralInRange<int>(0, 3));
    for (int64_t &d : a.dims)
      d = in.ConsumeIntegralInRange<int64_t>(-2, 1 << 20);
    if (!a.hasDims)
      a.length = in.ConsumeIntegralInRange<int64_t>(-2, 1 << 20);
  }
  return args;
}

bool same(const ArgSignature &a, const ArgSignature &b) {
  if (a.kind != b.kind || a.name != b.name)
    return false;
  if (a.kind == ArgSignature::Kind::Static)
    return true;
  return a.type == b.type && a.hasDims == b.hasDims && (a.hasDims ? a.dims == b.dims : a.length == b.length);
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::vector<ArgSignature> a = decode(in), b = decode(in);
  if (rfuse::callKey(a) != rfuse::callKey(b))
    return 0;
  if (a.size() != b.size())
    __builtin_trap();
  for (size_t i = 0; i < a.size(); ++i)
    if (!same(a[i], b[i]))
      __builtin_trap();
  return 0;
}
