// Batches of samples gathered from a dataset (rf_fit's data loader), on the CPU or by a kernel
// NVRTC compiles once: the JIT runtime's (rfuse_rt has no compiler).
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/Tensor.h"

#include "cpu/Parallel.h"
#include "cuda/Device.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

namespace rfuse {

namespace {
// The gather kernel, one per element size (compiled once through the kernel cache).
CUfunction gatherKernel(size_t es) {
  static std::mutex mu;
  static std::map<size_t, CUfunction> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(es); it != loaded.end())
    return it->second;
  const char *type = es == 1 ? "unsigned char" : es == 2 ? "unsigned short" : es == 4 ? "unsigned int" : "unsigned long long";
  std::string name = "rfuse_gather_samples_" + std::to_string(es);
  std::string source = "// rfuse: samples of a dataset in R's layout (the sample index fastest)\n"
                       "typedef " + std::string(type) + " T;\n"
                       "extern \"C\" __global__ void " + name +
                       "(const T *src, const int *rows, T *dst, long long n, long long count, long long total) {\n"
                       "  for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < total;\n"
                       "       k += (long long)gridDim.x * blockDim.x) {\n"
                       "    long long s = k / count, j = k - s * count;\n"
                       "    dst[k] = src[s * n + rows[j]];\n"
                       "  }\n"
                       "}\n";
  cuda::Device &dev = cuda::Device::get();
  // Held for the process's lifetime (one per element size).
  CUfunction fn = dev.acquireFunction(name, cuda::compileKernel(name, source, dev.arch)).function;
  loaded[es] = fn;
  return fn;
}
} // namespace

void gatherSamples(const Tensor &src, const Tensor &rows, int64_t offset, int64_t count, const Tensor &dst) {
  if (src.shape.empty() || dst.shape.size() != src.shape.size() || dst.dtype != src.dtype ||
      dst.device() != src.device() || rows.device() != src.device() || rows.dtype != DType::I32)
    throw std::invalid_argument("gatherSamples: tensors of different dtypes, ranks or devices");
  int64_t n = src.shape.back();
  if (dst.shape.back() != count || offset < 0 || offset + count > rows.numel())
    throw std::invalid_argument("gatherSamples: " + std::to_string(count) + " samples from " + std::to_string(offset) +
                                " do not fit the rows or the destination");
  for (size_t d = 0; d + 1 < src.shape.size(); ++d)
    if (src.shape[d] != dst.shape[d])
      throw std::invalid_argument("gatherSamples: the samples' shapes differ");
  int64_t perSample = n ? src.numel() / n : 0, total = perSample * count;
  size_t es = dtypeSize(src.dtype);
  if (src.device() == Device::Cpu) {
    const int *r = (const int *)rows.data() + offset;
    for (int64_t j = 0; j < count; ++j)
      if (r[j] < 0 || r[j] >= n)
        throw std::invalid_argument("gatherSamples: row " + std::to_string(r[j] + 1) + " is outside 1.." + std::to_string(n));
    const char *sp = (const char *)src.data();
    char *dp = (char *)dst.data();
    cpu::parallelFor(perSample, 0, 4, [&](int64_t b, int64_t e) {
      for (int64_t s = b; s < e; ++s)
        for (int64_t j = 0; j < count; ++j)
          std::memcpy(dp + (s * count + j) * es, sp + (s * n + r[j]) * es, es);
    });
    return;
  }
  if (!total)
    return;
  cuda::Device &dev = cuda::Device::get();
  CUdeviceptr s = (CUdeviceptr)src.data(), r = (CUdeviceptr)rows.data() + offset * 4, d = (CUdeviceptr)dst.data();
  long long nn = n, cc = count, tt = total;
  void *params[] = {&s, &r, &d, &nn, &cc, &tt};
  unsigned grid = (unsigned)std::min<int64_t>((total + 255) / 256, (int64_t)dev.sms * 8);
  cuda::check(cuda::driver().cuLaunchKernel(gatherKernel(es), grid, 1, 1, 256, 1, 1, 0, dev.stream, params, nullptr),
              "cuLaunchKernel", "gathering a batch of samples");
}

} // namespace rfuse
