// rfuse's typed options: one table (runtime/lib/Options.cpp), documented in docs/options.md,
// set through the C++ API with clear errors; the environment read once, with warnings.
#include "rfuse/Runtime/Options.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

using namespace rfuse;

namespace {

std::pair<int, std::string> runCommand(const std::string &cmd) {
  std::array<char, 4096> buf;
  std::string out;
  FILE *p = popen((cmd + " 2>&1").c_str(), "r");
  while (p && fgets(buf.data(), buf.size(), p))
    out += buf.data();
  int rc = p ? pclose(p) : -1;
  return {WEXITSTATUS(rc), out};
}

TEST(Options, DocsListEveryOptionWithItsVariable) {
  std::ifstream in(std::string(RFUSE_SOURCE_DIR) + "/docs/options.md");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string docs = ss.str();
  ASSERT_FALSE(docs.empty());
  for (const OptionDoc &d : optionDocs()) {
    EXPECT_NE(docs.find("| `" + d.name + "` | `" + d.environment + "` | " + d.accepted + " | " + d.defaultValue + " |"),
              std::string::npos)
        << d.name << " is missing from docs/options.md, or its row is out of date";
    EXPECT_EQ(d.environment.rfind("RFUSE_", 0), 0u) << d.name;
  }
}

TEST(Options, SetGetAndErrorsNamingTheOption) {
  std::string old = getOption("cpu_threads");
  setOption("cpu_threads", "3");
  EXPECT_EQ(runtimeOptions().cpuThreads, 3);
  EXPECT_EQ(getOption("cpu_threads"), "3");
  setOption("cuda_graphs", "false");
  EXPECT_FALSE(runtimeOptions().cudaGraphs);
  EXPECT_EQ(getOption("cuda_graphs"), "FALSE");
  setOption("cuda_graphs", "TRUE");
  EXPECT_TRUE(runtimeOptions().cudaGraphs);
  setOption("row_grid", "wave");
  EXPECT_TRUE(runtimeOptions().codegen.rowGridWave);
  setOption("row_grid", "row");
  try {
    setOption("cuda_graphs", "maybe");
    FAIL() << "accepted 'maybe'";
  } catch (const OptionError &e) {
    EXPECT_NE(std::string(e.what()).find("cuda_graphs"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("TRUE, FALSE"), std::string::npos) << e.what();
  }
  try {
    setOption("no_such_option", "1");
    FAIL() << "accepted an unknown option";
  } catch (const OptionError &e) {
    EXPECT_NE(std::string(e.what()).find("no_such_option"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cpu_threads"), std::string::npos) << "lists the options: " << e.what();
  }
  EXPECT_THROW(setOption("cpu_threads", "-1"), OptionError);
  EXPECT_THROW(setOption("cpu_threads", "2x"), OptionError);
  EXPECT_THROW(setOption("device", "tpu"), OptionError);
  EXPECT_EQ(runtimeOptions().cpuThreads, 3) << "a refused value changes nothing";
  setOption("cpu_threads", old);
}

TEST(Options, TheEnvironmentIsReadOnceWithAWarningForBadValues) {
  // rfusec reads the options (the kernel cache's) on its way.
  std::string run = std::string(RFUSE_BINARY_DIR) + "/bin/rfusec " + RFUSE_SOURCE_DIR +
                    "/examples/affine_softmax.mlir -o " + ::testing::TempDir() + "/rfuse_options_env.rfuse --arch sm_90";
  auto [rc, out] = runCommand("RFUSE_CPU_THREADS=lots RFUSE_CPU_JIT=0 " + run);
  if (out.find("NVRTC") != std::string::npos && rc != 0)
    GTEST_SKIP() << "NVRTC is not installed: " << out;
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("rfuse: warning: RFUSE_CPU_THREADS='lots' is not accepted (an integer >= 0)"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("RFUSE_CPU_JIT"), std::string::npos) << "a good value gives no warning: " << out;
}

} // namespace
