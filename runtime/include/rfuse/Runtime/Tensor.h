// Tensor: values that live where a program runs — host memory for the CPU backend, device memory
// for the GPU — in their own dtype, owned by reference-counted storage. Front ends keep their
// users' tensors as these (the R package's rf_tensor holds one) so that a chain of programs never
// sends values back through the host; values cross only when a front end asks (copyTo*/copyFrom*).
// MLIR-free, like the rest of the runtime's API.
#ifndef RFUSE_RUNTIME_TENSOR_H
#define RFUSE_RUNTIME_TENSOR_H

#include "rfuse/Runtime/HostTensor.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace rfuse {

enum class Device { Cpu, Cuda };

/// Out of device memory even after the allocator gave its cache back: how much was asked for,
/// how much the device had free.
class OutOfMemoryError : public std::runtime_error {
public:
  OutOfMemoryError(size_t requested, size_t free, size_t total, const char *where = "device");
  size_t requested, free, total;
};

/// Throws OutOfMemoryError ("host") when `bytes` more than the memory the system reports
/// available (MemAvailable + free swap) are asked for: a request that cannot be held is a
/// classed error naming the size, before anything allocates or computes.
void ensureHostMemory(size_t bytes);

/// Bytes a Tensor owns: 64-byte aligned host memory, or device memory from the GPU's caching
/// allocator (back to its cache when the last Tensor referring to it goes).
class Storage {
public:
  static std::shared_ptr<Storage> allocate(Device device, size_t bytes);
  ~Storage();
  Storage(const Storage &) = delete;
  Storage &operator=(const Storage &) = delete;
  Device device() const { return device_; }
  void *data() const { return data_; }
  size_t bytes() const { return bytes_; }

private:
  Storage(Device d, void *p, size_t n) : device_(d), data_(p), bytes_(n) {}
  Device device_;
  void *data_;
  size_t bytes_;
};

/// A dense row-major tensor in a storage (host or device address in data()).
struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::shared_ptr<Storage> storage;

  int64_t numel() const;
  size_t bytes() const { return (size_t)numel() * dtypeSize(dtype); }
  Device device() const { return storage ? storage->device() : Device::Cpu; }
  void *data() const { return storage ? storage->data() : nullptr; }
  TensorRef ref() const { return {dtype, shape, data()}; }
};

/// A tensor with uninitialized values. Throws OutOfMemoryError (the GPU) or std::bad_alloc.
Tensor emptyTensor(Device device, DType dtype, std::vector<int64_t> shape);
/// A tensor of zeros (all bits zero: 0 in every dtype), set on its device (on the GPU queued on
/// the stream): no program, no values from the host.
Tensor zeroTensor(Device device, DType dtype, std::vector<int64_t> shape);

/// R's values into a tensor of dst's dtype: doubles (NaN and R's NA become NaN; integer dtypes
/// truncate toward zero and refuse NaN), or 32-bit integers with `naValue` marking NA (R's
/// NA_integer_: NaN in float dtypes, refused in integer ones). Split over threads; into device
/// memory through pinned staging buffers, converting one chunk while the previous one copies.
/// Throws std::invalid_argument naming the first element that cannot be converted.
void copyFromDoubles(const double *src, const Tensor &dst);
void copyFromInts(const int *src, int naValue, const Tensor &dst);
/// The tensor's values out, the same way back: as doubles (any dtype), or as ints (i1, i32).
void copyToDoubles(const Tensor &src, double *dst);
void copyToInts(const Tensor &src, int *dst);
/// dst's bytes written through fill(offset, bytes, host), in order: on the CPU in one call into
/// dst's own memory; on the GPU in chunks of a pinned staging buffer (16 MiB each), each chunk
/// copied while the next is filled (a tensor that fits one chunk is one call).
void fillBytes(const Tensor &dst, const std::function<void(size_t, size_t, void *)> &fill);
/// The same values on another device (a copy; the tensor itself when it is there already).
Tensor toDevice(const Tensor &t, Device device);
/// A copy of the values (same device).
Tensor cloneTensor(const Tensor &t);
/// Copies `count` elements of src from element srcOffset into dst from element dstOffset (same
/// dtype and device; on the GPU queued on the stream).
void copyElements(const Tensor &dst, int64_t dstOffset, const Tensor &src, int64_t srcOffset, int64_t count);
/// Samples `rows` (0-based, i32, on src's device; `count` of them from element `offset`) of a
/// tensor in R's layout — R's first index, the sample, is the tensor's last dimension — into
/// `dst` (the same shape with `count` samples): a batch of a dataset that lives on the device,
/// in any order, without the host.
void gatherSamples(const Tensor &src, const Tensor &rows, int64_t offset, int64_t count, const Tensor &dst);
/// The values as a HostTensor (tests, the interpreter), and back onto a device.
HostTensor toHostTensor(const Tensor &t);
Tensor fromHostTensor(const HostTensor &h, Device device);

/// Bytes and copies that crossed between host memory and a device since the process started
/// (the GPU's; on the CPU backend values never cross).
struct TransferStats {
  uint64_t hostToDeviceBytes = 0, deviceToHostBytes = 0;
  uint64_t hostToDeviceCopies = 0, deviceToHostCopies = 0;
  double hostToDeviceSeconds = 0, deviceToHostSeconds = 0; ///< wall time of those copies
};
TransferStats transferStats();

/// Device memory: free and total bytes (cuMemGetInfo), and what rfuse's allocator holds (in use by
/// tensors and programs, and cached for reuse). Zeros without a GPU.
struct DeviceMemory {
  size_t free = 0, total = 0, inUse = 0, cached = 0;
};
DeviceMemory deviceMemory();
/// Whether tensors allocated since the last call that answered true exceed `thresholdBytes`
/// (0: the default, a few GiB on a GPU, 256 MiB on the host): a front end with a garbage
/// collector (R) runs a collection then, so that dropped tensors give their memory back to the
/// allocators' caches before new memory is asked of the driver.
bool allocationPressure(uint64_t thresholdBytes = 0);
/// Host blocks the CPU's tensor cache holds for reuse (large blocks only: fresh ones cost page
/// faults), and gives them back to the system.
size_t hostCachedBytes();
void releaseHostCache();
/// Gives every cache of freed memory back to the system: the host block cache, the device
/// allocator's cached blocks (when a GPU is in use), and the C heap's free pages (malloc_trim),
/// so that memory dropped programs and tensors held shows as free, not just reusable.
void releaseCachedMemory();
/// Waits until everything queued on the device has run.
void synchronizeDevice();

} // namespace rfuse

#endif
