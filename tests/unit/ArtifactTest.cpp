// The ahead-of-time artifact and rfuse_rt (issue 18): export, the container's checks, the plan's
// JSON round trip, target selection, the C API's statuses, and that the runtime library and
// rfuse-aot-run link no compiler. Running an artifact needs a GPU: tests/gpu/GpuTest.cpp.
#include "CorpusUtil.h"
#include "RandomGraph.h"
#include "TestUtil.h"

#include "artifact/Manifest.h"
#include "artifact/PlanJson.h"
#include "cpu/CpuJit.h"

#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Runtime/Artifact.h"
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/Interpreter.h"
#include "rfuse/rfuse_rt.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

using namespace rfuse;
using namespace rfuse::artifact;

namespace {

std::pair<int, std::string> runCommand(const std::string &cmd) {
  std::string out;
  FILE *p = popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p))
    out.append(buf, n);
  int rc = pclose(p);
  return {WEXITSTATUS(rc), out};
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// NVRTC compiles without a GPU; where it is missing the export tests cannot run.
bool haveNvrtc() { return cuda::nvrtcVersion() > 0; }

class Artifact : public ::testing::Test {
protected:
  void SetUp() override {
    if (!haveNvrtc())
      GTEST_SKIP() << "NVRTC is not installed: an artifact's kernels cannot be compiled";
  }
  // W4 (layer norm + GELU + residual: reductions, constants) exported for two architectures.
  std::string exportW4(const std::string &name, ExportOptions o = {}) {
    std::string path = std::string(::testing::TempDir()) + "/" + name + ".rfuse";
    if (o.archs.empty())
      o.archs = {"sm_90", "sm_86"};
    compileProgram(test::canonicalCorpus()[1].moduleText, "default")->exportArtifact(path, o);
    return path;
  }
};

TEST_F(Artifact, HoldsAPlanPerArchitectureWithCubinsAndPtxOfTheNewest) {
  std::string path = exportW4("rfuse_artifact_w4");
  Container c = Container::read(path);
  Manifest m = Manifest::fromJson(c.at("manifest.json"), "0.1.0");
  ASSERT_EQ(m.cuda.size(), 2u);
  EXPECT_EQ(m.cuda[0].arch, "sm_86") << "targets in architecture order";
  EXPECT_EQ(m.cuda[1].arch, "sm_90");
  EXPECT_EQ(m.ptxArch, "sm_90");
  EXPECT_EQ(m.inputs.size(), test::canonicalCorpus()[1].inputs.size());
  ASSERT_FALSE(m.outputs.empty());
  for (const CudaTargetEntry &t : m.cuda) {
    ASSERT_FALSE(t.kernels.empty()) << t.arch;
    for (const auto &[name, f] : t.kernels) {
      EXPECT_EQ(c.at(f.cubin).substr(0, 4), "\x7f" "ELF") << name << " " << t.arch << ": a cubin is an ELF image";
      if (t.arch == "sm_90") {
        EXPECT_NE(c.at(f.ptx).find(".target sm_90"), std::string::npos) << name << ": PTX for compute_90";
      } else {
        EXPECT_TRUE(f.ptx.empty()) << "PTX only for the newest architecture";
      }
    }
    // The plan reads back to the same JSON (every field the runtime uses survives).
    nlohmann::json j = nlohmann::json::parse(c.at(t.plan));
    codegen::ExecutionPlan plan = planFromJson(j);
    EXPECT_EQ(planToJson(plan), j) << t.arch;
    EXPECT_EQ(plan.target.cuda.arch, t.arch);
    for (const codegen::Step &s : plan.steps) {
      EXPECT_NE(s.kind, codegen::Step::Kind::Host) << s.label;
      if (s.kind == codegen::Step::Kind::Constant) {
        ASSERT_TRUE(t.constants.count(s.out[0])) << "constant " << s.label << " stored";
        EXPECT_EQ(c.at(t.constants.at(s.out[0])).size(), plan.slots[s.out[0]].bytes);
      }
    }
  }
}

TEST_F(Artifact, DamagedTruncatedAndForeignFilesAreRefusedNamingWhy) {
  std::string path = exportW4("rfuse_artifact_damage");
  std::string good = readFile(path);
  ASSERT_NO_THROW(Container::parse(good, path));
  auto statusOf = [&](const std::string &bytes) {
    try {
      Container::parse(bytes, "x.rfuse");
    } catch (const ArtifactError &e) {
      return std::make_pair(e.status, std::string(e.what()));
    }
    return std::make_pair(Status::Ok, std::string());
  };
  // Every truncation is caught (the header, the table, any entry).
  for (size_t len : {size_t(0), size_t(4), size_t(12), size_t(23), size_t(40), good.size() / 2, good.size() - 1}) {
    auto [s, msg] = statusOf(good.substr(0, len));
    EXPECT_EQ(s, Status::Corrupt) << "truncated to " << len << ": " << msg;
  }
  // A flipped byte anywhere after the header: a checksum does not match.
  for (size_t at : {size_t(30), good.size() / 3, good.size() - 2}) {
    std::string bad = good;
    bad[at] ^= 0x5a;
    auto [s, msg] = statusOf(bad);
    EXPECT_EQ(s, Status::Corrupt) << "byte " << at << ": " << msg;
    EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
  }
  {
    std::string other = good;
    other[8] = 7; // format version 7
    auto [s, msg] = statusOf(other);
    EXPECT_EQ(s, Status::Version) << msg;
    EXPECT_NE(msg.find("format 7"), std::string::npos) << msg;
  }
  EXPECT_EQ(statusOf("module { func.func @main() { return } }").first, Status::Corrupt) << "not an artifact";

  // A well-formed artifact from another rfuse version: the manifest says so.
  Container c = Container::parse(good, path);
  nlohmann::json m = nlohmann::json::parse(c.at("manifest.json"));
  m["rfuse_version"] = "0.0.9";
  c.entries["manifest.json"] = m.dump();
  try {
    Manifest::fromJson(c.at("manifest.json"), "0.1.0");
    ADD_FAILURE() << "another version was accepted";
  } catch (const ArtifactError &e) {
    EXPECT_EQ(e.status, Status::Version);
    EXPECT_NE(std::string(e.what()).find("0.0.9"), std::string::npos) << e.what();
  }
  // A plan that indexes past its slots is refused, not run.
  std::string planEntry = Manifest::fromJson(Container::parse(good, path).at("manifest.json"), "0.1.0").cuda[0].plan;
  nlohmann::json plan = nlohmann::json::parse(c.at(planEntry));
  plan["steps"][0]["in"] = {123456};
  try {
    planFromJson(plan);
    ADD_FAILURE() << "a plan reading a slot it does not have was accepted";
  } catch (const ArtifactError &e) {
    EXPECT_EQ(e.status, Status::Corrupt);
    EXPECT_NE(std::string(e.what()).find("bad slot"), std::string::npos) << e.what();
  }
}

TEST_F(Artifact, TheCApiReportsStatusesAndMessages) {
  std::string path = exportW4("rfuse_artifact_capi");
  rfuse_rt_program *p = nullptr;
  EXPECT_EQ(rfuse_rt_load("/nonexistent/model.rfuse", &p), RFUSE_RT_ERROR_IO);
  EXPECT_NE(std::string(rfuse_rt_last_error()).find("/nonexistent/model.rfuse"), std::string::npos)
      << rfuse_rt_last_error();
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(rfuse_rt_load(nullptr, &p), RFUSE_RT_ERROR_INVALID_ARGUMENT);
  std::string truncated = std::string(::testing::TempDir()) + "/rfuse_artifact_truncated.rfuse";
  writeFile(truncated, readFile(path).substr(0, 100));
  EXPECT_EQ(rfuse_rt_load(truncated.c_str(), &p), RFUSE_RT_ERROR_CORRUPT);
  EXPECT_NE(std::string(rfuse_rt_last_error()).find("truncated"), std::string::npos) << rfuse_rt_last_error();
  EXPECT_EQ(std::string(rfuse_rt_status_name(RFUSE_RT_ERROR_CORRUPT)), "corrupt artifact");
  EXPECT_EQ(rfuse_rt_format_version(), kFormatVersion);
  EXPECT_EQ(rfuse_rt_run(nullptr), RFUSE_RT_ERROR_INVALID_ARGUMENT);

  rfuse_rt_status s = rfuse_rt_load(path.c_str(), &p);
  if (!cuda::deviceInfo().present) { // this machine: a valid artifact and no GPU to run it on
    EXPECT_EQ(s, RFUSE_RT_ERROR_NO_DEVICE) << rfuse_rt_last_error();
    EXPECT_NE(std::string(rfuse_rt_last_error()).find("no CUDA"), std::string::npos) << rfuse_rt_last_error();
    return;
  }
  ASSERT_EQ(s, RFUSE_RT_OK) << rfuse_rt_last_error();
  rfuse_rt_dtype dt;
  size_t rank;
  const int64_t *shape;
  ASSERT_EQ(rfuse_rt_input_type(p, 0, &dt, &rank, &shape), RFUSE_RT_OK);
  EXPECT_EQ(rfuse_rt_input_type(p, 99, &dt, &rank, &shape), RFUSE_RT_ERROR_INVALID_ARGUMENT);
  std::vector<char> bytes(rfuse_rt_input_bytes(p, 0));
  EXPECT_EQ(rfuse_rt_set_input(p, 0, dt == RFUSE_RT_F32 ? RFUSE_RT_F64 : RFUSE_RT_F32, shape, rank, bytes.data(),
                               bytes.size()),
            RFUSE_RT_ERROR_DTYPE);
  std::vector<int64_t> wrong(shape, shape + rank);
  wrong[0] += 1;
  EXPECT_EQ(rfuse_rt_set_input(p, 0, dt, wrong.data(), rank, bytes.data(), bytes.size()), RFUSE_RT_ERROR_SHAPE);
  EXPECT_NE(std::string(rfuse_rt_last_error()).find("input 0"), std::string::npos) << rfuse_rt_last_error();
  EXPECT_EQ(rfuse_rt_run(p), RFUSE_RT_ERROR_INVALID_ARGUMENT) << "inputs never set";
  rfuse_rt_free(p);
}

// rfuse.solve runs on the host interpreter (LAPACK) on a GPU; rfuse_rt has no interpreter, so the
// export refuses, naming the step, instead of writing an artifact that cannot run.
TEST_F(Artifact, AProgramWithAHostStepIsRefusedNamingIt) {
  GraphBuilder g;
  TracedValue a = g.input({6, 6}, DType::F64), b = g.input({3, 6}, DType::F64);
  g.finish({g.tanh(g.solve(g.add(g.matmul(a, a, true, false), g.broadcastTo(g.scalar(6.0, DType::F64), {6, 6})),
                           g.exp(b), 2.220446049250313e-16))});
  std::string path = std::string(::testing::TempDir()) + "/rfuse_artifact_solve.rfuse";
  std::remove(path.c_str());
  try {
    compileProgram(g.moduleText(), "default")->exportArtifact(path, {{"sm_90"}, false});
    ADD_FAILURE() << "exported a program with a host step";
  } catch (const ArtifactError &e) {
    EXPECT_EQ(e.status, Status::Unsupported);
    EXPECT_NE(std::string(e.what()).find("solve"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("host interpreter"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::ifstream(path).good()) << "nothing written";
}

// Exports `text` as a CPU-only artifact and runs it through the C API; false when the export
// refuses (a step the CPU backend interprets). Every output must equal the interpreter's.
bool expectCpuArtifactMatchesInterpreter(const std::string &name, const std::string &text,
                                         const std::vector<HostTensor> &inputs) {
  std::string path = std::string(::testing::TempDir()) + "/rfuse_cpu_artifact.rfuse";
  ExportOptions o;
  o.cuda = false;
  o.cpu = true;
  try {
    compileProgram(text, "default")->exportArtifact(path, o);
  } catch (const ArtifactError &e) {
    EXPECT_EQ(e.status, Status::Unsupported) << name << ": " << e.what();
    return false;
  }
  rfuse_rt_program *p = nullptr;
  EXPECT_EQ(rfuse_rt_load(path.c_str(), &p), RFUSE_RT_OK) << name << ": " << rfuse_rt_last_error();
  if (!p)
    return true;
  EXPECT_NE(std::string(rfuse_rt_describe(p)).find("cpu"), std::string::npos) << rfuse_rt_describe(p);
  std::vector<HostTensor> ref = interpretText(text, "main", inputs);
  EXPECT_EQ(rfuse_rt_num_outputs(p), ref.size()) << name;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<char> b = inputs[i].toBytes();
    EXPECT_EQ(rfuse_rt_set_input(p, i, artifact::toRtDType(inputs[i].dtype), inputs[i].shape.data(), inputs[i].shape.size(),
                                 b.data(), b.size()),
              RFUSE_RT_OK)
        << name << ": " << rfuse_rt_last_error();
  }
  EXPECT_EQ(rfuse_rt_run(p), RFUSE_RT_OK) << name << ": " << rfuse_rt_last_error();
  for (size_t i = 0; i < ref.size() && i < rfuse_rt_num_outputs(p); ++i) {
    std::vector<char> b(rfuse_rt_output_bytes(p, i));
    EXPECT_EQ(rfuse_rt_get_output(p, i, b.data(), b.size()), RFUSE_RT_OK) << rfuse_rt_last_error();
    HostTensor got = HostTensor::fromBytes(ref[i].dtype, ref[i].shape, b.data());
    if (!ref[i].isFloat()) {
      EXPECT_EQ(got.i, ref[i].i) << name << " output " << i;
      continue;
    }
    double tol = ref[i].dtype == DType::F64 ? 1e-12 : 1e-5;
    EXPECT_LE(test::maxRelError(got.f, ref[i].f, 1e-3), tol) << name << " output " << i;
  }
  rfuse_rt_free(p);
  return true;
}

// The round trip the issue asks for, on this machine: the corpus and random graphs exported as
// CPU artifacts (kernels compiled to a shared library) and run by rfuse_rt equal the
// interpreter. Most must export (the CPU backend interprets f16/bf16 and a few ops).
TEST_F(Artifact, CpuArtifactsOfTheCorpusAndRandomGraphsEqualTheInterpreter) {
  int exported = 0, total = 0;
  for (const test::CorpusGraph &g : test::canonicalCorpus()) {
    exported += expectCpuArtifactMatchesInterpreter(g.name, g.moduleText, g.inputs);
    ++total;
  }
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    test::RandomGraph g = test::generateRandomGraph(seed);
    exported += expectCpuArtifactMatchesInterpreter("random seed " + std::to_string(seed), g.moduleText, g.inputs);
    ++total;
  }
  EXPECT_GE(exported, total * 3 / 4) << exported << " of " << total << " exported";
}

// rfuse_rt_load_memory: the same artifact from its bytes (one embedded in a binary, or kept inside
// another artifact, as a training step file keeps its last batch's step) loads and runs as from
// its file; damaged bytes are named by the name given.
TEST_F(Artifact, TheCApiLoadsAnArtifactFromMemory) {
  ExportOptions o;
  o.cuda = false;
  o.cpu = true;
  std::string path = exportW4("rfuse_artifact_memory", o);
  std::string bytes = readFile(path);
  rfuse_rt_program *fromFile = nullptr, *fromMemory = nullptr;
  ASSERT_EQ(rfuse_rt_load(path.c_str(), &fromFile), RFUSE_RT_OK) << rfuse_rt_last_error();
  ASSERT_EQ(rfuse_rt_load_memory(bytes.data(), bytes.size(), "w4 in memory", &fromMemory), RFUSE_RT_OK)
      << rfuse_rt_last_error();
  EXPECT_EQ(std::string(rfuse_rt_describe(fromMemory)), std::string(rfuse_rt_describe(fromFile)));
  std::vector<std::vector<char>> outs;
  for (rfuse_rt_program *p : {fromFile, fromMemory}) {
    for (size_t i = 0; i < rfuse_rt_num_inputs(p); ++i) {
      rfuse_rt_dtype dt;
      size_t rank;
      const int64_t *shape;
      ASSERT_EQ(rfuse_rt_input_type(p, i, &dt, &rank, &shape), RFUSE_RT_OK);
      std::vector<float> v(rfuse_rt_input_bytes(p, i) / sizeof(float));
      for (size_t k = 0; k < v.size(); ++k)
        v[k] = std::sin(0.1f * (float)(k + 7 * i));
      ASSERT_EQ(rfuse_rt_set_input(p, i, dt, shape, rank, v.data(), v.size() * sizeof(float)), RFUSE_RT_OK)
          << rfuse_rt_last_error();
    }
    ASSERT_EQ(rfuse_rt_run(p), RFUSE_RT_OK) << rfuse_rt_last_error();
    outs.emplace_back(rfuse_rt_output_bytes(p, 0));
    ASSERT_EQ(rfuse_rt_get_output(p, 0, outs.back().data(), outs.back().size()), RFUSE_RT_OK);
  }
  EXPECT_EQ(outs[0], outs[1]);
  rfuse_rt_free(fromFile);
  rfuse_rt_free(fromMemory);
  rfuse_rt_program *p = nullptr;
  EXPECT_EQ(rfuse_rt_load_memory(bytes.data(), bytes.size() / 2, "half of w4", &p), RFUSE_RT_ERROR_CORRUPT);
  EXPECT_NE(std::string(rfuse_rt_last_error()).find("half of w4"), std::string::npos) << rfuse_rt_last_error();
  EXPECT_EQ(rfuse_rt_load_memory(nullptr, 10, "nothing", &p), RFUSE_RT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(p, nullptr);
}

TEST(ArtifactCpu, TheExportingMachineHasTheFeaturesItsKernelsNeed) {
  auto [cpu, features] = cpu::jitTarget();
  ASSERT_FALSE(features.empty());
  EXPECT_TRUE(missingCpuFeatures(features).empty()) << features;
  EXPECT_TRUE(missingCpuFeatures("+madeup-feature,-avx2").empty()) << "unknown and absent features ask nothing";
}

TEST(ArtifactTargets, ACubinOfTheSameMajorVersionElsePtxElseAClearError) {
  Manifest m;
  for (const char *a : {"sm_80", "sm_86", "sm_90"}) {
    CudaTargetEntry e;
    e.arch = a;
    m.cuda.push_back(e);
  }
  m.ptxArch = "sm_90";
  bool ptx = true;
  EXPECT_EQ(selectCudaTarget(m, "sm_86", ptx).arch, "sm_86");
  EXPECT_FALSE(ptx);
  EXPECT_EQ(selectCudaTarget(m, "sm_89", ptx).arch, "sm_86") << "sm_86 code runs on sm_89";
  EXPECT_FALSE(ptx);
  EXPECT_EQ(selectCudaTarget(m, "sm_90", ptx).arch, "sm_90");
  EXPECT_EQ(selectCudaTarget(m, "sm_100", ptx).arch, "sm_90");
  EXPECT_TRUE(ptx) << "a newer GPU runs the PTX";
  m.cuda.erase(m.cuda.begin()); // no sm_80
  try {
    selectCudaTarget(m, "sm_75", ptx);
    ADD_FAILURE() << "sm_75 has nothing to run";
  } catch (const ArtifactError &e) {
    EXPECT_EQ(e.status, Status::Architecture);
    EXPECT_NE(std::string(e.what()).find("sm_86, sm_90"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("this GPU is sm_75"), std::string::npos) << e.what();
  }
  m.ptxArch.clear();
  EXPECT_THROW(selectCudaTarget(m, "sm_100", ptx), ArtifactError) << "no PTX: sm_100 cannot run sm_90 cubins";
}

TEST(ArtifactRuntime, LinksNoCompiler) {
  // rfuse_rt and the runner need only libc/libstdc++ and rfuse's own MLIR-free libraries; the
  // CUDA libraries are dlopen'd.
  for (const char *file : {"/lib/librfuse_rt.so", "/bin/rfuse-aot-run"}) {
    auto [rc, out] = runCommand("ldd " + std::string(RFUSE_BINARY_DIR) + file);
    ASSERT_EQ(rc, 0) << out;
    for (const char *lib : {"libMLIR", "libLLVM", "nvrtc", "libcuda", "cublas", "cudnn", "libRfuseIR",
                            "libRfuseCodegen", "libRfusePasses", "libRfuseRuntime"})
      EXPECT_EQ(out.find(lib), std::string::npos) << file << " needs " << lib << ":\n" << out;
    EXPECT_NE(out.find("libc.so"), std::string::npos) << out;
  }
}

TEST_F(Artifact, RfusecWritesItAndTwoWritersOfOnePathLeaveAWholeFile) {
  std::string dir = std::string(::testing::TempDir()) + "/rfuse_artifact_cli";
  std::string mlir = dir + ".mlir", out = dir + ".rfuse";
  writeFile(mlir, test::canonicalCorpus()[0].moduleText);
  std::string rfusec = std::string(RFUSE_BINARY_DIR) + "/bin/rfusec " + mlir + " --arch sm_90 -o " + out;
  auto [rc, log] = runCommand("(" + rfusec + " > " + dir + ".1 2>&1 & " + rfusec + " > " + dir + ".2 2>&1 & wait); cat " +
                              dir + ".1 " + dir + ".2");
  EXPECT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("wrote " + out), std::string::npos) << log;
  EXPECT_NO_THROW(Container::read(out)) << "a whole artifact";
  auto [rc2, log2] = runCommand(std::string(RFUSE_BINARY_DIR) + "/bin/rfusec " + mlir + " --arch gfx90a -o " + out);
  EXPECT_NE(rc2, 0);
  EXPECT_NE(log2.find("gfx90a is not a GPU architecture"), std::string::npos) << log2;
  // rfusec --cpu --no-gpu -> rfuse-aot-run prints what rfuse-run --device cpu-jit (the same
  // compiled kernels, JIT-compiled) prints, line by line.
  std::string cpuOut = dir + ".cpu.rfuse";
  auto [rc5, log5] = runCommand(std::string(RFUSE_BINARY_DIR) + "/bin/rfusec " + mlir + " --cpu --no-gpu -o " + cpuOut);
  ASSERT_EQ(rc5, 0) << log5;
  auto [rc6, aot] = runCommand(std::string(RFUSE_BINARY_DIR) + "/bin/rfuse-aot-run " + cpuOut + " --random --seed 4");
  auto [rc7, ref] = runCommand(std::string(RFUSE_BINARY_DIR) + "/bin/rfuse-run " + mlir + " --random --seed 4 --device cpu-jit");
  EXPECT_EQ(rc6, 0) << aot;
  EXPECT_EQ(rc7, 0) << ref;
  EXPECT_NE(aot.find("output 0:"), std::string::npos) << aot;
  EXPECT_EQ(aot, ref);
  // rfuse-aot-run: usage errors name the problem; a damaged file its status.
  auto [rc3, log3] = runCommand(std::string(RFUSE_BINARY_DIR) + "/bin/rfuse-aot-run " + out + " --seed x");
  EXPECT_NE(rc3, 0);
  EXPECT_NE(log3.find("--seed takes a non-negative integer"), std::string::npos) << log3;
  writeFile(dir + ".bad", readFile(out).substr(0, 64));
  auto [rc4, log4] = runCommand(std::string(RFUSE_BINARY_DIR) + "/bin/rfuse-aot-run " + dir + ".bad --random");
  EXPECT_NE(rc4, 0);
  EXPECT_NE(log4.find("corrupt artifact (code 3)"), std::string::npos) << log4;
}

} // namespace
