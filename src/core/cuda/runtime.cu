// The CUDA backend's runtime: per-device contexts (stream, cuBLAS and cuDNN handles), the caching
// device allocator, host<->device copies and the element-wise kernels behind Tensor's in-place
// methods (fill, add_scaled, scale, convert: one thread per element, grid-stride loops).
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/runtime.h"
#include "core/tensor.h"

namespace sru::cuda {

namespace detail {
const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "unknown cuBLAS status";
  }
}
}  // namespace detail

namespace {

constexpr int kMaxDevices = 64;

// Process-lifetime state, never destroyed: tensors in static objects may free memory during exit.
std::mutex& context_mutex = *new std::mutex;
std::unique_ptr<DeviceContext>* contexts = new std::unique_ptr<DeviceContext>[kMaxDevices];

void check_device_index(int device) {
  SRU_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device, " out of range");
}

// ---- caching allocator ----
// Sizes are rounded up (to 512 B below 1 MiB, to 2 MiB above) and freed blocks wait on a free list
// per rounded size. All work of a device runs on its one stream, so a block freed by the host can be
// handed out again at once: any later use is queued after every earlier use.
constexpr size_t kSmallGranularity = 512;
constexpr size_t kLargeThreshold = 1 << 20;
constexpr size_t kLargeGranularity = 2 << 20;

size_t round_size(size_t nbytes) {
  const size_t g = nbytes < kLargeThreshold ? kSmallGranularity : kLargeGranularity;
  return (std::max<size_t>(nbytes, 1) + g - 1) / g * g;
}

struct DevicePool {
  std::map<size_t, std::vector<void*>> free_blocks;
  AllocatorStats stats;
};

std::mutex& pool_mutex = *new std::mutex;
DevicePool* pools = new DevicePool[kMaxDevices];

void free_cached(int device, DevicePool& pool) {
  CUDA_CHECK(cudaSetDevice(device));
  for (auto& [size, blocks] : pool.free_blocks) {
    for (void* p : blocks) CUDA_CHECK(cudaFree(p));
    pool.stats.reserved -= size * blocks.size();
  }
  pool.free_blocks.clear();
}

template <typename T, typename F>
__global__ void map_kernel(T* data, long long n, F f) {
  SRU_GRID_STRIDE(i, n) data[i] = f(data[i], i);
}

template <typename S, typename D>
__global__ void convert_kernel(const S* src, D* dst, long long n) {
  SRU_GRID_STRIDE(i, n) dst[i] = static_cast<D>(src[i]);
}

// The element updates of Tensor's in-place methods (functors, not lambdas: nvcc does not allow device
// lambdas inside the generic lambdas of the dtype dispatch).
template <typename T>
struct FillOp {
  T value;
  __device__ T operator()(T, long long) const { return value; }
};
template <typename T>
struct AddScaledOp {
  T alpha;
  const T* src;
  __device__ T operator()(T x, long long i) const { return x + alpha * src[i]; }
};
template <typename T>
struct ScaleOp {
  T factor;
  __device__ T operator()(T x, long long) const { return x * factor; }
};
template <typename T>
struct ClampOp {
  T low, high;
  __device__ T operator()(T x, long long) const { return x < low ? low : (x > high ? high : x); }
};

template <typename T, typename F>
void launch_map(const Tensor& t, F f) {
  const long long n = t.numel();
  if (n == 0) return;
  DeviceContext& ctx = context(t.device().index);
  map_kernel<<<grid_for(n), kBlock, 0, ctx.stream>>>(t.data<T>(), n, f);
  SRU_CUDA_LAUNCH_CHECK("map_kernel");
}

}  // namespace

DeviceContext& context(int device) {
  check_device_index(device);
  CUDA_CHECK(cudaSetDevice(device));
  std::lock_guard<std::mutex> lock(context_mutex);
  if (!contexts[device]) {
    auto ctx = std::make_unique<DeviceContext>();
    ctx->device = device;
    CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&ctx->cublas));
    CUBLAS_CHECK(cublasSetStream(ctx->cublas, ctx->stream));
    CUDNN_CHECK(cudnnCreate(&ctx->cudnn));
    CUDNN_CHECK(cudnnSetStream(ctx->cudnn, ctx->stream));
    contexts[device] = std::move(ctx);
  }
  return *contexts[device];
}

void* allocate(size_t nbytes, int device, size_t* rounded) {
  check_device_index(device);
  const size_t size = round_size(nbytes);
  *rounded = size;
  std::lock_guard<std::mutex> lock(pool_mutex);
  DevicePool& pool = pools[device];
  void* ptr = nullptr;
  auto it = pool.free_blocks.find(size);
  if (it != pool.free_blocks.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
  } else {
    CUDA_CHECK(cudaSetDevice(device));
    cudaError_t err = cudaMalloc(&ptr, size);
    if (err == cudaErrorMemoryAllocation) {  // give the cache back to the driver and try once more
      cudaGetLastError();
      free_cached(device, pool);
      err = cudaMalloc(&ptr, size);
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      SRU_FAIL("out of memory on cuda:", device, " allocating ", size, " bytes (", pool.stats.allocated,
               " bytes in use by tensors, peak ", pool.stats.peak_allocated, "): ", cudaGetErrorString(err),
               "; reduce the batch size or the model");
    }
    pool.stats.reserved += size;
  }
  pool.stats.allocated += size;
  pool.stats.peak_allocated = std::max(pool.stats.peak_allocated, pool.stats.allocated);
  return ptr;
}

void release(void* ptr, size_t rounded, int device) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(pool_mutex);
  DevicePool& pool = pools[device];
  pool.free_blocks[rounded].push_back(ptr);
  pool.stats.allocated -= rounded;
}

AllocatorStats allocator_stats(int device) {
  check_device_index(device);
  std::lock_guard<std::mutex> lock(pool_mutex);
  return pools[device].stats;
}

void empty_cache() {
  std::lock_guard<std::mutex> lock(pool_mutex);
  for (int d = 0; d < kMaxDevices; ++d)
    if (!pools[d].free_blocks.empty()) free_cached(d, pools[d]);
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (nbytes == 0) return;
  const Device on = dst_device.is_cuda() ? dst_device : src_device;
  SRU_CHECK(on.is_cuda(), "cuda::copy_bytes: neither side is on a CUDA device");
  DeviceContext& ctx = context(on.index);
  if (dst_device.is_cuda() && src_device.is_cuda() && dst_device.index != src_device.index) {
    // Peer copy: wait for the source device's queued work, then copy on the destination's stream.
    CUDA_CHECK(cudaStreamSynchronize(context(src_device.index).stream));
    CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, nbytes, ctx.stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    return;
  }
  CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, ctx.stream));
  // Host memory is pageable: wait so the host buffer may be read (d2h) or freed (h2d) right away.
  if (!dst_device.is_cuda() || !src_device.is_cuda()) CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

void synchronize(int device) { CUDA_CHECK(cudaStreamSynchronize(context(device).stream)); }

double time_on_stream_ms(int device, const std::function<void()>& fn) {
  DeviceContext& ctx = context(device);
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  CUDA_CHECK(cudaEventRecord(start, ctx.stream));
  fn();
  CUDA_CHECK(cudaEventRecord(stop, ctx.stream));
  CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  return ms;
}

void fill(const Tensor& t, double value) {
  SRU_DISPATCH_ALL(t.dtype(), "fill_", [&]<typename T>() {
    launch_map<T>(t, FillOp<T>{static_cast<T>(value)});
  });
}

void add_scaled(const Tensor& dst, const Tensor& src, double alpha) {
  SRU_DISPATCH_FLOATING(dst.dtype(), "add_", [&]<typename T>() {
    launch_map<T>(dst, AddScaledOp<T>{static_cast<T>(alpha), src.data<T>()});
  });
}

void scale(const Tensor& t, double factor) {
  SRU_DISPATCH_FLOATING(t.dtype(), "mul_", [&]<typename T>() {
    launch_map<T>(t, ScaleOp<T>{static_cast<T>(factor)});
  });
}

void clamp(const Tensor& t, double low, double high) {
  SRU_DISPATCH_FLOATING(t.dtype(), "clamp_", [&]<typename T>() {
    launch_map<T>(t, ClampOp<T>{static_cast<T>(low), static_cast<T>(high)});
  });
}

void convert(const Tensor& src, const Tensor& dst) {
  const long long n = src.numel();
  if (n == 0) return;
  DeviceContext& ctx = context(dst.device().index);
  SRU_DISPATCH_ALL(src.dtype(), "to", [&]<typename S>() {
    SRU_DISPATCH_ALL(dst.dtype(), "to", [&]<typename D>() {
      convert_kernel<<<grid_for(n), kBlock, 0, ctx.stream>>>(src.data<S>(), dst.data<D>(), n);
      SRU_CUDA_LAUNCH_CHECK("convert_kernel");
    });
  });
}

void zero(const Tensor& t) {
  if (t.nbytes() == 0) return;
  CUDA_CHECK(cudaMemsetAsync(t.data_ptr(), 0, t.nbytes(), context(t.device().index).stream));
}

}  // namespace sru::cuda
