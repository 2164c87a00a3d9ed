// Step-level profiling of every program run while a profile is open: each kernel, library call
// or host step with its time (CUDA events on the GPU, host timers on the CPU; CUDA graphs are
// off meanwhile, so every step is timed alone), the bytes it reads and writes, its floating-point
// operations when known, and the source (R) expressions it came from. rf_profile() in R.
#ifndef RFUSE_RUNTIME_PROFILE_H
#define RFUSE_RUNTIME_PROFILE_H

#include <string>
#include <vector>

namespace rfuse {

struct ProfileRecord {
  std::string program; ///< the program's entry function ("main", "main_grad")
  std::string step;    ///< the step's label (kernel name, or op)
  std::string how;     ///< how it ran ("cuda pointwise grid ...", "cudnn conv ...")
  std::string source;  ///< the expressions it came from ("; "-separated)
  std::string device;  ///< "cuda" or "cpu"
  double ms = 0, bytes = 0, flops = 0;
};

/// Starts collecting (clearing what an earlier profile left).
void startProfile();
/// Whether a profile is open.
bool profiling();
/// Stops collecting and returns the records, in the order the steps ran.
std::vector<ProfileRecord> stopProfile();
/// Adds a record (the backends call this for each step while profiling()).
void recordProfile(ProfileRecord r);

} // namespace rfuse

#endif
