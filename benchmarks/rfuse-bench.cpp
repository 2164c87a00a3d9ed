// rfuse-bench: the GPU workloads of ../shared/device/torch_baselines.py, same shapes, through
// rfuse (GraphBuilder -> default pipeline -> NVRTC / cuBLASLt), timed with CUDA events (median).
// Writes $OUT/rfuse_bench.json; benchmarks/compare.py prints it next to PyTorch's numbers.
#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Frontend/Models.h"
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/Interpreter.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace rfuse;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<HostTensor> randomInputs(const std::vector<std::vector<int64_t>> &shapes, DType dt,
                                     uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<HostTensor> out;
  for (auto &s : shapes) {
    HostTensor t(dt, s);
    for (int64_t k = 0; k < t.numel(); ++k)
      t.f[k] = roundToDType(dt, normal(rng));
    out.push_back(std::move(t));
  }
  return out;
}

struct Result {
  std::string name;
  double ms = 0, bytes = 0, flops = 0;
  uint64_t kernels = 0;
  double compileS = 0;
};
std::vector<Result> results;
std::string jsonExtra;

void run(const std::string &name, const std::function<void(GraphBuilder &)> &build,
         const std::vector<std::vector<int64_t>> &shapes, DType dt, double bytes, double flops,
         int iters = 50, const GradientRequest *gradient = nullptr) {
  // RFUSE_BENCH_ONLY=<prefix>: run only the workloads whose name starts with it.
  if (const char *only = std::getenv("RFUSE_BENCH_ONLY"); only && name.rfind(only, 0) != 0)
    return;
  GraphBuilder g;
  build(g);
  auto t0 = Clock::now();
  auto program = gradient ? compileGradientProgram(g.moduleText(), "default", *gradient)
                          : compileProgram(g.moduleText(), "default");
  auto inputs = randomInputs(shapes, dt, 7);
  auto t1 = Clock::now();
  Timing t = program->benchmarkCuda(inputs, iters);
  Result r{name, t.medianMs, bytes, flops, program->info().kernelCount,
           std::chrono::duration<double>(t1 - t0).count()};
  results.push_back(r);
  std::printf("%-34s %9.4f ms  kernels %llu", name.c_str(), r.ms, (unsigned long long)r.kernels);
  if (bytes > 0)
    std::printf("  %7.0f GB/s", bytes / r.ms / 1e6);
  if (flops > 0)
    std::printf("  %7.1f TFLOP/s", flops / r.ms / 1e9);
  std::printf("\n");
  // RFUSE_BENCH_EXPORT=DIR: each workload also written as an ahead-of-time artifact for this GPU
  // (DIR/<name>.rfuse), which rfuse-aot-run times in a process of its own (gpu-run.sh aot).
  if (const char *dir = std::getenv("RFUSE_BENCH_EXPORT")) {
    try {
      program->exportArtifact(std::string(dir) + "/" + name + ".rfuse", {{cuda::deviceInfo().arch()}, false});
    } catch (const std::exception &e) {
      std::printf("  (%s not exported: %s)\n", name.c_str(), e.what());
    }
  }
  std::fflush(stdout);
}

TracedValue layerNorm(GraphBuilder &g, TracedValue x, TracedValue gamma, TracedValue beta) {
  TracedValue xc = g.sub(x, g.reduceMean(x, {1}, true));
  TracedValue var = g.reduceMean(g.mul(xc, xc), {1}, true);
  TracedValue rstd = g.rsqrt(g.add(var, g.scalar(1e-5, g.dtype(x))));
  return g.add(g.mul(g.mul(xc, rstd), gamma), beta);
}

} // namespace

int main() {
  const cuda::DeviceInfo &dev = cuda::deviceInfo();
  if (!dev.available) {
    std::printf("rfuse-bench: no usable GPU (%s)\n", dev.reason.c_str());
    return 0;
  }
  std::printf("rfuse-bench on %s (%s, %d SMs), NVRTC %d, cache %s\n", dev.name.c_str(),
              dev.arch().c_str(), dev.multiprocessors, cuda::nvrtcVersion(),
              cuda::kernelCacheDir().c_str());

  // Cold compile of W1: trace -> fuse -> NVRTC, no cache.
  {
    setenv("RFUSE_DISABLE_CACHE", "1", 1);
    auto t0 = Clock::now();
    GraphBuilder g;
    TracedValue x = g.input({1 << 26}, DType::F32), a = g.input({1 << 26}, DType::F32),
                b = g.input({1 << 26}, DType::F32);
    g.finish({g.add(g.mul(g.relu(g.add(g.mul(x, a), b)), g.sigmoid(x)),
                    g.mul(g.tanh(b), g.scalar(0.5, DType::F32)))});
    auto p = compileProgram(g.moduleText(), "default");
    auto t1 = Clock::now();
    std::vector<std::string> names, sources;
    for (auto &[n, s] : p->info().cudaSources) {
      names.push_back(n);
      sources.push_back(s);
    }
    cuda::compileKernels(names, sources, dev.arch());
    auto t2 = Clock::now();
    unsetenv("RFUSE_DISABLE_CACHE");
    double trace = std::chrono::duration<double>(t1 - t0).count(),
           nvrtc = std::chrono::duration<double>(t2 - t1).count();
    std::printf("%-34s %9.4f s (trace + fuse %.4f s, NVRTC %.4f s)\n", "W1 cold compile", trace + nvrtc,
                trace, nvrtc);
    jsonExtra += "\"W1_cold_compile_s\": " + std::to_string(trace + nvrtc) + ",\n";
  }
  // Compiles from here on are the workloads' own: a second process must show none.
  const cuda::KernelCacheStats probe = cuda::kernelCacheStats();

  const int64_t n1 = 1 << 26;
  run("W1_elementwise_chain", [&](GraphBuilder &g) {
    TracedValue x = g.input({n1}, DType::F32), a = g.input({n1}, DType::F32), b = g.input({n1}, DType::F32);
    g.finish({g.add(g.mul(g.relu(g.add(g.mul(x, a), b)), g.sigmoid(x)),
                    g.mul(g.tanh(b), g.scalar(0.5, DType::F32)))});
  }, {{n1}, {n1}, {n1}}, DType::F32, 4.0 * 4 * n1, 0);

  run("W4_layernorm_gelu_residual", [&](GraphBuilder &g) {
    TracedValue x = g.input({8192, 4096}, DType::F32), gm = g.input({4096}, DType::F32),
                bt = g.input({4096}, DType::F32);
    g.finish({g.add(g.mul(g.gelu(layerNorm(g, x, gm, bt)), g.scalar(1.5, DType::F32)), x)});
  }, {{8192, 4096}, {4096}, {4096}}, DType::F32, 2.0 * 4 * 8192 * 4096, 0);

  // W4 as R traces it: an 8192 x 4096 R matrix is [4096][8192] here (column-major), the layer
  // norm over its rows a reduction over the leading dim, (x - mean) / sqrt(var + eps) as R's
  // sweep() writes it (r-bench.R's W4 from C++: the cluster tiles and column_prefetch).
  run("W4r_layernorm_gelu_residual_R_layout", [&](GraphBuilder &g) {
    TracedValue x = g.input({4096, 8192}, DType::F32), gm = g.input({4096}, DType::F32),
                bt = g.input({4096}, DType::F32);
    auto rows = [&](TracedValue v) { return g.broadcastInDim(v, {4096, 8192}, {1}); };
    auto cols = [&](TracedValue v) { return g.broadcastInDim(v, {4096, 8192}, {0}); };
    TracedValue xc = g.sub(x, rows(g.reduceMean(x, {0})));
    TracedValue sd = g.sqrt(g.add(g.reduceMean(g.mul(xc, xc), {0}), g.scalar(1e-5, DType::F32)));
    TracedValue y = g.add(g.mul(g.div(xc, rows(sd)), cols(gm)), cols(bt));
    g.finish({g.add(g.mul(g.gelu(y), g.scalar(1.5, DType::F32)), x)});
  }, {{4096, 8192}, {4096}, {4096}}, DType::F32, 2.0 * 4 * 8192 * 4096, 0);

  for (DType dt : {DType::F32, DType::BF16}) {
    std::string k = dt == DType::F32 ? "float32" : "bfloat16";
    double flops = 2.0 * 4096 * 4096 * 4096;
    run("mm_plain_" + k, [&](GraphBuilder &g) {
      TracedValue a = g.input({4096, 4096}, dt), w = g.input({4096, 4096}, dt);
      g.finish({g.matmul(a, w)});
    }, {{4096, 4096}, {4096, 4096}}, dt, 0, flops, 30);
    run("mm_bias_gelu_" + k, [&](GraphBuilder &g) {
      TracedValue a = g.input({4096, 4096}, dt), w = g.input({4096, 4096}, dt), b = g.input({4096}, dt);
      g.finish({g.gelu(g.add(g.matmul(a, w), b), /*tanhApproximation=*/true)});
    }, {{4096, 4096}, {4096, 4096}, {4096}}, dt, 0, flops, 30);
  }

  // The layouts of a backward pass: dW = h^T g (transpose_a), dh = g W^T (transpose_b).
  for (bool ta : {true, false}) {
    double flops = 2.0 * 4096 * 4096 * 4096;
    run(ta ? "mm_tA_float32" : "mm_tB_float32", [&](GraphBuilder &g) {
      TracedValue a = g.input({4096, 4096}, DType::F32), b = g.input({4096, 4096}, DType::F32);
      g.finish({g.matmul(a, b, ta, !ta)});
    }, {{4096, 4096}, {4096, 4096}}, DType::F32, 0, flops, 30);
  }

  // W3: the seed CNN forward, batch 128 (NCHW; conv 1->8 k3, relu, maxpool 2, conv 8->16 k3,
  // relu, maxpool 2, flatten, linear 400->10).
  run("W3_cnn2_forward_b128", [&](GraphBuilder &g) {
    TracedValue x = g.input({128, 1, 28, 28}, DType::F32);
    TracedValue w1 = g.input({8, 1, 3, 3}, DType::F32), b1 = g.input({8}, DType::F32);
    TracedValue w2 = g.input({16, 8, 3, 3}, DType::F32), b2 = g.input({16}, DType::F32);
    TracedValue fw = g.input({400, 10}, DType::F32), fb = g.input({10}, DType::F32);
    TracedValue h = g.maxPool2d(g.relu(g.conv2d(x, w1, b1)));
    h = g.maxPool2d(g.relu(g.conv2d(h, w2, b2)));
    g.finish({g.add(g.matmul(g.reshape(h, {128, 400}), fw), fb)});
  }, {{128, 1, 28, 28}, {8, 1, 3, 3}, {8}, {16, 8, 3, 3}, {16}, {400, 10}, {10}}, DType::F32, 0, 0, 100);

  // W2: an MLP training step (batch 4096, 1024-4096-4096-1024, GELU, MSE loss, SGD lr 1e-3): the
  // forward, rfuse-autodiff's backward and the update compiled as one program (a CUDA graph).
  {
    GradientRequest sgd;
    sgd.wrt = {1, 2, 3, 4, 5, 6};
    sgd.optimizer = "sgd";
    sgd.learningRate = 1e-3;
    double f = 2.0 * 4096 * (1024.0 * 4096 + 4096.0 * 4096 + 4096.0 * 1024) * 3;
    // f32 (TF32 products), then bf16-mixed (rf_train's precision = "bf16-mixed": rfuse-autocast).
    for (std::string precision : {"f32", "bf16"}) {
      sgd.autocast = precision == "f32" ? "none" : precision;
      run("W2_mlp_train_step_" + precision, [&](GraphBuilder &g) {
        TracedValue x = g.input({4096, 1024}, DType::F32);
        TracedValue w1 = g.input({1024, 4096}, DType::F32), b1 = g.input({4096}, DType::F32);
        TracedValue w2 = g.input({4096, 4096}, DType::F32), b2 = g.input({4096}, DType::F32);
        TracedValue w3 = g.input({4096, 1024}, DType::F32), b3 = g.input({1024}, DType::F32);
        TracedValue y = g.input({4096, 1024}, DType::F32);
        auto linear = [&](TracedValue h, TracedValue w, TracedValue b, int64_t n) {
          return g.add(g.matmul(h, w), g.broadcastTo(b, {4096, n}));
        };
        TracedValue h = g.gelu(linear(x, w1, b1, 4096));
        h = g.gelu(linear(h, w2, b2, 4096));
        TracedValue d = g.sub(linear(h, w3, b3, 1024), y);
        g.finish({g.reduceMean(g.mul(d, d), {0, 1})});
      }, {{4096, 1024}, {1024, 4096}, {4096}, {4096, 4096}, {4096}, {4096, 1024}, {1024}, {4096, 1024}},
          DType::F32, 0, f, 20, &sgd);
    }
  }

  // W5: a ResNet-18 training step (32x32 images, batch 256, NHWC like the baseline's
  // channels_last, f32 with TF32 convolutions and matmuls, SGD with momentum 0.9): forward,
  // backward (cuDNN's backward-data / backward-filter calls) and the update as one program.
  {
    ResNetConfig rc;
    // RFUSE_BENCH_LAYOUT=nchw: the layout R's nn_conv2d traces (torch for R's), for comparison.
    if (const char *l = std::getenv("RFUSE_BENCH_LAYOUT"); l && std::string(l) == "nchw")
      rc.layout = ImageLayout::NCHW;
    GraphBuilder probe;
    ModelGraph m = buildResNetLoss(probe, rc);
    GradientRequest sgd;
    std::vector<std::vector<int64_t>> shapes = m.inputShapes;
    for (size_t p = 0; p < m.parameterCount(); ++p) {
      sgd.wrt.push_back(p);
      shapes.push_back(m.inputShapes[p]); // momentum buffers
    }
    sgd.optimizer = "sgd";
    sgd.learningRate = 0.1;
    sgd.momentum = 0.9;
    // ResNet-18 at 32x32: ~37.0 M multiply-adds per image forward; backward twice that.
    double f = 2.0 * 37.0e6 * rc.batch * 3;
    for (std::string precision : {"f32", "bf16"}) {
      sgd.autocast = precision == "f32" ? "none" : precision;
      run("W5_resnet18_train_step_" + precision, [&](GraphBuilder &g) { buildResNetLoss(g, rc); }, shapes,
          DType::F32, 0, f, 20, &sgd);
    }
  }

  auto st = cuda::kernelCacheStats();
  st.compiles -= probe.compiles;
  st.diskHits -= probe.diskHits;
  st.memoryHits -= probe.memoryHits;
  std::printf("kernel cache, workloads: compiled %llu, memory hits %llu, disk hits %llu\n",
              (unsigned long long)st.compiles, (unsigned long long)st.memoryHits,
              (unsigned long long)st.diskHits);
  const char *out = std::getenv("OUT");
  std::string path = std::string(out ? out : ".") + "/rfuse_bench.json";
  if (FILE *f = std::fopen(path.c_str(), "w")) {
    // (no comma after the last member: none when RFUSE_BENCH_ONLY selected no workload)
    std::fprintf(f, "{\n\"device\": \"%s\",\n%s\"kernel_cache_compiles\": %llu,\n\"kernel_cache_disk_hits\": %llu%s\n",
                 dev.name.c_str(), jsonExtra.c_str(), (unsigned long long)st.compiles,
                 (unsigned long long)st.diskHits, results.empty() ? "" : ",");
    for (size_t i = 0; i < results.size(); ++i)
      std::fprintf(f, "\"%s\": {\"ms\": %.6f, \"kernels\": %llu, \"bytes\": %.0f, \"flops\": %.0f, \"trace_fuse_s\": %.4f}%s\n",
                   results[i].name.c_str(), results[i].ms, (unsigned long long)results[i].kernels,
                   results[i].bytes, results[i].flops, results[i].compileS, i + 1 < results.size() ? "," : "");
    std::fprintf(f, "}\n");
    std::fclose(f);
  }
  return 0;
}
