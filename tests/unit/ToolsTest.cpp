// The command-line tools, run as a user would: rfuse-run on examples/ against a float64 reference
// computed here, and rfuse-opt's registration.
#include "TestUtil.h"

#include "rfuse/Runtime/Npy.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>

using namespace rfuse;

namespace {

const std::string kBin = std::string(RFUSE_BINARY_DIR) + "/bin/";
const std::string kExamples = std::string(RFUSE_SOURCE_DIR) + "/examples/";

// Runs a shell command; returns its exit status and stdout+stderr.
std::pair<int, std::string> runCommand(const std::string &cmd) {
  std::string out;
  FILE *p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p)
    return {-1, ""};
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p))
    out.append(buf.data(), n);
  int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

TEST(Tools, RfuseOptListsTheDialectAndPasses) {
  auto [rc, out] = runCommand(kBin + "rfuse-opt --help");
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("rfuse"), std::string::npos);
  EXPECT_NE(out.find("Available Dialects: affine, arith, builtin, cf, func, linalg, llvm, math, memref, rfuse, scf, tensor"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("--rfuse-unfuse"), std::string::npos);
  EXPECT_NE(out.find("--rfuse-emit-cuda"), std::string::npos);
  EXPECT_NE(out.find("--rfuse-lower-kernels-to-cpu"), std::string::npos);
}

TEST(Tools, RfuseRunAffineSoftmaxMatchesFloat64Reference) {
  // examples/affine_softmax.mlir: softmax over the rows of x @ w + b, x 4x6, w 6x5, b 5.
  std::string dir = std::string(::testing::TempDir()) + "/rfuse_tools_softmax";
  std::mt19937_64 rng(2026);
  HostTensor x = test::randomTensor(DType::F32, {4, 6}, rng);
  HostTensor w = test::randomTensor(DType::F32, {6, 5}, rng);
  HostTensor b = test::randomTensor(DType::F32, {5}, rng);
  ASSERT_EQ(runCommand("mkdir -p " + dir).first, 0);
  writeNpy(dir + "/x.npy", x);
  writeNpy(dir + "/w.npy", w);
  writeNpy(dir + "/b.npy", b);
  auto [rc, out] = runCommand(kBin + "rfuse-run " + kExamples + "affine_softmax.mlir --inputs " +
                              dir + "/x.npy," + dir + "/w.npy," + dir + "/b.npy --output-dir " +
                              dir + "/out");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("output 0: tensor<4x5xf32> shape [4, 5]"), std::string::npos) << out;
  HostTensor p = readNpy(dir + "/out/out0.npy");
  ASSERT_EQ(p.shape, (std::vector<int64_t>{4, 5}));
  // Independent float64 reference.
  std::vector<double> ref;
  for (int i = 0; i < 4; ++i) {
    double z[5], mx = -INFINITY, s = 0;
    for (int j = 0; j < 5; ++j) {
      z[j] = b.f[j];
      for (int k = 0; k < 6; ++k)
        z[j] += x.f[i * 6 + k] * w.f[k * 5 + j];
      mx = std::max(mx, z[j]);
    }
    for (int j = 0; j < 5; ++j)
      s += std::exp(z[j] - mx);
    for (int j = 0; j < 5; ++j)
      ref.push_back(std::exp(z[j] - mx) / s);
  }
  EXPECT_LT(test::maxRelError(p.f, ref), 1e-5);

  // --dtype f64 computes the same graph in double: closer still.
  auto [rc64, out64] = runCommand(kBin + "rfuse-run " + kExamples + "affine_softmax.mlir --inputs " +
                                  dir + "/x.npy," + dir + "/w.npy," + dir + "/b.npy --dtype f64 --output-dir " +
                                  dir + "/out64");
  ASSERT_EQ(rc64, 0) << out64;
  HostTensor p64 = readNpy(dir + "/out64/out0.npy");
  EXPECT_EQ(p64.dtype, DType::F64);
  EXPECT_LT(test::maxRelError(p64.f, ref), 1e-13);
}

TEST(Tools, RfuseRunRandomIsReproducibleAndWritesInputs) {
  std::string dir = std::string(::testing::TempDir()) + "/rfuse_tools_random";
  std::string cmd = kBin + "rfuse-run " + kExamples + "cnn_block.mlir --random --seed 5 --output-dir " + dir;
  auto [rc1, out1] = runCommand(cmd);
  auto [rc2, out2] = runCommand(cmd);
  ASSERT_EQ(rc1, 0) << out1;
  EXPECT_EQ(out1, out2);
  HostTensor in0 = readNpy(dir + "/in0.npy");
  for (double v : in0.f)
    EXPECT_NE(v, 0.0);
  auto [rc3, out3] = runCommand(kBin + "rfuse-run " + kExamples + "cnn_block.mlir --random --seed 6");
  EXPECT_NE(out1, out3);
}

TEST(Tools, RfuseRunReportsErrors) {
  auto [rc, out] = runCommand(kBin + "rfuse-run " + kExamples + "affine_softmax.mlir");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("takes 3 arguments"), std::string::npos) << out;
  auto [rc2, out2] = runCommand(kBin + "rfuse-run /nonexistent.mlir --random");
  EXPECT_NE(rc2, 0);
  auto [rc3, out3] = runCommand(kBin + "rfuse-run " + kExamples + "affine_softmax.mlir --random --dtype i32");
  EXPECT_NE(rc3, 0);
  EXPECT_NE(out3.find("--dtype must be f32 or f64"), std::string::npos) << out3;
}

} // namespace
