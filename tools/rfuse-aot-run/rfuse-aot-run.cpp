// rfuse-aot-run: run an ahead-of-time artifact (rfusec -o model.rfuse) through rfuse_rt's C API,
// linked without MLIR, LLVM or NVRTC, and print the same per-output summary as rfuse-run, so the
// two compare line by line.
//
//   rfuse-aot-run model.rfuse (--inputs a.npy,b.npy | --random [--seed N]) [--output-dir D]
//                 [--print-count K] [--time N]
//
// --random fills the inputs as rfuse-run --random does (same seed, same values). --time N also
// prints the load time, the first run's and the median of N more runs (each waited for).
#include "rfuse/Runtime/Artifact.h"
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/HostTensor.h"
#include "rfuse/Runtime/Npy.h"
#include "rfuse/rfuse_rt.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

int fail(const std::string &msg) {
  std::fprintf(stderr, "rfuse-aot-run: error: %s\n", msg.c_str());
  return 1;
}

int failRt(rfuse_rt_status s, const char *what) {
  return fail(std::string(what) + ": " + rfuse_rt_status_name(s) + " (code " + std::to_string((int)s) +
              "): " + rfuse_rt_last_error());
}

std::vector<std::string> split(const std::string &s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos)
      e = s.size();
    if (e > b)
      out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

double msSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

} // namespace

int main(int argc, char **argv) {
  std::string artifact, outputDir;
  std::vector<std::string> inputs;
  bool random = false;
  unsigned long seed = 1, printCount = 6, timeRuns = 0;
  for (int k = 1; k < argc; ++k) {
    std::string a = argv[k];
    auto value = [&](const char *flag) -> std::string {
      if (k + 1 >= argc) {
        fail(std::string(flag) + " needs a value");
        std::exit(1);
      }
      return argv[++k];
    };
    auto number = [&](const char *flag) {
      std::string v = value(flag);
      char *end = nullptr;
      unsigned long n = std::strtoul(v.c_str(), &end, 10);
      if (v.empty() || *end || v[0] == '-') {
        fail(std::string(flag) + " takes a non-negative integer, got '" + v + "'");
        std::exit(1);
      }
      return n;
    };
    if (a == "--inputs")
      inputs = split(value("--inputs"));
    else if (a == "--random")
      random = true;
    else if (a == "--seed")
      seed = number("--seed");
    else if (a == "--output-dir")
      outputDir = value("--output-dir");
    else if (a == "--print-count")
      printCount = number("--print-count");
    else if (a == "--time")
      timeRuns = number("--time");
    else if (a == "--help" || a == "-h") {
      std::printf("usage: rfuse-aot-run model.rfuse (--inputs a.npy,... | --random [--seed N]) [--output-dir D] "
                  "[--print-count K] [--time N]\n");
      return 0;
    } else if (!a.empty() && a[0] == '-')
      return fail("unknown option '" + a + "' (see --help)");
    else if (artifact.empty())
      artifact = a;
    else
      return fail("one artifact at a time ('" + artifact + "' and '" + a + "')");
  }
  if (artifact.empty())
    return fail("no artifact given (see --help)");
  if (random && !inputs.empty())
    return fail("give either --inputs or --random, not both");

  auto t0 = std::chrono::steady_clock::now();
  rfuse_rt_program *p = nullptr;
  if (rfuse_rt_status s = rfuse_rt_load(artifact.c_str(), &p); s != RFUSE_RT_OK)
    return failRt(s, ("loading " + artifact).c_str());
  double loadMs = msSince(t0);
  size_t nin = rfuse_rt_num_inputs(p), nout = rfuse_rt_num_outputs(p);
  if (!random && inputs.size() != nin) {
    rfuse_rt_free(p);
    return fail("the artifact takes " + std::to_string(nin) + " inputs: give --inputs a.npy,... (" +
                std::to_string(inputs.size()) + " given) or --random");
  }
  if (!outputDir.empty())
    ::mkdir(outputDir.c_str(), 0777); // an existing directory is fine; a failure shows at the first write
  int rc = 0;
  try {
    std::mt19937_64 rng(seed);
    for (size_t i = 0; i < nin; ++i) {
      rfuse_rt_dtype dt;
      size_t rank;
      const int64_t *shape;
      rfuse_rt_input_type(p, i, &dt, &rank, &shape);
      rfuse::HostTensor t = random ? rfuse::randomHostTensor(rfuse::artifact::fromRtDType(dt), std::vector<int64_t>(shape, shape + rank), rng)
                                   : rfuse::readNpy(inputs[i]);
      if (random && !outputDir.empty())
        rfuse::writeNpy(outputDir + "/in" + std::to_string(i) + ".npy", t);
      std::vector<char> bytes = t.toBytes();
      if (rfuse_rt_status s = rfuse_rt_set_input(p, i, rfuse::artifact::toRtDType(t.dtype), t.shape.data(), t.shape.size(), bytes.data(),
                                                 bytes.size());
          s != RFUSE_RT_OK)
        throw std::runtime_error(std::string("input ") + std::to_string(i) + (random ? "" : " (" + inputs[i] + ")") +
                                 ": " + rfuse_rt_status_name(s) + ": " + rfuse_rt_last_error());
    }
    auto t1 = std::chrono::steady_clock::now();
    if (rfuse_rt_status s = rfuse_rt_run(p); s != RFUSE_RT_OK)
      throw std::runtime_error(std::string("running: ") + rfuse_rt_status_name(s) + ": " + rfuse_rt_last_error());
    rfuse_rt_synchronize();
    double firstMs = msSince(t1);
    for (size_t i = 0; i < nout; ++i) {
      rfuse_rt_dtype dt;
      size_t rank;
      const int64_t *shape;
      rfuse_rt_output_type(p, i, &dt, &rank, &shape);
      rfuse::HostTensor r(rfuse::artifact::fromRtDType(dt), std::vector<int64_t>(shape, shape + rank));
      std::vector<char> bytes(rfuse_rt_output_bytes(p, i));
      if (rfuse_rt_status s = rfuse_rt_get_output(p, i, bytes.data(), bytes.size()); s != RFUSE_RT_OK)
        throw std::runtime_error(std::string("output ") + std::to_string(i) + ": " + rfuse_rt_last_error());
      r = rfuse::HostTensor::fromBytes(r.dtype, r.shape, bytes.data());
      std::fputs(rfuse::outputSummary(i, r, (unsigned)printCount).c_str(), stdout);
      if (!outputDir.empty())
        rfuse::writeNpy(outputDir + "/out" + std::to_string(i) + ".npy", r);
    }
    if (timeRuns) {
      std::vector<double> ms;
      for (unsigned long k = 0; k < timeRuns; ++k) {
        auto t = std::chrono::steady_clock::now();
        if (rfuse_rt_status s = rfuse_rt_run(p); s != RFUSE_RT_OK)
          throw std::runtime_error(std::string("running: ") + rfuse_rt_last_error());
        rfuse_rt_synchronize();
        ms.push_back(msSince(t));
      }
      std::sort(ms.begin(), ms.end());
      rfuse::cuda::LibraryCallStats lib = rfuse::cuda::libraryCallStats();
      std::printf("time: load %.3f ms, first run %.3f ms (library calls' first runs: %llu, %.3f ms, of which plans "
                  "%.3f ms, the longest %.3f ms), median of %lu runs %.4f ms (%s)\n",
                  loadMs, firstMs, (unsigned long long)lib.firstCalls, 1000 * lib.firstCallSeconds,
                  1000 * lib.planSeconds, 1000 * lib.longestPlanSeconds, timeRuns, ms[ms.size() / 2],
                  rfuse_rt_describe(p));
    }
  } catch (const std::exception &e) {
    rc = fail(e.what());
  }
  rfuse_rt_free(p);
  return rc;
}
