// The ahead-of-time artifact (`rfusec -o model.rfuse`, rf_export): one versioned file holding a
// compiled program — its execution plans (one per GPU architecture), each plan's kernels as
// cubins plus PTX of the newest for newer GPUs, constants, and the input/output signature — that
// the runtime library rfuse_rt (rfuse/rfuse_rt.h) loads and runs without MLIR, LLVM or NVRTC.
//
// The file: "RFUSEART", u32 format version, u32 entry count, u64 XXH3 of the entry table, the
// table (per entry: u32 name length, name, u64 offset, u64 size, u64 XXH3 of the bytes), then the
// entries' bytes. Entry "manifest.json" describes the program; the others are named in it.
#ifndef RFUSE_RUNTIME_ARTIFACT_H
#define RFUSE_RUNTIME_ARTIFACT_H

#include "rfuse/IR/DType.h"
#include "rfuse/Runtime/StepProgram.h"
#include "rfuse/rfuse_rt.h"

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace rfuse::artifact {

/// rfuse_rt's C names of the dtypes, and back (`t` one of the enum's values: callers check).
inline rfuse_rt_dtype toRtDType(DType t) {
  switch (t) {
  case DType::F32: return RFUSE_RT_F32;
  case DType::F64: return RFUSE_RT_F64;
  case DType::F16: return RFUSE_RT_F16;
  case DType::BF16: return RFUSE_RT_BF16;
  case DType::I1: return RFUSE_RT_I1;
  case DType::I32: return RFUSE_RT_I32;
  case DType::I64: return RFUSE_RT_I64;
  }
  return RFUSE_RT_F32;
}
inline DType fromRtDType(rfuse_rt_dtype t) {
  switch (t) {
  case RFUSE_RT_F32: return DType::F32;
  case RFUSE_RT_F64: return DType::F64;
  case RFUSE_RT_F16: return DType::F16;
  case RFUSE_RT_BF16: return DType::BF16;
  case RFUSE_RT_I1: return DType::I1;
  case RFUSE_RT_I32: return DType::I32;
  case RFUSE_RT_I64: return DType::I64;
  }
  return DType::F32;
}

/// The artifact format this rfuse writes and reads.
constexpr uint32_t kFormatVersion = 3; // 2: a matmul may write an f32 result of narrow operands; 3: attention kernels launch as tiles

/// What went wrong, as the C API's codes (rfuse_rt_status) number them.
enum class Status {
  Ok = 0,
  InvalidArgument = 1, ///< a null pointer, an index out of range
  Io = 2,              ///< the file cannot be opened, read or written
  Corrupt = 3,         ///< not an artifact, truncated, a checksum that does not match, a bad plan
  Version = 4,         ///< written by another format version
  Architecture = 5,    ///< no kernels this GPU can run
  NoDevice = 6,        ///< no usable GPU (driver, device) for a CUDA artifact
  Shape = 7,           ///< an input of the wrong shape or size
  DType = 8,           ///< an input of the wrong dtype
  OutOfMemory = 9,
  Runtime = 10,        ///< the driver or a library failed while loading or running
  Unsupported = 11,    ///< the program holds what an artifact cannot (a host-interpreted step)
};
const char *statusName(Status s);

class ArtifactError : public std::runtime_error {
public:
  ArtifactError(Status status, const std::string &message) : std::runtime_error(message), status(status) {}
  Status status;
};

/// The container: named byte strings, checksummed.
struct Container {
  std::map<std::string, std::string> entries;
  /// Throws ArtifactError (Io) when the file cannot be written; writes a temporary and renames it.
  void write(const std::string &path) const;
  /// Reads and verifies every entry. Throws ArtifactError: Io, Corrupt (naming the entry or the
  /// offset), Version.
  static Container read(const std::string &path);
  static Container parse(const std::string &bytes, const std::string &name);
  /// The entry, or ArtifactError (Corrupt) naming the missing entry.
  const std::string &at(const std::string &name) const;
};

/// An argument's or a result's type.
struct TensorType {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t numel() const;
  /// "f32[8, 16]"
  std::string str() const;
};

/// A program rfuse_rt_load loaded, as a training loop's step program (TrainingLoop): it stays
/// loaded while the loop holds it, after rfuse_rt_free. Throws ArtifactError for a null program.
std::shared_ptr<const StepProgram> stepProgramOf(rfuse_rt_program *p);

} // namespace rfuse::artifact

#endif
