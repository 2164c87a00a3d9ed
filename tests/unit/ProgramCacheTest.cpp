// The disk cache of compiled programs: a second compile of the same traced text (as a new
// process would) runs no passes and gives the same program; what keys it and what it rejects.
#include "TestUtil.h"

#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/Options.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

using namespace rfuse;

namespace {

// A fresh private cache directory for the test, restored afterwards.
struct ScratchCache {
  std::string dir, old = runtimeOptions().cacheDir;
  bool oldDisk = runtimeOptions().diskCache;
  ScratchCache() {
    llvm::SmallString<128> path;
    llvm::sys::fs::createUniqueDirectory("rfuse-program-cache", path);
    dir = std::string(path) + "/cache";
    setOption("cache_dir", dir);
    setOption("disk_cache", "1");
  }
  ~ScratchCache() {
    setOption("cache_dir", old);
    setOption("disk_cache", oldDisk ? "1" : "0");
    llvm::sys::fs::remove_directories(llvm::sys::path::parent_path(dir));
  }
};

std::string mlpText() {
  GraphBuilder g;
  TracedValue x = g.input({8, 16}, DType::F64, "x"), w = g.input({16, 4}, DType::F64, "w");
  g.setSourceLocation("tanh(x %*% w)");
  TracedValue h = g.tanh(g.matmul(x, w));
  g.finish({g.reduceSum(g.mul(h, h), {0, 1})});
  return g.moduleText(/*withLocations=*/true);
}

TEST(ProgramCache, ASecondCompileRunsNoPassesAndGivesTheSameProgram) {
  ScratchCache cache;
  std::string text = mlpText();
  ProgramCacheStats s0 = programCacheStats();
  auto first = compileProgram(text, "default");
  ProgramCacheStats s1 = programCacheStats();
  EXPECT_EQ(s1.passRuns, s0.passRuns + 1);
  EXPECT_EQ(s1.diskWrites, s0.diskWrites + 1);
  auto second = compileProgram(text, "default");
  ProgramCacheStats s2 = programCacheStats();
  EXPECT_EQ(s2.passRuns, s1.passRuns);
  EXPECT_EQ(s2.diskHits, s1.diskHits + 1);
  EXPECT_EQ(second->info().fusedText, first->info().fusedText);
  EXPECT_EQ(second->info().kernelCount, first->info().kernelCount);
  EXPECT_EQ(second->info().bytesMoved, first->info().bytesMoved);
  // The kernels still quote where their ops came from (the module is kept with its locations).
  EXPECT_EQ(second->info().cudaSources, first->info().cudaSources);
  std::mt19937_64 rng(3);
  std::vector<HostTensor> in = {test::randomTensor(DType::F64, {8, 16}, rng), test::randomTensor(DType::F64, {16, 4}, rng)};
  EXPECT_EQ(second->run(in, Device::Cpu)[0].f, first->run(in, Device::Cpu)[0].f);
  // Another pipeline, or a gradient of the same text, is another program.
  compileProgram(text, "no-fusion");
  GradientRequest grad;
  grad.wrt = {1};
  auto g1 = compileGradientProgram(text, "default", grad);
  grad.wrt = {0, 1};
  auto g2 = compileGradientProgram(text, "default", grad);
  ProgramCacheStats s3 = programCacheStats();
  EXPECT_EQ(s3.passRuns, s2.passRuns + 3);
  EXPECT_EQ(g2->run(in, Device::Cpu).size(), 3u);
  auto g2again = compileGradientProgram(text, "default", grad);
  EXPECT_EQ(programCacheStats().diskHits, s3.diskHits + 1);
  EXPECT_EQ(g2again->run(in, Device::Cpu)[2].f, g2->run(in, Device::Cpu)[2].f);
}

TEST(ProgramCache, CorruptEntriesAreRecompiledAndKeepingPassesBypassesIt) {
  ScratchCache cache;
  std::string text = mlpText();
  compileProgram(text, "default");
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(cache.dir, ec), end; it != end && !ec; it.increment(ec))
    if (llvm::StringRef(it->path()).ends_with(".program")) {
      std::fstream f(it->path(), std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(-5, std::ios::end);
      f.write("XXXXX", 5); // the payload no longer matches its checksum
    }
  ProgramCacheStats before = programCacheStats();
  auto p = compileProgram(text, "default");
  ProgramCacheStats after = programCacheStats();
  EXPECT_EQ(after.rejected, before.rejected + 1);
  EXPECT_EQ(after.passRuns, before.passRuns + 1);
  EXPECT_FALSE(p->info().fusedText.empty());
  CompileOptions keep;
  keep.recordPasses = true; // every pass's IR is wanted: the passes run
  auto recorded = compileProgram(text, "default", "main", keep);
  EXPECT_EQ(programCacheStats().passRuns, after.passRuns + 1);
  EXPECT_FALSE(recorded->info().passes.empty());
}

// The CPU JIT's objects persist too (issue 18): a new process (here: the process's JIT cache
// forgotten) that compiles the same program runs no LLVM codegen, and gets the same answers;
// a damaged object is compiled again.
TEST(ProgramCache, CpuJitObjectsAreReadBackInsteadOfCompiled) {
  ScratchCache cache;
  std::string text = mlpText();
  std::mt19937_64 rng(3);
  std::vector<HostTensor> in = {test::randomTensor(DType::F64, {8, 16}, rng), test::randomTensor(DType::F64, {16, 4}, rng)};
  clearCompiledCaches(); // earlier tests' compiles of the same functions are in memory, not in this cache
  std::vector<HostTensor> first = compileProgram(text, "default")->run(in, Device::Cpu);
  clearCompiledCaches();
  CpuJitStats before = cpuJitStats();
  std::vector<HostTensor> second = compileProgram(text, "default")->run(in, Device::Cpu);
  CpuJitStats after = cpuJitStats();
  EXPECT_EQ(after.compiled, before.compiled) << "no LLVM codegen";
  EXPECT_GE(after.diskHits, before.diskHits + 1);
  ASSERT_EQ(second.size(), first.size());
  EXPECT_EQ(second[0].f, first[0].f);
  // Damage every object: each is compiled again (with a warning), the answer unchanged.
  std::error_code ec;
  int objects = 0;
  for (llvm::sys::fs::directory_iterator it(cache.dir, ec), end; it != end && !ec; it.increment(ec))
    if (llvm::StringRef(it->path()).ends_with(".cpuobj")) {
      std::fstream f(it->path(), std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(-5, std::ios::end);
      f.write("XXXXX", 5);
      ++objects;
    }
  EXPECT_GE(objects, 1);
  clearCompiledCaches();
  before = cpuJitStats();
  std::vector<HostTensor> third = compileProgram(text, "default")->run(in, Device::Cpu);
  after = cpuJitStats();
  EXPECT_EQ(after.compiled, before.compiled + objects);
  EXPECT_EQ(after.diskHits, before.diskHits);
  EXPECT_EQ(third[0].f, first[0].f);
}

} // namespace
