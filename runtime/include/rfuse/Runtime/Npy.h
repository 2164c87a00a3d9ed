// Reading and writing NumPy .npy files (format 1.0, little-endian, C order): rfuse-run's input
// and output format. bf16 has no NumPy dtype and is written as f4.
#ifndef RFUSE_RUNTIME_NPY_H
#define RFUSE_RUNTIME_NPY_H

#include "rfuse/Runtime/HostTensor.h"

#include <istream>
#include <stdexcept>
#include <string>

namespace rfuse {

class NpyError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

HostTensor readNpy(const std::string &path);
/// Reads a .npy image of `size` bytes from `in` (`name` appears in errors). Every size in it is
/// validated before use: malformed input is an NpyError.
HostTensor readNpy(std::istream &in, uint64_t size, const std::string &name);
void writeNpy(const std::string &path, const HostTensor &t);

} // namespace rfuse

#endif
