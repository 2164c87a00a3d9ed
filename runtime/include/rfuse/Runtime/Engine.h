// The engine: compile a traced module with a named pipeline and run it. MLIR-free on purpose —
// this is the small C++ API the R package (and other front ends) use.
#ifndef RFUSE_RUNTIME_ENGINE_H
#define RFUSE_RUNTIME_ENGINE_H

#include "rfuse/Runtime/HostTensor.h"
#include "rfuse/Runtime/StepProgram.h"
#include "rfuse/Runtime/Tensor.h"

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace rfuse {

/// A compile failure: unknown pipeline, invalid module, a pass that failed. The message carries
/// MLIR's diagnostics.
class CompileError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Tensors on different devices in one program (the message names both).
class DeviceMismatchError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct CompileInfo {
  std::string pipeline;
  std::string tracedText;             ///< the module as traced
  std::string fusedText;              ///< after the pipeline
  std::vector<std::string> kernels;   ///< outlined kernel function names, in call order
  std::vector<std::string> kernelKinds; ///< pointwise / reduction / matmul_epilogue / ...
  std::vector<std::string> libraryCalls; ///< "matmul (...) -> ...", "conv2d (...) -> ...", ...
  /// Generated CUDA C++ per kernel (name -> source); generated with or without a GPU.
  std::vector<std::pair<std::string, std::string>> cudaSources;
  /// Steps with no GPU code, and why (they run on the host interpreter on a GPU).
  std::vector<std::string> gpuFallbacks;
  /// The GPU execution plan, a line per step: "label: how" (launch shape, library call, ...).
  std::vector<std::string> gpuPlan;
  /// With CompileOptions::recordPasses: the module's text after each pass of the pipeline, then
  /// after the lowering stages (rfuse-emit-cuda, rfuse-lower-kernels-to-cpu), in order.
  std::vector<std::pair<std::string, std::string>> passes;
  uint64_t kernelCount = 0;           ///< cost model: kernels of the entry function
  uint64_t bytesMoved = 0;            ///< cost model: bytes moved by them
  double compileSeconds = 0;
};

/// What to differentiate: result 0 of `main` (a one-element float tensor) with respect to the
/// arguments `wrt` (empty: every float argument).
struct GradientRequest {
  std::vector<int64_t> wrt;
  bool recomputePointwise = false; ///< rfuse-autodiff's recompute-pointwise option
  /// "sgd", "adam", "adamw": a training step instead (rfuse-autodiff's optimizer options):
  /// returns the value, the updated `wrt` arguments, then the updated optimizer state (inputs
  /// after main's own: sgd's momentum buffers when momentum > 0; adam's first moments, second
  /// moments and the step number).
  std::string optimizer = "none"; ///< none, sgd, adam, adamw
  double learningRate = 0.01, momentum = 0, weightDecay = 0;
  /// The learning rate from a last input (a one-element tensor) instead of learningRate: a
  /// schedule changes it without a new program (rfuse-autodiff's lr-input).
  bool learningRateInput = false;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8; ///< adam / adamw
  /// Data-parallel training: "mean" (or "sum") puts each gradient through an all-reduce over the
  /// process group's ranks before the optimizer (rfuse-autodiff's gradient-all-reduce), in
  /// buckets of at most bucketBytes (rfuse-bucket-all-reduce); "none": no collective.
  std::string gradientAllReduce = "none";
  int64_t bucketBytes = 25 << 20;
  /// Mixed precision: "bf16" or "f16" runs every float32 matrix product and convolution of the
  /// step in that dtype, the rest and the weights in float32 (rfuse-autocast scope=all); "none":
  /// only the products with_autocast() marked.
  std::string autocast = "none";
  /// Dynamic loss scaling (rfuse-autodiff's loss-scale, with optimizer "sgd"): the step takes the
  /// scale and its growth count as two last inputs and returns their new values last.
  bool lossScale = false;
  int64_t lossScaleGrowthInterval = 2000;
};

/// Whether a program's float32 matrix products and convolutions on the GPU may use TF32 tensor
/// cores (float32 storage and accumulation, inputs rounded to 10 mantissa bits).
enum class Tf32 {
  FromOptions, ///< the tf32 option at each run (RFUSE_ALLOW_TF32, rf_options(tf32 =))
  Allowed,     ///< always (a training step that asked for it)
  Exact,       ///< never: exact float32 products
};

struct CompileOptions {
  bool recordPasses = false; ///< keep the IR after every pass (CompileInfo::passes)
  Tf32 tf32 = Tf32::FromOptions;
};

/// The device option ("cpu", "cuda"), or with "auto" (the default) Cuda when a usable GPU
/// (driver, device, NVRTC) is found.
Device defaultDevice();
/// "cuda" or "cpu"; and, for cuda, a description of the device.
std::string deviceName(Device d);

/// What an ahead-of-time artifact (Program::exportArtifact, `rfusec -o`) holds.
struct ExportOptions {
  /// GPU architectures to compile for (cubins); empty: every supported one (sm_86, sm_89, sm_90).
  std::vector<std::string> archs;
  /// Also PTX of the newest one, which the driver compiles for newer GPUs.
  bool ptx = true;
  /// GPU programs (for `archs`) at all.
  bool cuda = true;
  /// A host-CPU program too: its kernels compiled for this machine's CPU (the loading one needs
  /// its features) and linked into a shared library with the system's C compiler driver
  /// (`cc`, or $CC) — needed at export only.
  bool cpu = false;
  /// A front end's own entries, stored as they are (name -> bytes; names without "/" at either
  /// end): what it needs to call the program as the user did (rf_export's R signature).
  /// rfuse_rt_metadata() reads them back.
  std::map<std::string, std::string> metadata;
};

struct ExportSummary {
  std::vector<std::string> archs;
  std::string cpu; ///< the CPU the host program is compiled for ("" without one)
  std::string ptxArch;
  size_t kernels = 0, steps = 0; ///< of one architecture's plan
  size_t bytes = 0;              ///< the entries' total
};

struct Timing {
  double medianMs = 0, minMs = 0;
  int iterations = 0;
};

/// A compiled program: owns its MLIR context and the fused module.
class Program : public StepProgram {
public:
  ~Program();
  const CompileInfo &info() const { return info_; }
  const std::string &entry() const { return entry_; }
  /// Runs the entry function: on the GPU (generated kernels, cuBLASLt, cuDNN) or on the CPU
  /// (compiled kernels and BLAS; the interpreter for what the CPU lowering does not cover).
  std::vector<HostTensor> run(const std::vector<HostTensor> &inputs,
                              Device device = defaultDevice()) const;
  /// The same with the caller's memory (shapes and dtypes those of the entry function's
  /// arguments and results): the CPU backend reads the inputs and writes the outputs in place;
  /// other paths copy through HostTensors.
  void run(const std::vector<TensorRef> &inputs, const std::vector<TensorRef> &outputs,
           Device device = defaultDevice()) const;
  /// The same on tensors that live on `device` (every input there; else an error naming both
  /// devices): results are new tensors there, and nothing crosses the host. Inputs of another
  /// dtype than the argument's are refused.
  std::vector<Tensor> run(const std::vector<Tensor> &inputs, Device device) const;
  /// The same into the caller's result tensors (on `device`, of the result types, not
  /// overlapping the inputs): a loop that alternates between two sets of tensors reuses them, and
  /// on the GPU replays one CUDA graph per set.
  void run(const std::vector<Tensor> &inputs, const std::vector<Tensor> &outputs, Device device) const override;
  /// How each step runs on the CPU backend ("kernel: compiled reduction", "op: interpreted:
  /// why"); builds (JIT-compiles) the CPU program if no CPU run has yet.
  std::vector<std::string> cpuSteps() const;
  /// Runs the entry function op by op on the interpreter (inside kernels too) and names the first
  /// op producing a NaN or infinity from finite operands, with its source location (the R
  /// expression, when traced from R); "" when every value is finite.
  std::string firstNonFinite(const std::vector<HostTensor> &inputs) const;
  /// The entry function's results: dtype and shape of each.
  const std::vector<TypedShape> &resultTypes() const override { return results_; }
  /// The entry function's arguments: dtype and shape of each.
  std::vector<TypedShape> argumentTypes() const override;
  /// Writes the program as an ahead-of-time artifact (see rfuse/Runtime/Artifact.h) that rfuse_rt
  /// (rfuse/rfuse_rt.h) runs without MLIR, LLVM or NVRTC: a plan per architecture, its kernels,
  /// constants and the signature. Throws artifact::ArtifactError (a step that would run on the
  /// host; the file cannot be written) or NvrtcError.
  ExportSummary exportArtifact(const std::string &path, const ExportOptions &options = {}) const;
  /// GPU only: uploads inputs once and times `iterations` runs with CUDA events.
  Timing benchmarkCuda(const std::vector<HostTensor> &inputs, int iterations) const;

  struct State; // the MLIR context, module and GPU plan (ProgramState.h)

private:
  friend class BatchTemplate;
  // After the module is compiled (or read back): the result types, the GPU plan and what the
  // compile reports (info_), from state_->module.
  void planAndDescribe(double secondsSoFar);
  friend std::shared_ptr<Program> compileProgram(const std::string &, const std::string &,
                                                 const std::string &, const CompileOptions &);
  friend std::shared_ptr<Program> compileGradientProgram(const std::string &, const std::string &,
                                                         const GradientRequest &, const CompileOptions &);
  static std::shared_ptr<Program> build(const std::string &moduleText, const std::string &pipeline,
                                        const std::string &entry, const GradientRequest *gradient,
                                        const CompileOptions &options);
  Program() = default;
  std::unique_ptr<State> state_;
  CompileInfo info_;
  std::string entry_;
  std::vector<TypedShape> results_;
};

/// Parses `moduleText`, runs pipeline `pipeline` ("default", "elementwise-only", "no-fusion"),
/// and returns the compiled program. Throws CompileError.
std::shared_ptr<Program> compileProgram(const std::string &moduleText, const std::string &pipeline,
                                        const std::string &entry = "main", const CompileOptions &options = {});

/// Compiled programs (the module after the pass pipeline) in the disk cache (disk_cache,
/// cache_dir), keyed by the traced text, pipeline, entry, gradient request and rfuse's version.
struct ProgramCacheStats {
  uint64_t passRuns = 0;   ///< programs compiled by running the pass pipeline
  uint64_t diskHits = 0;   ///< programs read back from the disk cache (no passes run)
  uint64_t diskWrites = 0; ///< programs written to it
  uint64_t rejected = 0;   ///< entries ignored (corrupt, foreign, not this user's)
  /// programs made for a batch size from a BatchTemplate (no pass pipeline run)
  uint64_t specializations = 0;
  /// Where a first call's time goes (wall seconds, summed over the process): making programs
  /// (disk read and parse, or the pass pipeline), planning them, and preparing a program for a
  /// device on its first run (kernels loaded, library plans made).
  double programSeconds = 0, planSeconds = 0, loadSeconds = 0;
};
ProgramCacheStats programCacheStats();

/// The CPU backend's process-wide cache of compiled functions (keyed by their lowered IR).
struct CpuJitStats {
  size_t compiled = 0; ///< functions JIT-compiled (LLVM codegen runs) in this process
  size_t reused = 0;   ///< lookups answered by an earlier compile
  size_t diskHits = 0; ///< functions loaded from the disk cache (an earlier process's objects)
};
CpuJitStats cpuJitStats();
/// Forgets the process-wide caches of compiled code (the CPU JIT's functions, the GPU kernels
/// in memory; the disk cache stays): their memory goes once no program uses it.
void clearCompiledCaches();


/// One compiled program for every size of a batch dimension (rf_jit's dynamic shapes).
///
/// Made from the same traced function compiled at two batch sizes: the two compiled modules must
/// be the same op for op, with the same attributes and constants, and their types may differ
/// only in dimensions that are the batch size times a constant (the same in both). Then the
/// program for any other size is the first module with those dimensions set for it: built
/// without running the pass pipeline. Its generated CUDA kernels are the same source for every
/// size — the integer constants that depend on the batch size (element counts, strides, bounds;
/// an affine function of it, checked at three sizes) become expressions of a kernel parameter
/// `rf_batch` — so NVRTC compiles each of them once; cuBLASLt/cuDNN plans and CUDA graphs are
/// made per size. (The CPU backend JIT-compiles each size's kernels.)
class BatchTemplate {
public:
  /// The template, or null with `why` saying what differs other than the batch size.
  static std::shared_ptr<BatchTemplate> make(const Program &a, int64_t batchA, const Program &b, int64_t batchB,
                                             std::string &why);
  /// The program at `batch` for `tracedText` (the function traced at that size): null with `why`
  /// when that trace is not the template's traced module at that size (the function's code
  /// depends on the size in another way — a branch on it, a constant computed from it), which
  /// then needs a compile of its own. Throws CompileError when the specialized module does not
  /// verify.
  std::shared_ptr<Program> specialize(const std::string &tracedText, int64_t batch, std::string &why) const;
  int64_t batchA() const { return batchA_; }
  int64_t batchB() const { return batchB_; }

  struct Impl;
  ~BatchTemplate();

private:
  BatchTemplate() = default;
  std::unique_ptr<Impl> impl_;
  int64_t batchA_ = 0, batchB_ = 0;
};

/// Like compileProgram, for the gradient of `main` (rfuse-autodiff after inlining): the program
/// returns main's result 0, then one gradient per requested argument. Throws CompileError with
/// the diagnostic (naming the op) when main cannot be differentiated.
std::shared_ptr<Program> compileGradientProgram(const std::string &moduleText,
                                                const std::string &pipeline,
                                                const GradientRequest &request,
                                                const CompileOptions &options = {});

/// The named pipelines compileProgram accepts (it takes MLIR pass pipeline strings too).
std::vector<std::string> availablePipelines();
/// Throws CompileError, naming the problem, unless `pipeline` is a named pipeline or a pass
/// pipeline string that parses (its passes registered: rfuse's, upstream's, loaded plugins').
void checkPipeline(const std::string &pipeline);
/// Loads an MLIR pass plugin (see rfuse/Passes/Passes.h loadPassPlugin); throws CompileError
/// saying why it cannot. Loading the same library again does nothing.
void loadPassPlugin(const std::string &path);

} // namespace rfuse

#endif
