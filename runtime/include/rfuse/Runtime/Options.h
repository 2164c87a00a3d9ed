// rfuse's settings, typed and in one place. They are read once from the RFUSE_* environment
// variables (the first time any is needed; an unusable value gives one warning and the default),
// and can be changed afterwards through setOption (the C++ API) or rf_options() (R). No other
// part of rfuse reads the environment. docs/options.md lists every option.
#ifndef RFUSE_RUNTIME_OPTIONS_H
#define RFUSE_RUNTIME_OPTIONS_H

#include "rfuse/Codegen/Options.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace rfuse {

struct RuntimeOptions {
  std::string device = "auto";  ///< auto | cpu | cuda
  bool disableCuda = false;     ///< hide the GPU: no CUDA library is loaded at all
  bool tf32 = true;             ///< f32 matmuls and convolutions on the GPU may use TF32
  bool cudaGraphs = true;       ///< replay a program as one CUDA graph from its second run
  bool convAutotune = false;    ///< time cuDNN's convolution algorithms on a problem's first run
  bool profileSteps = false;    ///< time each GPU step (no graphs); rfuse-bench prints the table
  bool cpuJit = true;           ///< false: the CPU backend runs everything on the interpreter
  bool fuseAttention = true;    ///< rfuse-fuse-attention in the default pipeline's compiles
  /// Recurrent layers traced for a GPU: one cuDNN RNN call (rfuse.recurrent) or written out
  bool cudnnRnn = true;
  std::string cudnnRnnAlgo = "auto"; ///< auto | standard | persist_static | persist_static_small_h | persist_dynamic
  int cpuThreads = 0;           ///< CPU threads; 0: the machine's cores
  bool diskCache = true;        ///< the kernel cache on disk (and in memory)
  std::string cacheDir;         ///< the disk cache's directory
  std::string cudaInclude;      ///< CUDA headers for NVRTC; "": searched
  std::string ncclLibrary;      ///< NCCL's shared library; "": libnccl.so.2 from the loader's path
  CodegenOptions codegen;
};

/// An unknown option, or a value it does not accept; the message names both and the accepted
/// values.
class OptionError : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

/// The settings now (a copy: they may change between calls).
RuntimeOptions runtimeOptions();

/// Sets option `name` (as listed by optionDocs, e.g. "tf32", "cuda_graphs") from its text form.
/// Throws OptionError.
void setOption(const std::string &name, const std::string &value);
/// The text form of option `name`'s value. Throws OptionError for an unknown name.
std::string getOption(const std::string &name);

struct OptionDoc {
  std::string name;         ///< as setOption and rf_options take it
  std::string environment;  ///< the RFUSE_* variable read at start-up
  std::string accepted;     ///< e.g. "TRUE, FALSE", "auto, cpu, cuda", "an integer >= 0"
  std::string defaultValue;
  std::string description;
};
const std::vector<OptionDoc> &optionDocs();

} // namespace rfuse

#endif
