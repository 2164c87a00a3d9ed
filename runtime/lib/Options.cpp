// The one place rfuse reads its environment (see Options.h).
#include "rfuse/Runtime/Options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>

namespace rfuse {
namespace {

enum class Kind { Bool, Int, Text, Choice };

struct Spec {
  OptionDoc doc;
  Kind kind;
  std::vector<std::string> choices;     // Kind::Choice
  int minimum = 0;                      // Kind::Int
  std::function<void(RuntimeOptions &, const std::string &)> set; // value already validated
  std::function<std::string(const RuntimeOptions &)> get;
};

bool parseBool(std::string v, bool &out) {
  std::transform(v.begin(), v.end(), v.begin(), ::tolower);
  if (v == "1" || v == "true" || v == "yes" || v == "on")
    return out = true, true;
  if (v == "0" || v == "false" || v == "no" || v == "off")
    return out = false, true;
  return false;
}

bool parseInt(const std::string &v, int minimum, int &out) {
  if (v.empty())
    return false;
  char *end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (*end || x < minimum || x > (1 << 30))
    return false;
  out = (int)x;
  return true;
}

std::string defaultCacheDir() {
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/rfuse";
  const char *home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/rfuse";
}

#define RFUSE_BOOL(field) \
  [](RuntimeOptions &o, const std::string &v) { parseBool(v, o.field); }, \
  [](const RuntimeOptions &o) { return std::string(o.field ? "TRUE" : "FALSE"); }
#define RFUSE_INT(field) \
  [](RuntimeOptions &o, const std::string &v) { o.field = std::atoi(v.c_str()); }, \
  [](const RuntimeOptions &o) { return std::to_string(o.field); }
#define RFUSE_TEXT(field) \
  [](RuntimeOptions &o, const std::string &v) { o.field = v; }, \
  [](const RuntimeOptions &o) { return o.field; }

const std::vector<Spec> &specs() {
  static const std::vector<Spec> table = {
      {{"device", "RFUSE_DEVICE", "auto, cpu, cuda", "auto",
        "where programs run: cuda when a usable GPU is found (auto), or forced"},
       Kind::Choice, {"auto", "cpu", "cuda"}, 0, RFUSE_TEXT(device)},
      {{"disable_cuda", "RFUSE_DISABLE_CUDA", "TRUE, FALSE", "FALSE",
        "hide the GPU: rfuse then loads no CUDA library (read once, before the first GPU probe)"},
       Kind::Bool, {}, 0, RFUSE_BOOL(disableCuda)},
      {{"tf32", "RFUSE_ALLOW_TF32", "TRUE, FALSE", "TRUE (the R package: FALSE)",
        "f32 matmuls and convolutions on the GPU may use TF32 tensor cores (10-bit mantissa inputs); "
        "programs compiled with their own setting (training steps: rf_train's tf32) keep it"},
       Kind::Bool, {}, 0, RFUSE_BOOL(tf32)},
      {{"fuse_attention", "RFUSE_FUSE_ATTENTION", "TRUE, FALSE", "TRUE",
        "attention of bfloat16 / f16 products compiles to one op, its masks and dropout included (flash-attention kernels on "
        "the GPU, the interpreter on the CPU); "
        "FALSE: op by op. Programs compiled after it is set"},
       Kind::Bool, {}, 0, RFUSE_BOOL(fuseAttention)},
      {{"cudnn_rnn", "RFUSE_CUDNN_RNN", "TRUE, FALSE", "TRUE",
        "recurrent layers (nn_lstm, nn_gru, nn_rnn) traced for a GPU run as one cuDNN RNN call per layer and direction "
        "(forward and gradient); FALSE: written out step by step (a product and a fused cell kernel per step). Programs traced after it is set"},
       Kind::Bool, {}, 0, RFUSE_BOOL(cudnnRnn)},
      {{"cudnn_rnn_algo", "RFUSE_CUDNN_RNN_ALGO", "auto, standard, persist_static, persist_static_small_h, persist_dynamic",
        "auto", "cuDNN's RNN algorithm for f32 and f16 layers (f64 always standard); auto: persist_static_small_h for "
        "small hidden sizes as PyTorch picks it (LSTM and GRU up to 192, their gradients up to 128; plain RNNs 384 and "
        "256), else standard. An algorithm cuDNN refuses for a layer falls back to standard"},
       Kind::Choice, {"auto", "standard", "persist_static", "persist_static_small_h", "persist_dynamic"}, 0,
       RFUSE_TEXT(cudnnRnnAlgo)},
      {{"cuda_graphs", "RFUSE_CUDA_GRAPH", "TRUE, FALSE", "TRUE",
        "from its second run, a GPU program is captured once into a CUDA graph and replayed"},
       Kind::Bool, {}, 0, RFUSE_BOOL(cudaGraphs)},
      {{"conv_autotune", "RFUSE_CONV_AUTOTUNE", "TRUE, FALSE", "FALSE",
        "a convolution's first run on a GPU times cuDNN's algorithms for it and keeps the fastest (as PyTorch's "
        "cudnn.benchmark; remembered on disk with the libraries' other plans); FALSE: cuDNN's heuristics choose"},
       Kind::Bool, {}, 0, RFUSE_BOOL(convAutotune)},
      {{"profile_steps", "RFUSE_PROFILE_STEPS", "TRUE, FALSE", "FALSE",
        "time every GPU step with CUDA events (turns CUDA graphs off); rfuse-bench prints the table"},
       Kind::Bool, {}, 0, RFUSE_BOOL(profileSteps)},
      {{"cpu_jit", "RFUSE_CPU_JIT", "TRUE, FALSE", "TRUE",
        "FALSE runs the CPU backend's programs on the reference interpreter"},
       Kind::Bool, {}, 0, RFUSE_BOOL(cpuJit)},
      {{"cpu_threads", "RFUSE_CPU_THREADS", "an integer >= 0", "0",
        "threads a CPU kernel is split over; 0: the machine's cores"},
       Kind::Int, {}, 0, RFUSE_INT(cpuThreads)},
      {{"disk_cache", "RFUSE_DISABLE_CACHE (1: FALSE)", "TRUE, FALSE", "TRUE",
        "the caches of GPU kernels (memory and disk), of compiled programs (disk) and of library plans (disk); FALSE compiles afresh"},
       Kind::Bool, {}, 0, RFUSE_BOOL(diskCache)},
      {{"cache_dir", "RFUSE_CACHE_DIR", "a directory", "$XDG_CACHE_HOME/rfuse or ~/.cache/rfuse",
        "where compiled GPU kernels and programs, and the libraries' chosen algorithms, are kept between processes"},
       Kind::Text, {}, 0, RFUSE_TEXT(cacheDir)},
      {{"cuda_include", "RFUSE_CUDA_INCLUDE", "a directory", "searched (/usr/local/cuda/include, ...)",
        "the CUDA headers NVRTC compiles kernels with (cuda_fp16.h, cuda_bf16.h)"},
       Kind::Text, {}, 0, RFUSE_TEXT(cudaInclude)},
      {{"nccl_library", "RFUSE_NCCL_LIBRARY", "a file", "libnccl.so.2 from the loader's path",
        "NCCL's shared library, for data-parallel training over several GPUs (read when NCCL is first needed)"},
       Kind::Text, {}, 0, RFUSE_TEXT(ncclLibrary)},
      {{"row_elements_per_thread", "RFUSE_ROW_ELEMENTS_PER_THREAD", "an integer >= 0", "0",
        "CUDA row reductions: elements per thread; 0: the heuristic (16 or 8)"},
       Kind::Int, {}, 0, RFUSE_INT(codegen.rowElementsPerThread)},
      {{"row_min_blocks", "RFUSE_ROW_MIN_BLOCKS", "an integer >= -1", "-1",
        "CUDA row reductions: __launch_bounds__ minimum blocks per SM; -1: the heuristic"},
       Kind::Int, {}, -1, RFUSE_INT(codegen.rowMinBlocks)},
      {{"row_grid", "RFUSE_ROW_GRID", "row, wave", "row",
        "CUDA row reductions: a block per row, or one resident wave of blocks"},
       Kind::Choice, {"row", "wave"}, 0,
       [](RuntimeOptions &o, const std::string &v) { o.codegen.rowGridWave = v == "wave"; },
       [](const RuntimeOptions &o) { return std::string(o.codegen.rowGridWave ? "wave" : "row"); }},
      {{"column_cache", "RFUSE_COLUMN_CACHE", "0, 4, 8", "8",
        "CUDA leading-dim reductions read more than once (a layer norm over an R matrix's rows) keep tiles of this many columns in shared memory; 0: off; on sm_90 and newer column_clusters decides the tile instead (32 columns), unless this is 0"},
       Kind::Choice, {"0", "4", "8"}, 0,
       [](RuntimeOptions &o, const std::string &v) { o.codegen.columnCache = std::stoi(v); },
       [](const RuntimeOptions &o) { return std::to_string(o.codegen.columnCache); }},
      {{"column_tiles_from_l2", "RFUSE_COLUMN_TILES_FROM_L2", "TRUE, FALSE", "FALSE",
        "those column tiles read their input again in every pass (from L2), 512 threads, three blocks per SM"},
       Kind::Bool, {}, 0, RFUSE_BOOL(codegen.columnTilesFromL2)},
      {{"column_clusters", "RFUSE_COLUMN_CLUSTERS", "TRUE, FALSE", "TRUE",
        "on sm_90 and newer, those column tiles are 32 columns wide, split over a thread block cluster (distributed shared memory)"},
       Kind::Bool, {}, 0, RFUSE_BOOL(codegen.columnClusters)},
      {{"column_split", "RFUSE_COLUMN_SPLIT", "TRUE, FALSE", "TRUE",
        "on sm_90 and newer, other column tiles fewer than the SMs split their rows over a thread block cluster of 2-8 blocks"},
       Kind::Bool, {}, 0, RFUSE_BOOL(codegen.columnSplit)},
      {{"column_split_registers", "RFUSE_COLUMN_SPLIT_REGISTERS", "TRUE, FALSE", "FALSE",
        "those split tiles walk their part of the reduced elements fully unrolled and keep the inputs read in more than one pass in registers"},
       Kind::Bool, {}, 0, RFUSE_BOOL(codegen.columnSplitRegisters)},
      {{"column_prefetch", "RFUSE_COLUMN_PREFETCH", "TRUE, FALSE", "FALSE",
        "on sm_90 and newer, the cluster column tiles copy the next tile into shared memory (cp.async) while the current one computes, one wave of resident clusters"},
       Kind::Bool, {}, 0, RFUSE_BOOL(codegen.columnPrefetch)},
      {{"max_pool_backward_kernel", "RFUSE_MAX_POOL_BACKWARD_KERNEL", "TRUE, FALSE", "FALSE",
        "on the GPU, max pooling's gradient runs as a generated kernel (a thread per input element gathers the windows it is the first maximum of) instead of cuDNN's"},
       Kind::Bool, {}, 0, RFUSE_BOOL(codegen.maxPoolBackwardKernel)},
      {{"lt_epilogues", "RFUSE_LT_EPILOGUES", "TRUE, FALSE", "TRUE",
        "cuBLASLt applies bias / ReLU / GELU / residual epilogues itself (FALSE: generated kernels)"},
       Kind::Bool, {}, 0, RFUSE_BOOL(codegen.cublasLtEpilogues)},
      {{"lt_transpose_a", "RFUSE_LT_TRANSPOSE_A", "TRUE, FALSE", "TRUE",
        "a large f32 A^T B transposes A first (cublasLtMatrixTransform), then runs A' B"},
       Kind::Bool, {}, 0, RFUSE_BOOL(codegen.transposeLargeLhs)},
      {{"lt_f32_results", "RFUSE_LT_F32_RESULTS", "TRUE, FALSE", "TRUE",
        "a bfloat16 / f16 product that the program widens to f32 and nothing else reads is written in f32 by cuBLASLt, never rounded to the narrow type in between (excess precision; FALSE: rounded, then widened by a generated kernel)"},
       Kind::Bool, {}, 0, RFUSE_BOOL(codegen.f32ResultsOfNarrowProducts)},
  };
  return table;
}

const Spec &find(const std::string &name) {
  for (const Spec &s : specs())
    if (s.doc.name == name)
      return s;
  std::string names;
  for (const Spec &s : specs())
    names += (names.empty() ? "" : ", ") + s.doc.name;
  throw OptionError("unknown rfuse option '" + name + "'; the options are: " + names);
}

// Whether `value` is acceptable for `s`; a canonical spelling in `canonical`.
bool validate(const Spec &s, const std::string &value, std::string &canonical) {
  canonical = value;
  switch (s.kind) {
  case Kind::Bool: {
    bool b;
    if (!parseBool(value, b))
      return false;
    canonical = b ? "1" : "0";
    return true;
  }
  case Kind::Int: {
    int i;
    return parseInt(value, s.minimum, i);
  }
  case Kind::Choice:
    return std::find(s.choices.begin(), s.choices.end(), value) != s.choices.end();
  case Kind::Text:
    return true;
  }
  return false;
}

std::mutex mutex;

RuntimeOptions &state() {
  static RuntimeOptions *options = [] {
    auto *o = new RuntimeOptions;
    o->cacheDir = defaultCacheDir();
    for (const Spec &s : specs()) {
      std::string var = s.doc.environment.substr(0, s.doc.environment.find(' '));
      const char *v = std::getenv(var.c_str());
      if (!v || !*v)
        continue;
      std::string value = v, canonical;
      if (var == "RFUSE_DISABLE_CACHE") { // the variable says the opposite of the option
        bool off;
        if (!parseBool(value, off)) {
          std::fprintf(stderr, "rfuse: warning: %s='%s' is not one of 0, 1; the disk cache stays on\n",
                       var.c_str(), v);
          continue;
        }
        o->diskCache = !off;
        continue;
      }
      if (!validate(s, value, canonical)) {
        std::fprintf(stderr, "rfuse: warning: %s='%s' is not accepted (%s); using the default (%s)\n",
                     var.c_str(), v, s.doc.accepted.c_str(), s.doc.defaultValue.c_str());
        continue;
      }
      s.set(*o, canonical);
    }
    return o;
  }();
  return *options;
}

} // namespace

RuntimeOptions runtimeOptions() {
  std::lock_guard<std::mutex> lock(mutex);
  return state();
}

void setOption(const std::string &name, const std::string &value) {
  const Spec &s = find(name);
  std::string canonical;
  if (!validate(s, value, canonical))
    throw OptionError("rfuse option '" + name + "' does not accept '" + value + "'; accepted: " + s.doc.accepted);
  std::lock_guard<std::mutex> lock(mutex);
  s.set(state(), canonical);
}

std::string getOption(const std::string &name) {
  const Spec &s = find(name);
  std::lock_guard<std::mutex> lock(mutex);
  return s.get(state());
}

const std::vector<OptionDoc> &optionDocs() {
  static const std::vector<OptionDoc> docs = [] {
    std::vector<OptionDoc> d;
    for (const Spec &s : specs())
      d.push_back(s.doc);
    return d;
  }();
  return docs;
}

} // namespace rfuse
