// The CUDA caching allocator: one core/block_pool.h pool per device over cudaMalloc / cudaFree, beside
// the private pools of CUDA graph captures (core/pool_router.h routes each request and release). A
// cudaMalloc that fails for want of memory is "none left" to the pool (which then returns its cached
// segments and retries once, and reports out of memory with the sizes); any other failure is an error
// an earlier kernel left in the context, and is reported as that, naming the last kernel launched.
// With the NaN-fill debug mode (core/debug_fill.h) every block handed out is set to 0xFF bytes on the
// device's stream, so the fill is ordered after the block's earlier uses and before its new ones.
// With SRU_CUDA_NO_CACHING=1 every tensor gets its own cudaMalloc of its exact size, freed when the
// tensor goes (slow): for compute-sanitizer, whose memcheck sees only accesses outside a cudaMalloc'd
// region and whose initcheck tracks memory from its cudaMalloc, so inside cached segments both are blind.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "core/kernel_count.h"
#include "core/block_pool.h"
#include "core/pool_router.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/runtime.h"
#include "core/debug_fill.h"
#include "core/host_sync.h"

namespace sru::cuda {

namespace {

constexpr int kMaxDevices = 64;

class DeviceMemory : public RawMemory {
 public:
  explicit DeviceMemory(int device) : device_(device) {}
  void* allocate(size_t nbytes) override {
    CUDA_CHECK(cudaSetDevice(device_));
    void* p = nullptr;
    ::sru::detail::host_profile_mark("cudaMalloc (a new segment for the caching allocator)");
    // Relaxed for the call, as PyTorch's allocator does: during a CUDA graph capture (core/cuda/graph.h)
    // the capturing thread may not make this "potentially unsafe" call otherwise. The segment is not
    // part of the graph; the graph's private pool keeps it for as long as the graph lives.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    const cudaError_t err = cudaMalloc(&p, nbytes);
    CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    ::sru::detail::host_profile_mark("(host work after cudaMalloc)");
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it
      return nullptr;
    }
    if (err != cudaSuccess) detail::fail_cuda("cudaMalloc", err, __FILE__, __LINE__);
    return p;
  }
  void release(void* ptr, size_t) override {
    CUDA_CHECK(cudaSetDevice(device_));
    const ::sru::detail::TimedDeviceWait wait("cudaFree (cached memory returned to the driver)");
    CUDA_CHECK(cudaFree(ptr));
  }

 private:
  int device_;
};

struct DevicePool {
  explicit DevicePool(int device) : memory(device), pool(memory, Device::cuda(device).str()) {
    pool.set_fill([device](void* p, size_t n) {
      if (nan_fill_enabled()) CUDA_CHECK(cudaMemsetAsync(p, kNanFillByte, n, context(device).stream));
    });
  }
  DeviceMemory memory;
  PoolRouter pool;
};

// Process-lifetime state, never destroyed: tensors in static objects may free memory during exit.
std::mutex& pool_mutex = *new std::mutex;
std::unique_ptr<DevicePool>* pools = new std::unique_ptr<DevicePool>[kMaxDevices];

AllocatorStats* uncached_stats = new AllocatorStats[kMaxDevices];

PoolRouter& pool_of(int device) {
  SRU_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device, " out of range");
  if (!pools[device]) pools[device] = std::make_unique<DevicePool>(device);
  return pools[device]->pool;
}

bool no_caching() {
  static const bool on = [] {
    const char* v = std::getenv("SRU_CUDA_NO_CACHING");
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }();
  return on;
}

// SRU_CUDA_NO_CACHING: one cudaMalloc per tensor, of its exact size.
void* allocate_uncached(size_t nbytes, int device, size_t* rounded) {
  SRU_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device, " out of range");
  const size_t size = std::max<size_t>(nbytes, 1);
  void* p = DeviceMemory(device).allocate(size);
  AllocatorStats& s = uncached_stats[device];
  SRU_CHECK(p != nullptr, "out of memory on cuda:", device, " allocating ", nbytes, " bytes (", s.allocated,
            " bytes in use by tensors, peak ", s.peak_allocated, "; SRU_CUDA_NO_CACHING is set); reduce the batch size");
  if (nan_fill_enabled()) CUDA_CHECK(cudaMemsetAsync(p, kNanFillByte, size, context(device).stream));
  *rounded = size;
  s.allocated += size;
  s.reserved += size;
  s.peak_allocated = std::max(s.peak_allocated, s.allocated);
  s.peak_reserved = std::max(s.peak_reserved, s.reserved);
  ++s.segments;
  ++s.system_allocations;
  return p;
}

void release_uncached(void* ptr, size_t size, int device) {
  DeviceMemory(device).release(ptr, size);
  AllocatorStats& s = uncached_stats[device];
  s.allocated -= size;
  s.reserved -= size;
  --s.segments;
}

}  // namespace

bool allocator_caches() { return !no_caching(); }

void* allocate(size_t nbytes, int device, size_t* rounded) {
  std::lock_guard<std::mutex> lock(pool_mutex);
  if (no_caching()) return allocate_uncached(nbytes, device, rounded);
  return pool_of(device).allocate(nbytes, rounded);
}

void release(void* ptr, size_t rounded, int device) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(pool_mutex);
  if (no_caching()) return release_uncached(ptr, rounded, device);
  pool_of(device).release(ptr);
}

AllocatorStats allocator_stats(int device) {
  std::lock_guard<std::mutex> lock(pool_mutex);
  if (no_caching()) return uncached_stats[device];
  return pool_of(device).stats();
}

void reset_peak_stats(int device) {
  std::lock_guard<std::mutex> lock(pool_mutex);
  if (no_caching()) {
    AllocatorStats& s = uncached_stats[device];
    s.peak_allocated = s.allocated;
    s.peak_reserved = s.reserved;
    return;
  }
  pool_of(device).reset_peak();
}

int create_graph_pool(int device) {
  std::lock_guard<std::mutex> lock(pool_mutex);
  SRU_CHECK(!no_caching(), "CUDA graphs need the caching allocator: SRU_CUDA_NO_CACHING is set (a captured graph "
                           "replays into the addresses it captured, which only a private pool keeps for it)");
  return pool_of(device).create_private();
}

void set_graph_pool(int device, int pool) {
  std::lock_guard<std::mutex> lock(pool_mutex);
  pool_of(device).set_active(pool);
}

void retire_graph_pool(int device, int pool) {
  std::lock_guard<std::mutex> lock(pool_mutex);
  pool_of(device).retire(pool);
}

void empty_cache() {
  std::lock_guard<std::mutex> lock(pool_mutex);
  for (int d = 0; d < kMaxDevices; ++d)
    if (pools[d]) pools[d]->pool.empty_cache();
}

}  // namespace sru::cuda
