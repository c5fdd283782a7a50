// The CUDA backend's runtime: per-device contexts (stream, cuBLAS and cuDNN handles), error and launch
// checks, copies between host and device (host-to-device through pinned staging buffers, so that
// feeding a batch costs no host wait), the host waits themselves (each counted, core/host_sync.h, and
// each reading the device error log), read_scalars, and the element-wise kernels behind Tensor's
// in-place methods (fill, add_scaled, scale, convert: one thread per element, grid-stride loops).
// The caching allocator is in allocator.cu.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "core/kernel_count.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/quads.cuh"
#include "core/cuda/runtime.h"
#include "core/host_sync.h"
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

namespace {
std::atomic<const char*> last_launched{"none"};

std::string sticky_note(cudaError_t err, const char* kernel) {
  if (!is_sticky_error(err)) return "";
  return ::sru::detail::concat(
      "; a kernel fault leaves this error on every later call, and kernels run asynchronously: it comes from ",
      "kernel ", kernel, " (the last one launched) or an earlier one (run with CUDA_LAUNCH_BLOCKING=1, a debug ",
      "build or compute-sanitizer to stop at the faulting kernel)");
}
}  // namespace

const char* last_kernel() { return last_launched.load(); }

bool is_sticky_error(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

void fail_cuda(const char* call, cudaError_t err, const char* file, int line) {
  ::sru::detail::throw_error(file, line, ::sru::detail::concat("CUDA error in ", call, ": ", cudaGetErrorString(err),
                                                               sticky_note(err, last_kernel())));
}

void check_launch(const char* kernel, const char* file, int line) {
  const char* previous = last_launched.exchange(kernel);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)  // a bad launch of this kernel, or a fault an earlier one left behind
    ::sru::detail::throw_error(file, line, ::sru::detail::concat("CUDA error launching kernel ", kernel, ": ",
                                                                 cudaGetErrorString(err), sticky_note(err, previous)));
#if !defined(NDEBUG)
  // (Not while a CUDA graph is being captured: a synchronisation would break the capture; the kernel
  // then runs, and is checked, at the replays.)
  int device = 0;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaGetDevice(&device) == cudaSuccess) cudaStreamIsCapturing(context(device).stream, &capturing);
  if (capturing != cudaStreamCaptureStatusNone) return;
  err = cudaDeviceSynchronize();
  if (err != cudaSuccess)
    ::sru::detail::throw_error(file, line,
                               ::sru::detail::concat("CUDA error in kernel ", kernel, ": ", cudaGetErrorString(err)));
#endif
}

}  // namespace detail

namespace {

constexpr int kMaxDevices = 64;
constexpr int kErrorSlots = 1024;
constexpr size_t kStagingMaxCopy = 64 << 20;  // larger host-to-device copies wait instead of staging
constexpr size_t kStagingBudget = 256 << 20;  // pinned staging memory per device
constexpr size_t kStagingMinChunk = 1 << 20;

// A pinned host buffer for host-to-device copies; free again once its copy has run (its event).
struct StagingChunk {
  char* host = nullptr;
  size_t size = 0;
  cudaEvent_t done = nullptr;
  bool in_flight = false;
};

// A pinned slot for scalars read later (queue_scalar_read): their copies land here, and `done` marks
// the point in the stream they were queued at.
struct ScalarReadSlot {
  static constexpr size_t kMaxScalars = 16;
  char* host = nullptr;  // kMaxScalars 8-byte words
  cudaEvent_t done = nullptr;
  bool in_use = false;
  bool dropped = false;  // released unread: free once `done` has passed (no host wait for it)
};

// Everything per device besides the allocator. Never destroyed: tensors in static objects may use the
// device during exit.
struct DeviceState {
  std::mutex mutex;  // guards everything below
  std::unique_ptr<DeviceContext> ctx;
  unsigned long long* error_slots = nullptr;  // device, kErrorSlots
  std::vector<ErrorDescriber> pending_errors;  // describers of slots [0, size)
  unsigned long long* error_slots_host = nullptr;  // pinned copy target
  std::vector<StagingChunk> staging;
  size_t staging_bytes = 0;
  char* read_buffer = nullptr;  // pinned, for read_scalars
  size_t read_buffer_size = 0;
  std::vector<ScalarReadSlot> later_reads;  // queue_scalar_read's slots, reused once finished
};

DeviceState* states = new DeviceState[kMaxDevices];

void check_device_index(int device) {
  SRU_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device, " out of range");
}

DeviceState& state_of(int device) {
  check_device_index(device);
  return states[device];
}

// The work of a host wait on `device`, with s.mutex held: runs `enqueue` (copies whose results the
// caller wants), queues the error log's copy and reset when errors are pending, waits for the stream
// (counted as `what`), then runs `collect` (reads the copies). Throws the first recorded error.
void wait_for_stream(int device, const char* what, const std::function<void(cudaStream_t)>& enqueue = {},
                     const std::function<void()>& collect = {}) {
  DeviceState& s = state_of(device);
  const cudaStream_t stream = context(device).stream;
  std::vector<ErrorDescriber> pending;
  std::vector<unsigned long long> positions;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (enqueue) enqueue(stream);
    const size_t n = s.pending_errors.size();
    if (n > 0) {
      CUDA_CHECK(cudaMemcpyAsync(s.error_slots_host, s.error_slots, n * sizeof(unsigned long long),
                                 cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaMemsetAsync(s.error_slots, 0xFF, n * sizeof(unsigned long long), stream));
      pending.swap(s.pending_errors);
    }
    {
      const ::sru::detail::TimedDeviceWait wait(what);
      CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    positions.assign(s.error_slots_host, s.error_slots_host + n);
    if (collect) collect();
  }
  for (size_t i = 0; i < positions.size(); ++i)
    if (positions[i] != kNoError)
      throw Error(pending[i](static_cast<int64_t>(positions[i])) + " (found by a kernel on cuda:" +
                  std::to_string(device) + ", reported at the next host wait: " + what + ")");
}

// A free pinned chunk of at least n bytes (with s.mutex held), or null when the staging budget is spent
// and no chunk is free or big enough.
StagingChunk* free_staging_chunk(DeviceState& s, size_t n) {
  StagingChunk* best = nullptr;
  for (StagingChunk& c : s.staging) {
    if (c.size < n || (best && c.size >= best->size)) continue;
    if (c.in_flight) {
      const cudaError_t q = cudaEventQuery(c.done);
      if (q == cudaErrorNotReady) continue;
      if (q != cudaSuccess) detail::fail_cuda("cudaEventQuery(staging)", q, __FILE__, __LINE__);
      c.in_flight = false;
    }
    best = &c;
  }
  if (best) return best;
  size_t size = kStagingMinChunk;
  while (size < n) size *= 2;
  if (s.staging_bytes + size > kStagingBudget) {
    // Budget spent: wait for a big enough chunk's copy (counted), if there is such a chunk.
    for (StagingChunk& c : s.staging)
      if (c.size >= n) {
        {
          const ::sru::detail::TimedDeviceWait wait("cudaEventSynchronize (staging buffers all in flight)");
          CUDA_CHECK(cudaEventSynchronize(c.done));
        }
        c.in_flight = false;
        return &c;
      }
    return nullptr;
  }
  StagingChunk c;
  ::sru::detail::host_profile_mark("cudaMallocHost (a new pinned staging chunk)");
  const cudaError_t pinned = cudaMallocHost(reinterpret_cast<void**>(&c.host), size);
  ::sru::detail::host_profile_mark("(host work after cudaMallocHost)");
  if (pinned != cudaSuccess) {
    cudaGetLastError();  // no pinned memory to be had: the caller copies directly
    return nullptr;
  }
  c.size = size;
  CUDA_CHECK(cudaEventCreateWithFlags(&c.done, cudaEventDisableTiming));
  s.staging_bytes += size;
  s.staging.push_back(c);
  return &s.staging.back();
}

// Refuses `what` while the device's stream is being captured into a CUDA graph (core/cuda/graph.h): a
// staging copy or an error slot captured into a graph would be replayed against host state that has
// moved on (the reused pinned chunk, the error log). `advice` ends the message.
void refuse_while_capturing(cudaStream_t stream, int device, const char* what,
                            const char* advice = "copy inputs into static device tensors before the capture") {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  SRU_CHECK(status == cudaStreamCaptureStatusNone, what, " on cuda:", device, " while a CUDA graph is being captured: ",
            advice, " (core/cuda/graph.h)");
}

// Host -> device: through a pinned chunk, returning at once; or directly with a counted wait.
void copy_to_device(void* dst, const void* src, size_t n, int device) {
  DeviceState& s = state_of(device);
  const cudaStream_t stream = context(device).stream;
  refuse_while_capturing(stream, device, "a copy from the host");
  ::sru::detail::host_profile_mark("copy_to_device");
  if (n <= kStagingMaxCopy) {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (StagingChunk* c = free_staging_chunk(s, n)) {
      std::memcpy(c->host, src, n);
      CUDA_CHECK(cudaMemcpyAsync(dst, c->host, n, cudaMemcpyHostToDevice, stream));
      CUDA_CHECK(cudaEventRecord(c->done, stream));
      c->in_flight = true;
      return;
    }
  }
  // Pageable source: wait until the copy has read it, so the caller may free it.
  wait_for_stream(device, "cudaStreamSynchronize (large copy to the device)",
                  [&](cudaStream_t st) { CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, st)); });
}

template <typename T, typename F>
__global__ void map_kernel(T* data, long long n, F f) {
  SRU_GRID_STRIDE(i, n) data[i] = f(data[i], i);
}

template <typename S, typename D>
__global__ void convert_kernel(const S* src, D* dst, long long n) {
  SRU_GRID_STRIDE(i, n) dst[i] = static_cast<D>(src[i]);
}
// Four elements a thread in one access each way (core/cuda/quads.cuh) where both pointers are aligned
// to four elements; the last n % 4 one at a time. The element-at-a-time kernel moved 943 GB/s on an
// H200 (the bf16 weight and activation casts of the enwik8 step, 0.60 ms of 8.2: 2026-11-28).
template <typename S, typename D>
__global__ void convert_quads_kernel(const S* src, D* dst, long long n) {
  const long long quads = n / 4;
  SRU_GRID_STRIDE(g, quads) {
    S in[4];
    D out[4];
    load4(src + 4 * g, in);
#pragma unroll
    for (int k = 0; k < 4; ++k) out[k] = static_cast<D>(in[k]);
    store4(dst + 4 * g, out);
  }
  SRU_GRID_STRIDE(i, n - 4 * quads) dst[4 * quads + i] = static_cast<D>(src[4 * quads + i]);
}

// The element updates of Tensor's in-place methods (functors, not lambdas: nvcc does not allow device
// lambdas inside the generic lambdas of the dtype dispatch).
template <typename T>
struct FillOp {
  T value;
  __device__ T operator()(T, long long) const { return value; }
};
template <typename T>
struct AddScaledOp {  // bf16: float32 math, rounded once (the autograd engine's gradient sums)
  compute_t<T> alpha;
  const T* src;
  __device__ T operator()(T x, long long i) const { return T(compute_t<T>(x) + alpha * compute_t<T>(src[i])); }
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

bool capturing(int device) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(context(device).stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

DeviceContext& context(int device) {
  DeviceState& s = state_of(device);
  CUDA_CHECK(cudaSetDevice(device));
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.ctx) {
    auto ctx = std::make_unique<DeviceContext>();
    ctx->device = device;
    CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&ctx->cublas));
    CUBLAS_CHECK(cublasSetStream(ctx->cublas, ctx->stream));
    // cuBLAS's workspace, ours and fixed: cuBLAS otherwise allocates one itself on a stream's first
    // use, which a CUDA graph capture (core/cuda/graph.h) may not do. 32 MiB: NVIDIA's recommendation
    // for Hopper.
    CUDA_CHECK(cudaMalloc(&ctx->cublas_workspace, kCublasWorkspaceBytes));
    CUBLAS_CHECK(cublasSetWorkspace(ctx->cublas, ctx->cublas_workspace, kCublasWorkspaceBytes));
    CUBLAS_CHECK(cublasLtCreate(&ctx->cublas_lt));
    CUDNN_CHECK(cudnnCreate(&ctx->cudnn));
    CUDNN_CHECK(cudnnSetStream(ctx->cudnn, ctx->stream));
    s.ctx = std::move(ctx);
  }
  return *s.ctx;
}

unsigned long long* reserve_error_slot(int device, ErrorDescriber describe) {
  DeviceState& s = state_of(device);
  const cudaStream_t stream = context(device).stream;
  if (detail::caller_checked_inputs) return nullptr;
  refuse_while_capturing(stream, device,
                         "a kernel that reports input errors through the device error log (its inputs not checked by "
                         "the caller: cuda::CallerCheckedInputs)");
  bool full = false;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.error_slots == nullptr) {
      CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&s.error_slots), kErrorSlots * sizeof(unsigned long long)));
      CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s.error_slots_host), kErrorSlots * sizeof(unsigned long long)));
      CUDA_CHECK(cudaMemsetAsync(s.error_slots, 0xFF, kErrorSlots * sizeof(unsigned long long), stream));
    }
    full = s.pending_errors.size() == static_cast<size_t>(kErrorSlots);
  }
  if (full) wait_for_stream(device, "cudaStreamSynchronize (error log full)");
  std::lock_guard<std::mutex> lock(s.mutex);
  s.pending_errors.push_back(std::move(describe));
  return s.error_slots + (s.pending_errors.size() - 1);
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (nbytes == 0) return;
  SRU_CHECK(dst_device.is_cuda() || src_device.is_cuda(), "cuda::copy_bytes: neither side is on a CUDA device");
  if (dst_device.is_cuda() && src_device.is_cuda()) {
    if (dst_device.index == src_device.index) {  // queued on the device's stream, no wait
      CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, context(dst_device.index).stream));
      return;
    }
    // Peer copy: wait for the source device's queued work, then copy on the destination's stream.
    wait_for_stream(src_device.index, "cudaStreamSynchronize (peer copy, source)");
    wait_for_stream(dst_device.index, "cudaStreamSynchronize (peer copy)", [&](cudaStream_t st) {
      CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, nbytes, st));
    });
    return;
  }
  if (dst_device.is_cuda()) return copy_to_device(dst, src, nbytes, dst_device.index);
  wait_for_stream(src_device.index, "cudaStreamSynchronize (copy to the host)",
                  [&](cudaStream_t st) { CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, st)); });
}

void synchronize(int device) { wait_for_stream(device, "cudaStreamSynchronize (synchronize)"); }

namespace {
// Scalars copied to the host one to an 8-byte word (read_scalars, the scalars read later), as doubles.
std::vector<double> values_of_words(const char* words, const std::vector<DType>& dtypes) {
  std::vector<double> out;
  for (size_t i = 0; i < dtypes.size(); ++i)
    SRU_DISPATCH_ALL(dtypes[i], "read_scalars", [&]<typename T>() {
      T v;
      std::memcpy(&v, words + 8 * i, sizeof(T));
      out.push_back(static_cast<double>(v));
    });
  return out;
}
}  // namespace

std::vector<double> read_scalars(int device, const std::vector<Tensor>& scalars) {
  DeviceState& s = state_of(device);
  std::vector<char> bytes(scalars.size() * 8);
  wait_for_stream(
      device, "cudaStreamSynchronize (read_scalars)",
      [&](cudaStream_t st) {
        if (s.read_buffer_size < bytes.size()) {
          if (s.read_buffer) CUDA_CHECK(cudaFreeHost(s.read_buffer));  // nothing queued reads it any more
          s.read_buffer_size = std::max<size_t>(bytes.size(), 256);
          CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s.read_buffer), s.read_buffer_size));
        }
        for (size_t i = 0; i < scalars.size(); ++i) {
          SRU_CHECK(scalars[i].device() == Device::cuda(device), "read_scalars: ", scalars[i].str(), " is not on cuda:",
                    device);
          CUDA_CHECK(cudaMemcpyAsync(s.read_buffer + 8 * i, scalars[i].data_ptr(), dtype_size(scalars[i].dtype()),
                                     cudaMemcpyDeviceToHost, st));
        }
      },
      [&] {
        if (!bytes.empty()) std::memcpy(bytes.data(), s.read_buffer, bytes.size());
      });
  std::vector<DType> dtypes;
  for (const Tensor& t : scalars) dtypes.push_back(t.dtype());
  return values_of_words(bytes.data(), dtypes);
}

namespace {
// Whether a slot can take a new read (with s.mutex held): never used, read, or dropped and its copies done.
bool slot_free(ScalarReadSlot& r) {
  if (!r.in_use) return true;
  if (!r.dropped) return false;
  const cudaError_t q = cudaEventQuery(r.done);
  if (q == cudaErrorNotReady) return false;
  if (q != cudaSuccess) detail::fail_cuda("cudaEventQuery(scalars read later)", q, __FILE__, __LINE__);
  r.in_use = r.dropped = false;
  return true;
}
}  // namespace

int queue_scalar_read(int device, const std::vector<Tensor>& scalars) {
  DeviceState& s = state_of(device);
  SRU_CHECK(scalars.size() <= ScalarReadSlot::kMaxScalars, "queue_scalar_read: ", scalars.size(),
            " scalars, at most ", ScalarReadSlot::kMaxScalars);
  for (const Tensor& t : scalars)
    SRU_CHECK(t.device() == Device::cuda(device) && t.numel() == 1, "queue_scalar_read: ", t.str(),
              " is not one element on cuda:", device);
  const cudaStream_t stream = context(device).stream;
  // Captured, the event would mark a point in the graph, not in the stream: the read would not wait for it.
  refuse_while_capturing(stream, device, "a read of scalars queued for later (ScalarsReadLater)",
                         "queue the read after the capture ends, behind the graph's launch");
  std::lock_guard<std::mutex> lock(s.mutex);
  size_t slot = 0;
  while (slot < s.later_reads.size() && !slot_free(s.later_reads[slot])) ++slot;
  if (slot == s.later_reads.size()) {
    ScalarReadSlot made;
    CUDA_CHECK(cudaEventCreateWithFlags(&made.done, cudaEventDisableTiming));
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&made.host), 8 * ScalarReadSlot::kMaxScalars));
    s.later_reads.push_back(made);
  }
  ScalarReadSlot& r = s.later_reads[slot];
  for (size_t i = 0; i < scalars.size(); ++i)
    CUDA_CHECK(cudaMemcpyAsync(r.host + 8 * i, scalars[i].data_ptr(), dtype_size(scalars[i].dtype()),
                               cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaEventRecord(r.done, stream));
  r.in_use = true;
  return static_cast<int>(slot);
}

size_t scalar_read_slots(int device) {
  DeviceState& s = state_of(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.later_reads.size();
}

namespace {
ScalarReadSlot& slot_in_use(DeviceState& s, int slot) {
  SRU_CHECK(slot >= 0 && static_cast<size_t>(slot) < s.later_reads.size() && s.later_reads[slot].in_use,
            "scalar read slot ", slot, " is not in use");
  return s.later_reads[slot];
}
}  // namespace

std::vector<double> finish_scalar_read(int device, int slot, const std::vector<DType>& dtypes) {
  DeviceState& s = state_of(device);
  std::vector<double> out;
  bool errors_pending = false;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    ScalarReadSlot& r = slot_in_use(s, slot);
    {
      const ::sru::detail::TimedDeviceWait wait("cudaEventSynchronize (scalars read later)");
      CUDA_CHECK(cudaEventSynchronize(r.done));
    }
    out = values_of_words(r.host, dtypes);
    r.in_use = false;
    errors_pending = !s.pending_errors.empty();
  }
  // Kernels that may report input errors ran since the last check (replayed steps' do not: their ids are
  // staged, cuda::CallerCheckedInputs): a full wait reads the log, as any host wait would.
  if (errors_pending) wait_for_stream(device, "cudaStreamSynchronize (the error log, scalars read later)");
  return out;
}

void release_scalar_read(int device, int slot) {
  DeviceState& s = state_of(device);
  std::lock_guard<std::mutex> lock(s.mutex);  // (called from destructors: never throws, never waits)
  if (slot < 0 || static_cast<size_t>(slot) >= s.later_reads.size()) return;
  ScalarReadSlot& r = s.later_reads[slot];
  if (r.in_use) r.dropped = true;  // reused once its copies have landed (slot_free)
}

double time_on_stream_ms(int device, const std::function<void()>& fn) {
  DeviceContext& ctx = context(device);
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  CUDA_CHECK(cudaEventRecord(start, ctx.stream));
  fn();
  CUDA_CHECK(cudaEventRecord(stop, ctx.stream));
  {
    const ::sru::detail::TimedDeviceWait wait("cudaEventSynchronize (timing)");
    CUDA_CHECK(cudaEventSynchronize(stop));
  }
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

namespace {
// dst += alpha * src over bf16 storage, eight elements (16 bytes) a thread where both pointers are 16-byte
// aligned, the same float math as AddScaledOp rounded once; the last partial group element by element.
// The autograd engine's bf16 gradient sums (each SRU layer's input gradient: its GEMM's and its skip
// term's) went through map_kernel's 2-byte accesses at 1.2 TB/s: 0.48 ms of an 8.75 ms enwik8 step at bf16
// on an H200 (2026-11-28). Floor: 6 bytes an element at ~4 TB/s.
__global__ void add_scaled_bf16x8_kernel(bf16* dst, const bf16* src, float alpha, long long n) {
  SRU_GRID_STRIDE(g, (n + 7) / 8) {
    const long long first = 8 * g;
    if (first + 8 <= n) {
      uint4 dv = reinterpret_cast<const uint4*>(dst)[g];
      const uint4 sv = reinterpret_cast<const uint4*>(src)[g];
      bf16* d8 = reinterpret_cast<bf16*>(&dv);
      const bf16* s8 = reinterpret_cast<const bf16*>(&sv);
#pragma unroll
      for (int k = 0; k < 8; ++k) d8[k] = bf16(float(d8[k]) + alpha * float(s8[k]));
      reinterpret_cast<uint4*>(dst)[g] = dv;
    } else {
      for (long long i = first; i < n; ++i) dst[i] = bf16(float(dst[i]) + alpha * float(src[i]));
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
}  // namespace

void add_scaled(const Tensor& dst, const Tensor& src, double alpha) {
  if (dst.dtype() == DType::BF16 && aligned16(dst.data_ptr()) && aligned16(src.data_ptr())) {
    const long long n = dst.numel();
    if (n == 0) return;
    add_scaled_bf16x8_kernel<<<grid_for((n + 7) / 8), kBlock, 0, context(dst.device().index).stream>>>(
        dst.data<bf16>(), src.data<bf16>(), static_cast<float>(alpha), n);
    SRU_CUDA_LAUNCH_CHECK("add_scaled_bf16x8_kernel");
    return;
  }
  SRU_DISPATCH_FLOATING_BF16(dst.dtype(), "add_", [&]<typename T>() {
    launch_map<T>(dst, AddScaledOp<T>{static_cast<compute_t<T>>(alpha), src.data<T>()});
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
      const S* from = src.data<S>();
      D* to = dst.data<D>();
      if (quad_aligned(from) && quad_aligned(to)) {
        convert_quads_kernel<<<grid_for((n + 3) / 4), kBlock, 0, ctx.stream>>>(from, to, n);
      } else {
        convert_kernel<<<grid_for(n), kBlock, 0, ctx.stream>>>(from, to, n);
      }
      SRU_CUDA_LAUNCH_CHECK("convert_kernel");
    });
  });
}

void zero(const Tensor& t) {
  if (t.nbytes() == 0) return;
  CUDA_CHECK(cudaMemsetAsync(t.data_ptr(), 0, t.nbytes(), context(t.device().index).stream));
}

}  // namespace sru::cuda
