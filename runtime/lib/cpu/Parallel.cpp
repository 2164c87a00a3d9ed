#include "Parallel.h"

#include "rfuse/Runtime/Options.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

namespace rfuse::cpu {

unsigned cpuThreads() {
  if (int n = runtimeOptions().cpuThreads; n > 0)
    return (unsigned)n;
  // The process's CPUs, asked once (a system call: ~1 us, more than a small kernel takes).
  static const unsigned machine = [] {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
      return (unsigned)std::max(1, CPU_COUNT(&set));
    return std::max(1u, std::thread::hardware_concurrency());
  }();
  return machine;
}

namespace {

thread_local bool inPoolThread = false;

// One parallelFor: its chunks are claimed by index, by the caller and by the helpers it woke.
struct Job {
  const std::function<void(int64_t, int64_t)> *body = nullptr;
  int64_t extent = 0, chunk = 1, chunks = 0;
  std::atomic<int64_t> next{0}, done{0};
  std::mutex mu;
  std::condition_variable finished;
  std::exception_ptr error;

  void work() {
    for (int64_t c; (c = next.fetch_add(1)) < chunks;) {
      int64_t b = c * chunk;
      try {
        (*body)(b, std::min(extent, b + chunk));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error)
          error = std::current_exception();
      }
      if (done.fetch_add(1) + 1 == chunks) {
        std::lock_guard<std::mutex> lock(mu);
        finished.notify_all();
      }
    }
  }
};

// Workers started on first use, as many as the machine's CPUs less the caller; they sleep
// until a job wants helpers.
class Pool {
public:
  static Pool &get() {
    static Pool pool;
    return pool;
  }
  void help(const std::shared_ptr<Job> &job, unsigned helpers) {
    std::lock_guard<std::mutex> lock(mu);
    while (workers.size() < helpers)
      workers.emplace_back([this] { loop(); });
    for (unsigned k = 0; k < helpers; ++k)
      queue.push_back(job);
    wake.notify_all();
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    wake.notify_all();
    for (std::thread &t : workers)
      t.join();
  }

private:
  void loop() {
    inPoolThread = true;
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mu);
        wake.wait(lock, [&] { return stop || !queue.empty(); });
        if (stop)
          return;
        job = std::move(queue.front());
        queue.pop_front();
      }
      job->work();
    }
  }
  std::mutex mu;
  std::condition_variable wake;
  std::deque<std::shared_ptr<Job>> queue;
  std::vector<std::thread> workers;
  bool stop = false;
};

} // namespace

void parallelFor(int64_t extent, int64_t maxChunk, int64_t workPerUnit,
                 const std::function<void(int64_t, int64_t)> &body) {
  bool large = extent > 1 && extent * workPerUnit >= (1 << 15);
  unsigned threads = inPoolThread || !large ? 1 : cpuThreads();
  int64_t chunk = maxChunk > 0 ? maxChunk : extent;
  bool parallel = threads > 1;
  if (parallel) {
    // Chunks start at multiples of 64: the vectorized loops then split every chunk into vector
    // body and scalar tail at the same elements whatever the thread count (vector and scalar
    // libm may differ in the last bit), so threads never change results.
    int64_t perThread = (extent + (int64_t)threads * 4 - 1) / ((int64_t)threads * 4);
    perThread = (perThread + 63) / 64 * 64;
    chunk = std::max<int64_t>(1, std::min(chunk, perThread));
  }
  if (!parallel || chunk >= extent) {
    for (int64_t b = 0; b < extent; b += chunk)
      body(b, std::min(extent, b + chunk));
    return;
  }
  auto job = std::make_shared<Job>();
  job->body = &body;
  job->extent = extent;
  job->chunk = chunk;
  job->chunks = (extent + chunk - 1) / chunk;
  Pool::get().help(job, (unsigned)std::min<int64_t>(threads - 1, job->chunks - 1));
  job->work();
  {
    std::unique_lock<std::mutex> lock(job->mu);
    job->finished.wait(lock, [&] { return job->done.load() == job->chunks; });
  }
  if (job->error)
    std::rethrow_exception(job->error);
}

namespace {
// MLIR's memref descriptor of a contiguous buffer: {allocated, aligned, offset, sizes, strides},
// appended to `out`.
void appendDescriptor(std::vector<int64_t> &out, void *data, const std::vector<int64_t> &shape) {
  out.insert(out.end(), {(int64_t)(intptr_t)data, (int64_t)(intptr_t)data, 0});
  out.insert(out.end(), shape.begin(), shape.end());
  size_t strides = out.size();
  out.resize(strides + shape.size(), 1);
  for (int64_t i = (int64_t)shape.size() - 2; i >= 0; --i)
    out[strides + i] = out[strides + i + 1] * shape[i + 1];
}
} // namespace

void invoke(const CpuFunction &f, PackedFunction fn, const std::vector<void *> &data) {
  // Every argument's descriptor in one buffer, and (per chunk) the packed call's argument list on
  // the stack when it is short: a small kernel's call allocates little.
  size_t n = data.size(), total = 0;
  for (size_t i = 0; i < n; ++i)
    total += 3 + 2 * f.argShapes[i].size();
  std::vector<int64_t> descs;
  descs.reserve(total); // (no reallocation: the pointers below stay valid)
  std::vector<void *> descPtrs(n);
  for (size_t i = 0; i < n; ++i) {
    descPtrs[i] = descs.data() + descs.size();
    appendDescriptor(descs, data[i], f.argShapes[i]);
  }
  parallelFor(f.extent, f.maxChunk, f.workPerUnit, [&](int64_t begin, int64_t end) {
    constexpr size_t inlineArgs = 32;
    void *argsInline[inlineArgs + 2];
    std::vector<void *> argsHeap(n > inlineArgs ? n + 2 : 0);
    void **args = n > inlineArgs ? argsHeap.data() : argsInline;
    args[0] = &begin;
    args[1] = &end;
    for (size_t i = 0; i < n; ++i)
      args[i + 2] = &descPtrs[i];
    fn(args);
  });
}

} // namespace rfuse::cpu
