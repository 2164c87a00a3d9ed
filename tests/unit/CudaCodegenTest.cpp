// CUDA code generation without a GPU: every kernel of the corpus and of random property-test
// graphs compiles with NVRTC for sm_86, sm_89 and sm_90; launch plans and vectorization are the
// intended ones; the kernel cache round-trips through disk and rejects corrupt entries; and the
// runtime reports "no CUDA device" cleanly here.
#include "CorpusUtil.h"
#include "RandomGraph.h"

#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Codegen/CudaCodegen.h"
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/Passes/Passes.h"
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/Options.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

using namespace rfuse;

namespace {

struct Kernels {
  std::vector<std::string> names, sources;
  std::vector<cuda::KernelPlan> plans;
};

// The kernels of a module's default pipeline as planned for `target` (default: sm_90, 132 SMs)
// with `options`.
Kernels kernelsOf(const std::string &text, const cuda::CudaTarget &target = {}, const CodegenOptions &options = {}) {
  mlir::DialectRegistry registry;
  registerRfuseDialects(registry);
  mlir::MLIRContext ctx(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  EXPECT_TRUE(module);
  EXPECT_TRUE(mlir::succeeded(compile(*module, "default")));
  Kernels k;
  module->walk([&](mlir::func::FuncOp fn) {
    if (!fn->hasAttr("rfuse.kernel"))
      return;
    cuda::KernelPlan p = cuda::planKernel(fn, target, options);
    if (p.kernel) {
      k.names.push_back(p.kernel->name);
      k.sources.push_back(p.kernel->source);
    }
    k.plans.push_back(std::move(p));
  });
  return k;
}

class NvrtcCorpus : public ::testing::TestWithParam<const char *> {};

TEST_P(NvrtcCorpus, EveryKernelCompiles) {
  if (cuda::nvrtcVersion() == 0)
    GTEST_SKIP() << "NVRTC is not installed on this machine";
  std::string arch = GetParam();
  setOption("disk_cache", "0"); // really compile, every run
  Kernels all;
  int graphs = 0;
  cuda::CudaTarget target;
  target.arch = arch; // plans differ by architecture (sm_90's thread block clusters)
  for (const test::CorpusGraph &g : test::canonicalCorpus()) {
    Kernels k = kernelsOf(g.moduleText, target);
    for (auto &p : k.plans)
      EXPECT_TRUE(p.unsupported.empty()) << g.name << ": " << p.function << ": " << p.unsupported;
    all.names.insert(all.names.end(), k.names.begin(), k.names.end());
    all.sources.insert(all.sources.end(), k.sources.begin(), k.sources.end());
    ++graphs;
  }
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Kernels k = kernelsOf(test::generateRandomGraph(seed).moduleText, target);
    for (size_t i = 0; i < k.names.size(); ++i) {
      all.names.push_back(k.names[i] + "_s" + std::to_string(seed));
      all.sources.push_back(k.sources[i]);
    }
    ++graphs;
  }
  // Names must be unique per compile only for the log; the entry points are in the sources.
  std::vector<cuda::CompiledKernel> out;
  ASSERT_NO_THROW(out = cuda::compileKernels(all.names, all.sources, arch));
  ASSERT_EQ(out.size(), all.sources.size());
  for (auto &k : out)
    EXPECT_GT(k.cubin.size(), 100u);
  setOption("disk_cache", "1");
  std::printf("[nvrtc] %s: %zu kernels from %d graphs compiled\n", arch.c_str(), out.size(), graphs);
}

INSTANTIATE_TEST_SUITE_P(Archs, NvrtcCorpus, ::testing::Values("sm_86", "sm_89", "sm_90"));

TEST(CudaCodegen, LaunchPlansAndVectorization) {
  for (const test::CorpusGraph &g : test::canonicalCorpus()) {
    Kernels k = kernelsOf(g.moduleText);
    if (g.name == "w1_f32") {
      ASSERT_EQ(k.plans.size(), 1u);
      EXPECT_EQ(k.plans[0].kernel->vectorWidth, 4) << "128-bit loads for contiguous f32";
      EXPECT_NE(k.sources[0].find("float4"), std::string::npos);
    }
    if (g.name == "w1_f64")
      EXPECT_EQ(k.plans[0].kernel->vectorWidth, 2);
    if (g.name == "w4_f32") {
      ASSERT_EQ(k.plans.size(), 1u);
      EXPECT_EQ(k.plans[0].kernel->launch, cuda::LaunchKind::BlockPerRow);
      EXPECT_EQ(k.plans[0].kernel->rows, 32);
      EXPECT_EQ(k.plans[0].kernel->rowLength, 96);
    }
    if (g.name == "softmax_cols_f32") {
      EXPECT_EQ(k.plans[0].kernel->launch, cuda::LaunchKind::ThreadPerColumn);
      EXPECT_EQ(k.plans[0].kernel->columnsPerBlock, 32) << "17 columns: too few for cached tiles";
    }
    // Read in several passes, with 4096+ columns: one kernel, tiles of 8 columns in shared memory
    // on sm_86 (not split into partial sums, not recomputed from memory each pass); on sm_90
    // tiles of 32 columns, split over a thread block cluster where a block's part would not fit
    // 64 KiB; f64 is not cached.
    if (g.name == "softmax_grad_cols_cluster_f32") { // 3 x 256 x 32 floats: 2 parts of 48 KiB
      ASSERT_EQ(k.plans.size(), 1u);
      EXPECT_EQ(k.plans[0].kernel->clusterSize, 2);
      EXPECT_EQ(k.plans[0].kernel->dynamicSharedBytes, 48 * 1024);
    }
    for (const char *name : {"layernorm_cols_cached", "softmax_cols_cached", "layernorm_cols_cluster"}) {
      if (g.name != std::string(name) + "_f32" && g.name != std::string(name) + "_f64")
        continue;
      bool f32 = g.name.find("_f32") != std::string::npos;
      int64_t reduced = g.name[0] == 's' ? 128 : g.name.find("cluster") != std::string::npos ? 2048 : 256;
      int inputs = g.name.find("cluster") != std::string::npos ? 2 : 1;
      ASSERT_EQ(k.plans.size(), 1u) << g.name;
      const cuda::KernelSpec &s = *k.plans[0].kernel;
      EXPECT_EQ(s.launch, cuda::LaunchKind::ThreadPerColumn) << g.name;
      EXPECT_EQ(s.columnsPerBlock, 32) << g.name;
      EXPECT_EQ(s.blockSize, f32 ? 512 : 256) << g.name;
      // f32: 2 x 2048 x 32 floats are 8 parts of 64 KiB. f64 is not cached: its plain tiles,
      // fewer than the SMs, split their rows (column_split) where each block keeps >= 64 rows.
      int cluster = f32 ? (inputs == 2 ? 8 : 1) : g.name == "layernorm_cols_cached_f64" ? 2
                                                : g.name == "layernorm_cols_cluster_f64" ? 8 : 1;
      EXPECT_EQ(s.clusterSize, cluster) << g.name;
      EXPECT_EQ(s.dynamicSharedBytes, f32 ? inputs * reduced / cluster * 32 * 4 : 0) << g.name;
      EXPECT_EQ(s.grid % cluster, 0u) << g.name;
      EXPECT_EQ(k.sources[0].find("extern __shared__ double rf_cache_smem[]") != std::string::npos, f32) << g.name;
      EXPECT_EQ(k.sources[0].find("__cluster_dims__(" + std::to_string(cluster) + ", 1, 1)") != std::string::npos,
                cluster > 1) << g.name;
      EXPECT_EQ(k.sources[0].find("rf_cluster_columns_reduce<") != std::string::npos, cluster > 1) << g.name;
      if (f32 && inputs == 2) // the second input's part follows the first's, inside the block's bytes
        EXPECT_NE(k.sources[0].find("rf_cache_smem) + " + std::to_string(reduced / cluster * 32) + "LL"),
                  std::string::npos) << g.name;
      cuda::CudaTarget ampere;
      ampere.arch = "sm_86";
      ampere.multiprocessors = 84;
      Kernels a = kernelsOf(g.moduleText, ampere);
      const cuda::KernelSpec &sa = *a.plans[0].kernel;
      bool fits = inputs * reduced * 8 * 4 <= 99 * 1024; // sm_86's shared memory per block
      EXPECT_EQ(sa.columnsPerBlock, f32 && fits ? 8 : 32) << g.name << " on sm_86";
      EXPECT_EQ(sa.clusterSize, 1) << g.name << " on sm_86";
      EXPECT_EQ(sa.dynamicSharedBytes, f32 && fits ? inputs * reduced * 8 * 4 : 0) << g.name << " on sm_86";
      EXPECT_EQ(a.sources[0].find("rf_tile_columns_reduce<") != std::string::npos &&
                    a.sources[0].find("extern __shared__ double rf_cache_smem[]") != std::string::npos, f32 && fits) << g.name;
    }
    // `column_prefetch`: the cluster tiles of two inputs (2 x 256 x 32 floats a block) get two
    // tiles' shared memory and 1024 threads, copy the next tile with cp.async, and launch only
    // the resident clusters; NVRTC compiles it. Off (the default), the plain cluster tiles.
    if (g.name == "layernorm_cols_cluster_f32") {
      EXPECT_FALSE(k.plans[0].kernel->residentClusters) << g.name;
      CodegenOptions pre;
      pre.columnPrefetch = true;
      Kernels kp = kernelsOf(g.moduleText, {}, pre);
      ASSERT_EQ(kp.plans.size(), 1u);
      const cuda::KernelSpec &s = *kp.plans[0].kernel;
      EXPECT_EQ(s.clusterSize, 8);
      EXPECT_EQ(s.blockSize, 1024);
      EXPECT_EQ(s.dynamicSharedBytes, 2 * 2 * 256 * 32 * 4);
      EXPECT_TRUE(s.residentClusters);
      EXPECT_EQ(s.grid % 8, 0u);
      const std::string &src = kp.sources[0];
      EXPECT_NE(src.find("__launch_bounds__(1024, 1)"), std::string::npos);
      EXPECT_NE(src.find("cp.async.cg.shared.global [%0], [%1], 16;"), std::string::npos);
      EXPECT_NE(src.find("cp.async.ca.shared.global [%0], [%1], 4;"), std::string::npos) << "misaligned inputs";
      EXPECT_NE(src.find("cp.async.wait_group 1;"), std::string::npos);
      EXPECT_NE(src.find("the next prefetched"), std::string::npos);
      if (cuda::nvrtcVersion() > 0) {
        setOption("disk_cache", "0");
        std::vector<cuda::CompiledKernel> out;
        EXPECT_NO_THROW(out = cuda::compileKernels(kp.names, kp.sources, "sm_90")) << src;
        setOption("disk_cache", "1");
      }
      cuda::CudaTarget ampere;
      ampere.arch = "sm_86";
      ampere.multiprocessors = 84;
      EXPECT_FALSE(kernelsOf(g.moduleText, ampere, pre).plans[0].kernel->residentClusters) << "no clusters on sm_86";
    }
    // Few tiles, read from memory in every pass: with `column_split` (the default), split over a
    // cluster on sm_90 only (and NVRTC compiles the split kernel); without it, one block a tile.
    if (g.name == "batchnorm_grad_cols_f32" || g.name == "batchnorm_grad_cols_f64") {
      ASSERT_EQ(k.plans.size(), 1u) << g.name << ": one kernel, not split into partial sums";
      CodegenOptions whole;
      whole.columnSplit = false;
      Kernels kw = kernelsOf(g.moduleText, {}, whole);
      EXPECT_EQ(kw.plans[0].kernel->clusterSize, 1) << g.name << ": without column_split";
      CodegenOptions split; // (the default)
      Kernels ks = kernelsOf(g.moduleText, {}, split);
      const cuda::KernelSpec &s = *ks.plans[0].kernel;
      EXPECT_EQ(s.launch, cuda::LaunchKind::ThreadPerColumn) << g.name;
      EXPECT_EQ(s.columnsPerBlock, 32) << g.name;
      EXPECT_EQ(s.clusterSize, 8) << g.name << ": 8 tiles on 132 SMs";
      EXPECT_EQ(s.grid, 64u) << g.name;
      EXPECT_NE(ks.sources[0].find("__cluster_dims__(8, 1, 1)"), std::string::npos) << g.name;
      EXPECT_NE(ks.sources[0].find("j < j0 + 128LL"), std::string::npos) << g.name;
      EXPECT_NE(ks.sources[0].find("if (ty == 0 && rank == 0 && live)"), std::string::npos) << g.name;
      if (cuda::nvrtcVersion() > 0) {
        setOption("disk_cache", "0");
        std::vector<cuda::CompiledKernel> out;
        EXPECT_NO_THROW(out = cuda::compileKernels(ks.names, ks.sources, "sm_90")) << g.name;
        setOption("disk_cache", "1");
      }
      // column_split_registers: a constant-trip loop (16 steps of 8 warps over a block's 128 rows),
      // the inputs read in more than one pass (4-byte ones) loaded into registers once; NVRTC
      // compiles it.
      CodegenOptions regs;
      regs.columnSplitRegisters = true;
      Kernels kr = kernelsOf(g.moduleText, {}, regs);
      const std::string &rs = kr.sources[0];
      EXPECT_EQ(kr.plans[0].kernel->clusterSize, 8) << g.name;
      EXPECT_NE(rs.find("#pragma unroll\n    for (int k = 0; k < 16; ++k) {\n      const long long j = j0 + ty + (long long)k * 8LL;"),
                std::string::npos) << rs;
      EXPECT_EQ(rs.find("j < j0 + 128LL"), std::string::npos) << g.name << ": no plain loop left";
      bool f32 = g.name == "batchnorm_grad_cols_f32";
      EXPECT_EQ(rs.find(" inputs in registers, ") != std::string::npos, f32) << g.name;
      EXPECT_EQ(rs.find("float xin") != std::string::npos, f32) << g.name;
      EXPECT_EQ(rs.find("unrolled, ") != std::string::npos, !f32) << g.name << ": 8-byte inputs stay in memory";
      if (cuda::nvrtcVersion() > 0) {
        setOption("disk_cache", "0");
        std::vector<cuda::CompiledKernel> out;
        EXPECT_NO_THROW(out = cuda::compileKernels(kr.names, kr.sources, "sm_90")) << rs;
        setOption("disk_cache", "1");
      }
      cuda::CudaTarget many = {};
      many.multiprocessors = 8; // as many tiles as SMs: no split
      EXPECT_EQ(kernelsOf(g.moduleText, many, split).plans[0].kernel->clusterSize, 1) << g.name;
      cuda::CudaTarget ampere;
      ampere.arch = "sm_86";
      ampere.multiprocessors = 84;
      EXPECT_EQ(kernelsOf(g.moduleText, ampere, split).plans[0].kernel->clusterSize, 1) << g.name << " on sm_86";
      split.columnClusters = false;
      EXPECT_EQ(kernelsOf(g.moduleText, {}, split).plans[0].kernel->clusterSize, 1) << g.name;
    }
    if (g.name == "lstm_step_f32") { // the product, then one epilogue kernel over the [24, 16] state
      ASSERT_EQ(k.plans.size(), 1u) << "the step's slices are read in place, not copied";
      ASSERT_TRUE(k.plans[0].library);
      ASSERT_TRUE(k.plans[0].kernel);
      EXPECT_EQ(k.plans[0].kernel->elements, 24 * 16);
    }
    // Transposes whose input's innermost dim moves read through 32 x 32 shared-memory tiles of
    // that dim and the kernel's innermost: a block per tile; x's and w's reads share the tiled
    // dim (1), v's moves its innermost dim to one of 7 and is read in place.
    if (g.name == "transposes_tiled_f32") {
      ASSERT_EQ(k.plans.size(), 1u);
      const cuda::KernelSpec &s = *k.plans[0].kernel;
      EXPECT_NE(k.sources[0].find("in 84 tiles of 32 x 32 (dims 1 and 3)"), std::string::npos) << k.sources[0];
      EXPECT_NE(k.sources[0].find("__shared__ float tile1[32][33]"), std::string::npos);
      EXPECT_EQ(k.sources[0].find("tile2"), std::string::npos) << "v's read is not tiled";
      EXPECT_EQ(s.blockSize, 256);
      EXPECT_EQ(s.elements, 84 * 256) << "a block per tile";
      EXPECT_EQ(s.vectorWidth, 1);
    }
    if (g.name == "transpose_2d_tiled_f64")
      EXPECT_NE(k.sources[0].find("in 12 tiles of 32 x 32 (dims 0 and 1)"), std::string::npos) << k.sources[0];
    if (g.name == "transpose_chain_f32")
      EXPECT_EQ(k.sources[0].find("tiles of"), std::string::npos) << "5 x 7: too small to tile";
    if (g.name == "mm_bias_relu_f32") {
      ASSERT_TRUE(k.plans[0].library);
      EXPECT_EQ(k.plans[0].library->matmul.biasInput, 2);
      EXPECT_EQ(k.plans[0].library->matmul.activation, codegen::Activation::Relu);
      EXPECT_FALSE(k.plans[0].kernel) << "cuBLASLt's RELU_BIAS epilogue, no extra kernel";
    }
    if (g.name == "mm_bias_scalar_f32") { // cuBLASLt's bias epilogue would read 16 values of a 1-value input
      EXPECT_TRUE(!k.plans[0].library || k.plans[0].library->matmul.biasInput < 0);
    }
    if (g.name == "bmm_scaled_f32") {
      ASSERT_EQ(k.plans.size(), 1u);
      ASSERT_TRUE(k.plans[0].library);
      EXPECT_EQ(k.plans[0].library->matmul.alpha, 0.125);
      EXPECT_FALSE(k.plans[0].kernel) << "the division is cuBLASLt's alpha, no epilogue kernel";
    }
    if (g.name == "bmm_scaled_f64") { // (f64 keeps IEEE division: a generated epilogue)
      ASSERT_TRUE(k.plans[0].library);
      EXPECT_EQ(k.plans[0].library->matmul.alpha, 1.0);
    }
    if (g.name == "mm_residual_f32") {
      ASSERT_TRUE(k.plans[0].library);
      EXPECT_EQ(k.plans[0].library->matmul.residualInput, 0) << "residual through beta = 1";
    }
    if (g.name == "cnn_block_f32") {
      ASSERT_FALSE(k.plans.empty());
      ASSERT_TRUE(k.plans[0].library && k.plans[0].library->kind == codegen::LibraryCall::Kind::Conv)
          << "cuDNN convolution";
      EXPECT_EQ(k.plans[0].library->conv.biasIndex, 2);
      EXPECT_TRUE(k.plans[0].kernel) << "relu in a generated epilogue";
    }
    if (g.name == "mm_gelu_erf_epilogue_f32") {
      ASSERT_TRUE(k.plans[0].library);
      EXPECT_TRUE(k.plans[0].kernel) << "erf GELU has no cuBLASLt epilogue";
    }
    // Every kernel names the ops it came from and carries the scalar semantics verbatim.
    for (const std::string &src : k.sources) {
      EXPECT_NE(src.find("// ops:"), std::string::npos);
      EXPECT_NE(src.find("rf_gelu_erf"), std::string::npos);
    }
  }
}

TEST(CudaCodegen, EveryUnfusedOpHasAKernel) {
  // Without fusion every op of the host function is planned alone: all of the corpus has GPU
  // code, and it compiles.
  if (cuda::nvrtcVersion() == 0)
    GTEST_SKIP() << "NVRTC is not installed on this machine";
  std::vector<std::string> names, sources;
  for (const test::CorpusGraph &g : test::canonicalCorpus()) {
    mlir::DialectRegistry registry;
    registerRfuseDialects(registry);
    mlir::MLIRContext ctx(registry);
    auto module = mlir::parseSourceString<mlir::ModuleOp>(g.moduleText, &ctx);
    ASSERT_TRUE(mlir::succeeded(compile(*module, "no-fusion")));
    int i = 0;
    module->lookupSymbol<mlir::func::FuncOp>("main").walk([&](mlir::Operation *op) {
      if (mlir::isa<mlir::func::FuncOp, mlir::func::ReturnOp, ConstantOp, ReshapeOp>(op))
        return;
      cuda::KernelPlan p = cuda::planOperation(op, "op" + std::to_string(i++));
      EXPECT_TRUE(p.unsupported.empty()) << g.name << ": " << p.unsupported;
      if (p.kernel) {
        names.push_back(p.kernel->name);
        sources.push_back(p.kernel->source);
      }
    });
  }
  EXPECT_GT(sources.size(), 50u);
  EXPECT_NO_THROW(cuda::compileKernels(names, sources, "sm_90"));
}

TEST(CudaRuntime, NoGpuIsReportedCleanly) {
  const cuda::DeviceInfo &d = cuda::deviceInfo();
  if (d.available)
    GTEST_SKIP() << "a GPU is present (" << d.name << ")";
  EXPECT_FALSE(d.reason.empty());
  EXPECT_EQ(defaultDevice(), Device::Cpu);
  // The engine still runs everything, on the CPU.
  auto p = compileProgram(test::canonicalCorpus()[0].moduleText, "default");
  EXPECT_EQ(p->run(test::canonicalCorpus()[0].inputs).size(), 1u);
  EXPECT_FALSE(p->info().cudaSources.empty()) << "kernels are generated without a GPU too";
}

class KernelCache : public ::testing::Test {
protected:
  std::string dir;
  void SetUp() override {
    if (cuda::nvrtcVersion() == 0)
      GTEST_SKIP() << "NVRTC is not installed on this machine";
    dir = std::string(::testing::TempDir()) + "/rfuse_kernel_cache_" + std::to_string(::getpid());
    llvm::sys::fs::remove_directories(dir);
    previousDir = getOption("cache_dir");
    setOption("cache_dir", dir);
    setOption("disk_cache", "1");
    cuda::clearMemoryKernelCache();
  }
  std::string previousDir;
  void TearDown() override {
    if (!previousDir.empty())
      setOption("cache_dir", previousDir);
    llvm::sys::fs::remove_directories(dir);
  }
};

TEST_F(KernelCache, RoundTripsThroughDiskAndRejectsCorruptEntries) {
  Kernels k = kernelsOf(test::canonicalCorpus()[0].moduleText);
  ASSERT_FALSE(k.sources.empty());
  auto before = cuda::kernelCacheStats();
  cuda::CompiledKernel first = cuda::compileKernel(k.names[0], k.sources[0], "sm_90");
  EXPECT_FALSE(first.cached);
  std::string path = dir + "/" + cuda::kernelCacheKey(k.sources[0], "sm_90") + ".cubin";
  ASSERT_TRUE(llvm::sys::fs::exists(path));

  cuda::clearMemoryKernelCache();
  cuda::CompiledKernel second = cuda::compileKernel(k.names[0], k.sources[0], "sm_90");
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.cubin, first.cubin);
  EXPECT_EQ(cuda::kernelCacheStats().diskHits, before.diskHits + 1);

  // Truncate the entry: it is rejected (with a warning) and recompiled, never loaded.
  {
    std::string bytes;
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size() / 2);
  }
  cuda::clearMemoryKernelCache();
  cuda::CompiledKernel third = cuda::compileKernel(k.names[0], k.sources[0], "sm_90");
  EXPECT_FALSE(third.cached);
  EXPECT_EQ(third.cubin, first.cubin);
  EXPECT_EQ(cuda::kernelCacheStats().rejected, before.rejected + 1);

  // A flipped payload byte fails the checksum.
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(60);
    f.put('\x5a');
  }
  cuda::clearMemoryKernelCache();
  EXPECT_FALSE(cuda::compileKernel(k.names[0], k.sources[0], "sm_90").cached);

  // disk_cache = FALSE (RFUSE_DISABLE_CACHE=1) bypasses both caches.
  setOption("disk_cache", "0");
  EXPECT_FALSE(cuda::compileKernel(k.names[0], k.sources[0], "sm_90").cached);
  setOption("disk_cache", "1");
}

TEST_F(KernelCache, OnlyADirectoryOfThisUsersThatOthersCannotWriteIsUsed) {
  Kernels k = kernelsOf(test::canonicalCorpus()[0].moduleText);
  ASSERT_FALSE(k.sources.empty());
  std::string path = dir + "/" + cuda::kernelCacheKey(k.sources[0], "sm_90") + ".cubin";
  // Made with mode 0700 when missing.
  cuda::compileKernel(k.names[0], k.sources[0], "sm_90");
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_TRUE(llvm::sys::fs::exists(path));
  // Writable by others: neither read nor written.
  ::chmod(dir.c_str(), 0777);
  llvm::sys::fs::remove(path);
  cuda::clearMemoryKernelCache();
  auto before = cuda::kernelCacheStats();
  EXPECT_FALSE(cuda::compileKernel(k.names[0], k.sources[0], "sm_90").cached);
  EXPECT_FALSE(llvm::sys::fs::exists(path)) << "wrote into a directory others can write";
  EXPECT_EQ(cuda::kernelCacheStats().diskWrites, before.diskWrites);
  ::chmod(dir.c_str(), 0700);
  // An entry that is a symbolic link (planted by someone else, say) is never followed.
  cuda::clearMemoryKernelCache();
  cuda::compileKernel(k.names[0], k.sources[0], "sm_90"); // a real entry...
  std::string real = dir + "/elsewhere.cubin";
  ASSERT_FALSE(llvm::sys::fs::rename(path, real));
  ASSERT_EQ(::symlink(real.c_str(), path.c_str()), 0); // ...moved behind a link
  cuda::clearMemoryKernelCache();
  before = cuda::kernelCacheStats();
  EXPECT_FALSE(cuda::compileKernel(k.names[0], k.sources[0], "sm_90").cached);
  EXPECT_EQ(cuda::kernelCacheStats().rejected, before.rejected + 1);
}

TEST_F(KernelCache, KeyCapturesSourceAndArch) {
  EXPECT_NE(cuda::kernelCacheKey("a", "sm_90"), cuda::kernelCacheKey("a", "sm_89"));
  EXPECT_NE(cuda::kernelCacheKey("a", "sm_90"), cuda::kernelCacheKey("b", "sm_90"));
  EXPECT_EQ(cuda::kernelCacheKey("a", "sm_90"), cuda::kernelCacheKey("a", "sm_90"));
}

TEST_F(KernelCache, TwoProcessesSharingACacheDirectory) {
  // Two rfusec processes compile the same kernels into one cache directory at the same time;
  // then a third finds every kernel in the cache and compiles nothing.
  std::string mlir = std::string(::testing::TempDir()) + "/rfuse_two_procs.mlir";
  std::ofstream(mlir) << test::canonicalCorpus()[1].moduleText; // W4: reduction kernels
  std::string bin = std::string(RFUSE_BINARY_DIR) + "/bin/rfusec ";
  std::string env = "RFUSE_CACHE_DIR=" + dir + " ";
  std::string cmd = "(" + env + bin + mlir + " -o " + dir + "/out1 > " + dir + "/log1 2>&1 & " + env +
                    bin + mlir + " -o " + dir + "/out2 > " + dir + "/log2 2>&1 & wait)";
  llvm::sys::fs::create_directories(dir);
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  FILE *p = popen((env + bin + mlir + " -o " + dir + "/out3").c_str(), "r");
  char buf[512] = {0};
  ASSERT_TRUE(fgets(buf, sizeof buf, p));
  EXPECT_EQ(pclose(p), 0);
  EXPECT_NE(std::string(buf).find("compiled 0,"), std::string::npos) << buf;
  // No temporary files left behind.
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
    EXPECT_EQ(it->path().find(".tmp."), std::string::npos) << it->path();
}

} // namespace

// A channel's statistics in R's layout (an array of dim c(N, C, H, W) is the tensor [W, H, C, N]):
// reduced over W, H and N, the innermost dim among them, so a block per channel strides through
// contiguous memory; a thread per channel would leave the GPU idle (batch norm, issue 13).
TEST(CudaCodegen, ChannelReductionsRunABlockPerOutput) {
  GraphBuilder g("main");
  TracedValue x = g.input({8, 8, 64, 256}, DType::F32, "x");
  TracedValue m = g.reduceMean(x, {0, 1, 3});
  g.finish({m});
  Kernels k = kernelsOf(g.moduleText());
  ASSERT_EQ(k.plans.size(), 1u);
  ASSERT_TRUE(k.plans[0].kernel);
  EXPECT_EQ(k.plans[0].kernel->launch, cuda::LaunchKind::BlockPerRow);
  EXPECT_EQ(k.plans[0].kernel->rows, 64);
  EXPECT_EQ(k.plans[0].kernel->rowLength, 8 * 8 * 256);
  EXPECT_NE(k.sources[0].find("a block per output"), std::string::npos);
  EXPECT_NE(k.sources[0].find("rf_block_reduce"), std::string::npos);
  // (A column reduction, the innermost dim kept, still runs a thread per output, reading
  // coalesced: softmax_cols_f32 in LaunchPlansAndVectorization.)
}

// Gradient programs make kernels forward graphs do not (a layer norm's backward reads its gamma
// through two broadcasts, one per reader since fusion's broadcastPerUse): each compiles under
// NVRTC here, without a GPU (a kernel that did not compile failed only on the GPU box before).
TEST(CudaCodegen, GradientKernelsCompile) {
  if (cuda::nvrtcVersion() == 0)
    GTEST_SKIP() << "NVRTC is not installed on this machine";
  auto layerNorm = [](int64_t rows) {
    GraphBuilder g("main");
    TracedValue x = g.input({rows, 256}, DType::F32, "x"), w = g.input({256}, DType::F32, "w");
    TracedValue xc = g.sub(x, g.broadcastTo(g.reduceMean(x, {1}, true), {rows, 256}));
    TracedValue var = g.reduceMean(g.mul(xc, xc), {1}, true);
    TracedValue y = g.mul(g.mul(xc, g.broadcastTo(g.rsqrt(g.add(var, g.scalar(1e-5, DType::F32))), {rows, 256})),
                          g.broadcastTo(w, {rows, 256}));
    g.finish({g.reduceSum(g.gelu(y, true), {0, 1})});
    return g.moduleText();
  };
  for (int64_t rows : {32, 8192}) { // a block per row, and a warp per row (8 rows a block)
    mlir::DialectRegistry registry;
    registerRfuseDialects(registry);
    mlir::MLIRContext ctx(registry);
    auto module = mlir::parseSourceString<mlir::ModuleOp>(layerNorm(rows), &ctx);
    ASSERT_TRUE(module);
    mlir::PassManager pm(&ctx);
    pm.addPass(createAutodiff(AutodiffOptions{}));
    ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    Kernels k = kernelsOf(os.str());
    bool warpRows = false;
    for (auto &p : k.plans)
      if (p.kernel && p.kernel->rowsPerBlock > 1) {
        warpRows = true;
        EXPECT_EQ(p.kernel->blockSize, 32 * p.kernel->rowsPerBlock);
        EXPECT_EQ(p.kernel->grid, (unsigned)((p.kernel->rows + p.kernel->rowsPerBlock - 1) / p.kernel->rowsPerBlock));
      }
    EXPECT_EQ(warpRows, rows == 8192) << rows << " rows";
    setOption("disk_cache", "0");
    EXPECT_NO_THROW(cuda::compileKernels(k.names, k.sources, "sm_90")) << rows << " rows";
    setOption("disk_cache", "1");
  }
}

TEST(CudaCodegen, ReductionsOverNothingCompile) {
  // R's max(numeric(0)) and colSums of a 0-row matrix: rows of length 0 (a row kernel must not
  // declare zero-length register caches) and outputs over an empty reduced dim.
  if (cuda::nvrtcVersion() == 0)
    GTEST_SKIP() << "NVRTC is not installed on this machine";
  for (std::vector<int64_t> shape : {std::vector<int64_t>{0}, std::vector<int64_t>{3, 0}, std::vector<int64_t>{0, 3}}) {
    GraphBuilder g("main");
    TracedValue x = g.input(shape, DType::F64, "x");
    TracedValue mx = g.reduceMax(x, {(int64_t)shape.size() - 1});
    TracedValue s = g.reduceSum(g.exp(x), {(int64_t)shape.size() - 1});
    g.finish({mx, s});
    Kernels k = kernelsOf(g.moduleText());
    setOption("disk_cache", "0");
    EXPECT_NO_THROW(cuda::compileKernels(k.names, k.sources, "sm_90")) << "shape [" << shape[0] << "...]";
    setOption("disk_cache", "1");
  }
}

// Kernels mixing 4- and 2-byte elements (a bfloat16 product's f32 epilogue, a softmax writing
// f32 and bfloat16 probabilities) load and store 4 elements at once: a float4 and 8 bytes of
// bfloat16 or f16. Element by element, a warp's narrow stores wrote every fourth element of four
// lines (the softmax ran at 1.2 TB/s on an H100, its f32-only twin at 2.5). Each compiles here.
TEST(CudaCodegen, NarrowFloatsLoadAndStoreFourElementsAtOnce) {
  for (DType narrow : {DType::BF16, DType::F16}) {
    GraphBuilder g("main");
    TracedValue p = g.input({64, 1000}, narrow, "p"), s = g.input({64, 1000}, DType::F32, "s");
    TracedValue y = g.mul(g.cast(p, DType::F32), s);
    TracedValue z = g.input({64, 256}, DType::F32, "z");
    TracedValue e = g.exp(g.sub(z, g.broadcastTo(g.reduceMax(z, {1}, true), {64, 256})));
    TracedValue sm = g.div(e, g.broadcastTo(g.reduceSum(e, {1}, true), {64, 256}));
    g.finish({y, g.cast(y, narrow), sm, g.cast(sm, narrow)});
    Kernels k = kernelsOf(g.moduleText());
    ASSERT_EQ(k.plans.size(), 2u);
    const char *narrowType = narrow == DType::BF16 ? "__nv_bfloat16" : "__half";
    int pointwise = 0, rows = 0;
    for (size_t i = 0; i < k.plans.size(); ++i) {
      const std::string &src = k.sources[i];
      if (k.plans[i].kernel->launch == cuda::LaunchKind::GridStride) {
        ++pointwise;
        EXPECT_EQ(k.plans[i].kernel->vectorWidth, 4) << src;
        EXPECT_NE(src.find("const uint2 vin"), std::string::npos) << src;
        EXPECT_NE(src.find("reinterpret_cast<" + std::string(narrowType) + "*>(&vout"), std::string::npos) << src;
        EXPECT_NE(src.find("for (long long idx = n / 4 * 4 + tid"), std::string::npos) << "a tail loop: " << src;
      } else {
        ++rows;
        EXPECT_NE(src.find("reinterpret_cast<uint2*>(out"), std::string::npos) << src;
        EXPECT_NE(src.find("reinterpret_cast<float4*>(out"), std::string::npos) << src;
      }
    }
    EXPECT_EQ(pointwise, 1);
    EXPECT_EQ(rows, 1);
    if (cuda::nvrtcVersion() != 0)
      EXPECT_NO_THROW(cuda::compileKernels(k.names, k.sources, "sm_90"));
  }
}

// A bfloat16 product that the program widens to f32 and nothing else reads (attention's scores,
// scaled by 1 / sqrt(d)) is written in f32 by cuBLASLt itself (with the scale as alpha): no
// kernel reads the narrow product to write it again four bytes wide. Anything else after the
// widening keeps the generated epilogue; so does lt_f32_results = FALSE.
TEST(CudaCodegen, WidenedNarrowProductsAreWrittenInF32ByTheLibrary) {
  auto plansOf = [](const std::function<TracedValue(GraphBuilder &, TracedValue)> &after, bool f32Results) {
    GraphBuilder g("main");
    TracedValue q = g.input({16, 64, 32}, DType::BF16, "q"), k = g.input({16, 64, 32}, DType::BF16, "k");
    g.finish({after(g, g.cast(g.matmul(q, k, false, true), DType::F32))});
    CodegenOptions options;
    options.f32ResultsOfNarrowProducts = f32Results;
    return kernelsOf(g.moduleText(), {}, options).plans;
  };
  auto scaled = [](GraphBuilder &g, TracedValue s) { return g.div(s, g.scalar(8.0, DType::F32)); };
  auto alone = [](GraphBuilder &, TracedValue s) { return s; };
  auto tanh = [](GraphBuilder &g, TracedValue s) { return g.tanh(s); };
  for (auto [after, alpha] : {std::pair{std::function<TracedValue(GraphBuilder &, TracedValue)>(scaled), 0.125},
                              std::pair{std::function<TracedValue(GraphBuilder &, TracedValue)>(alone), 1.0}}) {
    auto plans = plansOf(after, true);
    ASSERT_EQ(plans.size(), 1u);
    ASSERT_TRUE(plans[0].library);
    const codegen::MatmulCall &m = plans[0].library->matmul;
    EXPECT_TRUE(m.f32Result);
    EXPECT_EQ(m.dtype, DType::BF16);
    EXPECT_EQ(m.alpha, alpha);
    EXPECT_EQ(plans[0].library->productBytes(), 16u * 64 * 64 * 4) << "an f32 result";
    EXPECT_FALSE(plans[0].kernel) << "no epilogue kernel";
    EXPECT_NE(plans[0].library->describe().find("bf16 tB -> f32"), std::string::npos) << plans[0].library->describe();
    auto off = plansOf(after, false);
    ASSERT_TRUE(off[0].library);
    EXPECT_FALSE(off[0].library->matmul.f32Result);
    EXPECT_TRUE(off[0].kernel) << "lt_f32_results = FALSE: the widening in a generated kernel";
  }
  auto plans = plansOf(tanh, true);
  ASSERT_TRUE(plans[0].library);
  EXPECT_FALSE(plans[0].library->matmul.f32Result);
  EXPECT_EQ(plans[0].library->matmul.alpha, 1.0);
  EXPECT_TRUE(plans[0].kernel);
  // The runtime option reaches a compiled program's GPU plan.
  GraphBuilder g("main");
  TracedValue q = g.input({16, 64, 32}, DType::BF16, "q"), k = g.input({16, 64, 32}, DType::BF16, "k");
  g.finish({scaled(g, g.cast(g.matmul(q, k, false, true), DType::F32))});
  for (const char *folded : {"1", "0"}) {
    setOption("lt_f32_results", folded);
    bool f32Result = false;
    auto program = compileProgram(g.moduleText(), "default");
    for (const std::string &step : program->info().gpuPlan)
      f32Result |= step.find("bf16 tB -> f32 alpha=0.125") != std::string::npos;
    EXPECT_EQ(f32Result, std::string(folded) == "1") << "lt_f32_results " << folded;
  }
  setOption("lt_f32_results", "1");
}

// Option max_pool_backward_kernel: rfuse.max_pool2d_backward becomes a generated grid-stride
// kernel (three inputs: the pooling's input, its output and the output's gradient) that NVRTC
// compiles; off (the default), a cuDNN pooling call.
TEST(CudaCodegen, MaxPoolBackwardKernelIsGeneratedWhenAsked) {
  const char *text = R"(
func.func @main(%x: tensor<4x16x16x8xf32>, %y: tensor<4x8x8x8xf32>, %dy: tensor<4x8x8x8xf32>) -> tensor<4x16x16x8xf32> {
  %dx = rfuse.max_pool2d_backward %x, %y, %dy {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, layout = #rfuse.layout<NHWC>} : (tensor<4x16x16x8xf32>, tensor<4x8x8x8xf32>, tensor<4x8x8x8xf32>) -> tensor<4x16x16x8xf32>
  return %dx : tensor<4x16x16x8xf32>
})";
  mlir::DialectRegistry registry;
  registerRfuseDialects(registry);
  mlir::MLIRContext ctx(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  ASSERT_TRUE(module);
  mlir::Operation *pool = nullptr;
  module->walk([&](MaxPool2dBackwardOp op) { pool = op; });
  ASSERT_TRUE(pool);
  CodegenOptions on;
  on.maxPoolBackwardKernel = true;
  cuda::KernelPlan p = cuda::planOperation(pool, "pool_bwd", {}, on);
  ASSERT_TRUE(p.kernel) << p.unsupported;
  EXPECT_FALSE(p.library);
  EXPECT_EQ(p.kernel->launch, cuda::LaunchKind::GridStride);
  EXPECT_EQ(p.kernel->elements, 4 * 16 * 16 * 8);
  EXPECT_EQ(p.kernel->numInputs, 3);
  const std::string &src = p.kernel->source;
  EXPECT_NE(src.find("windows 3x3 stride 2x2, NHWC"), std::string::npos) << src;
  EXPECT_NE(src.find("if (v == m || m != m)"), std::string::npos) << "the first maximum, or the first tap of a NaN window";
  EXPECT_EQ(src.find("atomicAdd"), std::string::npos) << "gathered, not scattered";
  if (cuda::nvrtcVersion() > 0) {
    setOption("disk_cache", "0");
    std::vector<cuda::CompiledKernel> out;
    EXPECT_NO_THROW(out = cuda::compileKernels({p.kernel->name}, {src}, "sm_90")) << src;
    setOption("disk_cache", "1");
  }
  cuda::KernelPlan off = cuda::planOperation(pool, "pool_bwd");
  ASSERT_TRUE(off.library);
  EXPECT_EQ(off.library->kind, codegen::LibraryCall::Kind::Pool);
  EXPECT_FALSE(off.kernel);
}
