#include <malloc.h>
#include "rfuse/Runtime/Tensor.h"
#include "rfuse/Runtime/Cuda.h"

#include "HalfFloat.h"
#include "cpu/Parallel.h"
#include "cuda/Device.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>

namespace rfuse {

using runtime::bitsFloat;
using runtime::floatToBf16;
using runtime::floatToHalf;
using runtime::halfToFloat;
using runtime::toFloatRoundToOdd;

namespace {
std::string gib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / 1073741824.0);
  return buf;
}
} // namespace

OutOfMemoryError::OutOfMemoryError(size_t requested, size_t free, size_t total, const char *where)
    : std::runtime_error(std::string("out of ") + where + " memory: asked for " + gib(requested) + " (" +
                         std::to_string(requested) + " bytes), " + gib(free) + " of " + gib(total) +
                         " are free"),
      requested(requested), free(free), total(total) {}

void ensureHostMemory(size_t bytes) {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t value = 0, available = 0, total = 0, swap = 0;
  bool known = false;
  while (in >> key >> value) {
    if (key == "MemAvailable:") available = value * 1024, known = true;
    else if (key == "MemTotal:") total = value * 1024;
    else if (key == "SwapFree:") swap = value * 1024;
    in.ignore(64, '\n');
  }
  if (known && bytes > available + swap)
    throw OutOfMemoryError(bytes, available + swap, total, "host");
}

namespace {
std::atomic<uint64_t> allocatedSinceCollection{0};       // host tensors
std::atomic<uint64_t> deviceAllocatedSinceCollection{0}; // GPU tensors

// Large host blocks are kept for reuse (up to hostCacheLimit bytes): a fresh one from the
// system is mapped page by page on first touch, which costs more than the work on it.
constexpr size_t hostCacheMinBlock = 1u << 20, hostCacheLimit = (size_t)1 << 30;
std::mutex hostCacheMu;
std::map<size_t, std::vector<void *>> hostFree;
size_t hostCached = 0;

void *hostAllocate(size_t n) {
  if (n >= hostCacheMinBlock) {
    std::lock_guard<std::mutex> lock(hostCacheMu);
    auto it = hostFree.find(n);
    if (it != hostFree.end() && !it->second.empty()) {
      void *p = it->second.back();
      it->second.pop_back();
      hostCached -= n;
      return p;
    }
  }
  if (n >= ((size_t)1 << 30))
    ensureHostMemory(n);
  void *p = std::aligned_alloc(64, n);
  if (!p)
    throw OutOfMemoryError(n, 0, 0, "host");
  return p;
}

void hostRelease(void *p, size_t n) {
  if (n >= hostCacheMinBlock) {
    std::lock_guard<std::mutex> lock(hostCacheMu);
    if (hostCached + n <= hostCacheLimit) {
      hostFree[n].push_back(p);
      hostCached += n;
      return;
    }
  }
  std::free(p);
}
} // namespace

std::shared_ptr<Storage> Storage::allocate(Device device, size_t bytes) {
  size_t n = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  void *p = device == Device::Cuda ? (void *)cuda::Device::get().alloc(n) : hostAllocate(n);
  (device == Device::Cuda ? deviceAllocatedSinceCollection : allocatedSinceCollection) += n;
  return std::shared_ptr<Storage>(new Storage(device, p, n));
}

Storage::~Storage() {
  if (device_ == Device::Cuda)
    cuda::Device::get().release((CUdeviceptr)data_, bytes_);
  else
    hostRelease(data_, bytes_);
}

bool allocationPressure(uint64_t threshold) {
  // Host and device allocations count against their own thresholds: a few GiB (a twentieth of
  // the device) on the GPU, 256 MiB on the host (its block cache holds what is dropped).
  uint64_t hostThreshold = threshold ? threshold : (uint64_t)256 << 20;
  uint64_t deviceThreshold = threshold;
  if (!deviceThreshold) {
    deviceThreshold = (uint64_t)4 << 30;
    if (cuda::gpuPresence().present) {
      static const size_t total = [] {
        size_t free = 0, t = 0;
        return cuda::driver().cuMemGetInfo(&free, &t) == CUDA_SUCCESS ? t : (size_t)0;
      }();
      if (total)
        deviceThreshold = std::min<uint64_t>(deviceThreshold, total / 20);
    }
  }
  if (allocatedSinceCollection < hostThreshold && deviceAllocatedSinceCollection < deviceThreshold)
    return false;
  allocatedSinceCollection = 0;
  deviceAllocatedSinceCollection = 0;
  return true;
}

size_t hostCachedBytes() {
  std::lock_guard<std::mutex> lock(hostCacheMu);
  return hostCached;
}

void releaseHostCache() {
  std::lock_guard<std::mutex> lock(hostCacheMu);
  for (auto &[n, list] : hostFree)
    for (void *p : list)
      std::free(p);
  hostFree.clear();
  hostCached = 0;
}

void releaseCachedMemory() {
  releaseHostCache();
  if (cuda::gpuPresence().present) {
    synchronizeDevice();
    cuda::Device::get().releaseCache();
  }
  malloc_trim(0);
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Tensor emptyTensor(Device device, DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.storage = Storage::allocate(device, t.bytes());
  return t;
}

namespace {

// ---- One element, each way (f16 / bf16 through HalfFloat.h) --------------------------------
[[noreturn]] void refuseNaN(int64_t k, DType t) {
  throw std::invalid_argument("element " + std::to_string(k + 1) + " is NA or NaN, which " +
                              dtypeName(t) + " cannot hold");
}

int64_t saturate(double v, DType t) {
  double lo = t == DType::I32 ? -2147483648.0 : -9223372036854775808.0;
  double hi = t == DType::I32 ? 2147483647.0 : 9223372036854775807.0;
  v = std::trunc(v);
  if (v <= lo)
    return t == DType::I32 ? INT32_MIN : INT64_MIN;
  if (v >= hi)
    return t == DType::I32 ? INT32_MAX : INT64_MAX;
  return (int64_t)v;
}

// Writes elements [b, e) of `src` (doubles) as dtype t into `out` (element b at out[0]).
void encode(const double *src, int64_t b, int64_t e, DType t, char *out) {
  switch (t) {
  case DType::F64:
    std::memcpy(out, src + b, (size_t)(e - b) * 8);
    return;
  case DType::F32: {
    float *o = (float *)out;
    for (int64_t k = b; k < e; ++k)
      o[k - b] = (float)src[k];
    return;
  }
  case DType::F16:
  case DType::BF16: {
    uint16_t *o = (uint16_t *)out;
    for (int64_t k = b; k < e; ++k) {
      float f = toFloatRoundToOdd(src[k]);
      o[k - b] = t == DType::F16 ? floatToHalf(f) : floatToBf16(f);
    }
    return;
  }
  case DType::I1: {
    uint8_t *o = (uint8_t *)out;
    for (int64_t k = b; k < e; ++k) {
      if (std::isnan(src[k]))
        refuseNaN(k, t);
      o[k - b] = src[k] != 0;
    }
    return;
  }
  case DType::I32:
  case DType::I64:
    for (int64_t k = b; k < e; ++k) {
      if (std::isnan(src[k]))
        refuseNaN(k, t);
      int64_t v = saturate(src[k], t);
      if (t == DType::I32)
        ((int32_t *)out)[k - b] = (int32_t)v;
      else
        ((int64_t *)out)[k - b] = v;
    }
    return;
  }
}

void encodeInts(const int *src, int na, int64_t b, int64_t e, DType t, char *out) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  switch (t) {
  case DType::F64:
  case DType::F32:
  case DType::F16:
  case DType::BF16:
    for (int64_t k = b; k < e; ++k) {
      double v = src[k] == na ? nan : (double)src[k];
      encode(&v, 0, 1, t, out + (k - b) * dtypeSize(t));
    }
    return;
  default:
    for (int64_t k = b; k < e; ++k) {
      if (src[k] == na)
        refuseNaN(k, t);
      if (t == DType::I1)
        ((uint8_t *)out)[k - b] = src[k] != 0;
      else if (t == DType::I32)
        ((int32_t *)out)[k - b] = src[k];
      else
        ((int64_t *)out)[k - b] = src[k];
    }
  }
}

double decodeOne(const char *in, int64_t k, DType t) {
  switch (t) {
  case DType::F64: return ((const double *)in)[k];
  case DType::F32: return ((const float *)in)[k];
  case DType::F16: return halfToFloat(((const uint16_t *)in)[k]);
  case DType::BF16: return bitsFloat((uint32_t)((const uint16_t *)in)[k] << 16);
  case DType::I1: return ((const uint8_t *)in)[k];
  case DType::I32: return ((const int32_t *)in)[k];
  case DType::I64: return (double)((const int64_t *)in)[k];
  }
  return 0;
}

// Elements [b, e) from `in` (element b at in's start) into dst[b..e).
void decode(const char *in, int64_t b, int64_t e, DType t, double *dst) {
  if (t == DType::F64) {
    std::memcpy(dst + b, in, (size_t)(e - b) * 8);
    return;
  }
  if (t == DType::F32) {
    const float *f = (const float *)in;
    for (int64_t k = b; k < e; ++k)
      dst[k] = f[k - b];
    return;
  }
  for (int64_t k = b; k < e; ++k)
    dst[k] = decodeOne(in, k - b, t);
}

void decodeInts(const char *in, int64_t b, int64_t e, DType t, int *dst) {
  for (int64_t k = b; k < e; ++k)
    dst[k] = t == DType::I1 ? ((const uint8_t *)in)[k - b] : ((const int32_t *)in)[k - b];
}

// Calls f(begin, end) over the elements [0, n), split over the CPU backend's threads.
template <class F> void parallelElements(int64_t n, F &&f) {
  cpu::parallelFor(n, 0, 4, [&](int64_t b, int64_t e) { f(b, e); });
}

// The conversion into `dst`: in place for host tensors, chunk by chunk through pinned staging for
// device ones. fill(b, e, out) writes elements [b, e) at out.
template <class Fill> void fillTensor(const Tensor &dst, Fill &&fill) {
  int64_t n = dst.numel();
  size_t es = dtypeSize(dst.dtype);
  if (dst.device() == Device::Cpu) {
    parallelElements(n, [&](int64_t b, int64_t e) { fill(b, e, (char *)dst.data() + b * es); });
    return;
  }
  cuda::Device::get().upload((CUdeviceptr)dst.data(), (size_t)n * es, [&](size_t off, size_t bytes, void *staging) {
    int64_t b0 = (int64_t)(off / es), e0 = b0 + (int64_t)(bytes / es);
    parallelElements(e0 - b0, [&](int64_t b, int64_t e) { fill(b0 + b, b0 + e, (char *)staging + b * es); });
  });
}

template <class Drain> void drainTensor(const Tensor &src, Drain &&drain) {
  int64_t n = src.numel();
  size_t es = dtypeSize(src.dtype);
  if (src.device() == Device::Cpu) {
    parallelElements(n, [&](int64_t b, int64_t e) { drain(b, e, (const char *)src.data() + b * es); });
    return;
  }
  cuda::Device::get().download((CUdeviceptr)src.data(), (size_t)n * es,
                               [&](size_t off, size_t bytes, const void *staging) {
    int64_t b0 = (int64_t)(off / es), e0 = b0 + (int64_t)(bytes / es);
    parallelElements(e0 - b0, [&](int64_t b, int64_t e) { drain(b0 + b, b0 + e, (const char *)staging + b * es); });
  });
}

} // namespace

// Chunks of the staging buffer hold whole elements: its size is a multiple of every dtype's.
static_assert(cuda::Device::stagingChunk % 8 == 0, "staging chunks hold whole elements");

void copyFromDoubles(const double *src, const Tensor &dst) {
  fillTensor(dst, [&](int64_t b, int64_t e, char *out) { encode(src, b, e, dst.dtype, out); });
}

void copyFromInts(const int *src, int naValue, const Tensor &dst) {
  fillTensor(dst, [&](int64_t b, int64_t e, char *out) { encodeInts(src, naValue, b, e, dst.dtype, out); });
}

void copyToDoubles(const Tensor &src, double *dst) {
  drainTensor(src, [&](int64_t b, int64_t e, const char *in) { decode(in, b, e, src.dtype, dst); });
}

void copyToInts(const Tensor &src, int *dst) {
  if (src.dtype != DType::I1 && src.dtype != DType::I32)
    throw std::invalid_argument(std::string("a ") + dtypeName(src.dtype) + " tensor has no integer values for R");
  drainTensor(src, [&](int64_t b, int64_t e, const char *in) { decodeInts(in, b, e, src.dtype, dst); });
}

void fillBytes(const Tensor &dst, const std::function<void(size_t, size_t, void *)> &fill) {
  if (dst.device() == Device::Cpu) {
    fill(0, dst.bytes(), dst.data());
    return;
  }
  cuda::Device::get().upload((CUdeviceptr)dst.data(), dst.bytes(), fill);
}

Tensor toDevice(const Tensor &t, Device device) {
  if (t.device() == device)
    return t;
  Tensor out = emptyTensor(device, t.dtype, t.shape);
  size_t bytes = t.bytes();
  if (device == Device::Cuda) {
    cuda::Device::get().upload((CUdeviceptr)out.data(), bytes, [&](size_t off, size_t n, void *staging) {
      std::memcpy(staging, (const char *)t.data() + off, n);
    });
  } else {
    cuda::Device::get().download((CUdeviceptr)t.data(), bytes, [&](size_t off, size_t n, const void *staging) {
      std::memcpy((char *)out.data() + off, staging, n);
    });
  }
  return out;
}

Tensor cloneTensor(const Tensor &t) {
  Tensor out = emptyTensor(t.device(), t.dtype, t.shape);
  if (t.device() == Device::Cpu) {
    std::memcpy(out.data(), t.data(), t.bytes());
  } else {
    cuda::Device &d = cuda::Device::get();
    cuda::check(cuda::driver().cuMemcpyDtoDAsync((CUdeviceptr)out.data(), (CUdeviceptr)t.data(), t.bytes(), d.stream),
                "cuMemcpyDtoDAsync", "copying a tensor");
  }
  return out;
}

void copyElements(const Tensor &dst, int64_t dstOffset, const Tensor &src, int64_t srcOffset, int64_t count) {
  if (dst.dtype != src.dtype || dst.device() != src.device())
    throw std::invalid_argument("copyElements needs tensors of one dtype on one device");
  if (dstOffset < 0 || srcOffset < 0 || count < 0 || dstOffset + count > dst.numel() || srcOffset + count > src.numel())
    throw std::invalid_argument("copyElements: elements out of range");
  size_t es = dtypeSize(dst.dtype);
  char *d = (char *)dst.data() + dstOffset * es;
  const char *s = (const char *)src.data() + srcOffset * es;
  if (dst.device() == Device::Cpu) {
    std::memmove(d, s, count * es);
    return;
  }
  cuda::Device &dev = cuda::Device::get();
  if (count)
    cuda::check(cuda::driver().cuMemcpyDtoDAsync((CUdeviceptr)d, (CUdeviceptr)s, count * es, dev.stream),
                "cuMemcpyDtoDAsync", "copying tensor elements");
}

Tensor zeroTensor(Device device, DType dtype, std::vector<int64_t> shape) {
  Tensor t = emptyTensor(device, dtype, std::move(shape));
  if (t.bytes() == 0)
    return t;
  if (device == Device::Cpu) {
    std::memset(t.data(), 0, t.bytes());
    return t;
  }
  cuda::Device &dev = cuda::Device::get();
  cuda::check(cuda::driver().cuMemsetD8Async((CUdeviceptr)t.data(), 0, t.bytes(), dev.stream), "cuMemsetD8Async",
              "zeroing a tensor");
  return t;
}

HostTensor toHostTensor(const Tensor &t) {
  Tensor h = toDevice(t, Device::Cpu);
  return HostTensor::fromBytes(h.dtype, h.shape, (const char *)h.data());
}

Tensor fromHostTensor(const HostTensor &h, Device device) {
  Tensor t = emptyTensor(Device::Cpu, h.dtype, h.shape);
  h.writeBytes(t.data());
  return toDevice(t, device);
}

TransferStats transferStats() {
  TransferStats s;
  if (!cuda::gpuPresence().present)
    return s;
  cuda::Device &d = cuda::Device::get();
  s.hostToDeviceBytes = d.uploadedBytes;
  s.deviceToHostBytes = d.downloadedBytes;
  s.hostToDeviceCopies = d.uploads;
  s.deviceToHostCopies = d.downloads;
  s.hostToDeviceSeconds = d.uploadNanos * 1e-9;
  s.deviceToHostSeconds = d.downloadNanos * 1e-9;
  return s;
}

DeviceMemory deviceMemory() {
  DeviceMemory m;
  if (!cuda::gpuPresence().present)
    return m;
  cuda::Device &d = cuda::Device::get();
  cuda::driver().cuMemGetInfo(&m.free, &m.total);
  m.inUse = d.bytesInUse();
  m.cached = d.bytesCached();
  return m;
}

void synchronizeDevice() {
  if (!cuda::gpuPresence().present)
    return;
  cuda::Device &d = cuda::Device::get();
  cuda::check(cuda::driver().cuStreamSynchronize(d.stream), "cuStreamSynchronize", "waiting for the device");
}

} // namespace rfuse
