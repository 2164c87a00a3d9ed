// libFuzzer target: bytes as a .npy file. readNpy validates every size before use: malformed
// input must be an NpyError, never another exception, a huge allocation or a read past the end.
#include "rfuse/Runtime/Npy.h"

#include <cstddef>
#include <cstdint>
#include <sstream>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char *>(data), size));
  try {
    rfuse::HostTensor t = rfuse::readNpy(in, size, "input");
    if (t.numel() * (int64_t)rfuse::dtypeSize(t.dtype) > (int64_t)size)
      __builtin_trap(); // more data than the file holds
  } catch (const rfuse::NpyError &) {
  }
  return 0;
}
