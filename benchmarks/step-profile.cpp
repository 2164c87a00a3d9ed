// rfuse-step-profile: where a compiled program's time goes on the GPU, step by step (a
// diagnostic, not a benchmark result). Each argument is a module after the pass pipeline (the
// `fused` text of rf_explain() / .rf_program_info(), or CompileInfo::fusedText), run as it is;
// `w5` is rfuse-bench's ResNet-18 training step. For each: the median time of a run (CUDA graph
// replay), then one profiled run (every step timed alone), summed by kind and written to
// $OUT/profile-<name>.csv (step, how, ms, bytes). Comparing two programs of one model (traced
// from R and from C++) shows which steps differ.
//   rfuse-step-profile [--entry main_grad] w5 r-step.mlir ...
#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Frontend/Models.h"
#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/HostTensor.h"
#include "rfuse/Runtime/Profile.h"
#include "rfuse/Runtime/Cuda.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

using namespace rfuse;

namespace {

std::shared_ptr<Program> builtinResNetStep() {
  ResNetConfig rc;
  GraphBuilder g;
  ModelGraph m = buildResNetLoss(g, rc);
  GradientRequest sgd;
  for (size_t p = 0; p < m.parameterCount(); ++p)
    sgd.wrt.push_back(p);
  sgd.optimizer = "sgd";
  sgd.learningRate = 0.1;
  sgd.momentum = 0.9;
  return compileGradientProgram(g.moduleText(), "default", sgd);
}

void profileProgram(const std::string &name, const Program &program) {
  std::mt19937_64 rng(7);
  std::vector<HostTensor> inputs;
  for (const auto &[dtype, shape] : program.argumentTypes())
    inputs.push_back(randomHostTensor(dtype, shape, rng));
  Timing t = program.benchmarkCuda(inputs, 20);
  program.run(inputs, Device::Cuda); // warm: the plans, algorithm choices
  startProfile();
  program.run(inputs, Device::Cuda);
  std::vector<ProfileRecord> records = stopProfile();
  std::map<std::string, std::pair<int, double>> byKind;
  double total = 0;
  const char *out = std::getenv("OUT");
  std::ofstream csv(std::string(out ? out : ".") + "/profile-" + name + ".csv");
  csv << "step,how,ms,bytes\n";
  for (const ProfileRecord &r : records) {
    std::istringstream words(r.how);
    std::string a, b, c;
    words >> a >> b >> c;
    std::string kind = a + " " + b + (a == "cudnn" || a == "cublaslt" ? " " + c : "");
    byKind[kind].first++;
    byKind[kind].second += r.ms;
    total += r.ms;
    csv << r.step << ",\"" << r.how << "\"," << r.ms << "," << r.bytes << "\n";
  }
  std::printf("== %s: %.4f ms per run (graph replay, median of %d); profiled run %.4f ms in %zu steps\n",
              name.c_str(), t.medianMs, t.iterations, total, records.size());
  for (const auto &[kind, v] : byKind)
    std::printf("   %-32s %4d steps %9.4f ms\n", kind.c_str(), v.first, v.second);
}

} // namespace

int main(int argc, char **argv) {
  if (!cuda::deviceInfo().available) {
    std::printf("rfuse-step-profile: no usable GPU (%s)\n", cuda::deviceInfo().reason.c_str());
    return 0;
  }
  std::string entry = "main_grad";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--entry" && i + 1 < argc) {
      entry = argv[++i];
      continue;
    }
    try {
      if (a == "w5") {
        profileProgram("w5", *builtinResNetStep());
        continue;
      }
      std::ifstream in(a);
      if (!in) {
        std::fprintf(stderr, "rfuse-step-profile: cannot read %s\n", a.c_str());
        return 2;
      }
      std::stringstream text;
      text << in.rdbuf();
      std::string name = a.substr(a.find_last_of('/') + 1);
      name = name.substr(0, name.find('.'));
      // Already through the pipeline: only CSE, so the kernels stay as they were outlined.
      profileProgram(name, *compileProgram(text.str(), "builtin.module(cse)", entry));
    } catch (const std::exception &e) {
      std::fprintf(stderr, "rfuse-step-profile: %s: %s\n", a.c_str(), e.what());
      return 1;
    }
  }
  return 0;
}
