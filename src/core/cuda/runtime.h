// The CUDA backend's host-side interface, callable from plain C++ (no CUDA headers here): memory,
// copies between devices, host waits (each one counted, core/host_sync.h), the device error log, and
// the in-place tensor updates that Tensor's methods need. Implemented in runtime.cu and allocator.cu;
// builds without CUDA link none.cpp instead, whose functions throw (they are unreachable there: no
// tensor can live on a CUDA device).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/dtype.h"

namespace sru {
class Tensor;
}

namespace sru::cuda {

// Device memory from the caching allocator (allocator.cu over core/block_pool.h); *rounded receives the
// size handed out (the allocator finds the block by its address on release).
void* allocate(size_t nbytes, int device, size_t* rounded);
void release(void* ptr, size_t rounded, int device);
AllocatorStats allocator_stats(int device);
// Starts the device's peak_allocated and peak_reserved over from the current values.
void reset_peak_stats(int device);
// Returns the cached free segments of every device to the driver.
void empty_cache();
// The private memory pools of CUDA graph captures (core/pool_router.h; core/cuda/graph.h uses them):
// a new pool's id; the pool the device's allocations come from (0: the shared pool); a pool whose
// graph is gone (its memory returns to the driver once its last block is freed).
int create_graph_pool(int device);
void set_graph_pool(int device, int pool);
void retire_graph_pool(int device, int pool);
// False when SRU_CUDA_NO_CACHING=1 gives every tensor its own cudaMalloc (for compute-sanitizer).
bool allocator_caches();

// Copies nbytes between any two of host and device memory, ordered on the device's stream.
//   host -> device: the bytes go through a pinned staging buffer and the call returns at once (no host
//     wait; the source may be reused); copies over 64 MiB wait instead (counted);
//   device -> device on one device: queued, no wait;
//   device -> host, and between devices: a host wait (counted), which also checks the error log.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);
// Waits until all work queued on the device's stream has finished (a counted host wait; checks the
// error log).
void synchronize(int device = 0);
// Whether cuda:device's stream is being captured into a CUDA graph (core/cuda/graph.h).
bool capturing(int device);
// The values of one-element tensors on `device`, with one host wait that also checks the error log
// (sru::read_scalars calls this for CUDA tensors).
std::vector<double> read_scalars(int device, const std::vector<Tensor>& scalars);
// The same values read later (sru::ScalarsReadLater): queue_scalar_read queues their copies into a
// pinned slot behind the work queued so far and marks that point with an event, without waiting;
// finish_scalar_read(slot) waits for that event only (work queued after it keeps running: a counted
// device wait) and returns the values, then reads the error log with a full wait when kernels that
// report input errors ran since the last check; release_scalar_read gives up a slot whose values are not
// wanted, without waiting (it is reused once its copies have landed). scalar_read_slots: the slots made.
int queue_scalar_read(int device, const std::vector<Tensor>& scalars);
std::vector<double> finish_scalar_read(int device, int slot, const std::vector<DType>& dtypes);
void release_scalar_read(int device, int slot);
size_t scalar_read_slots(int device);

// Input errors found by kernels (an index out of range), reported without a host wait of their own:
// a kernel atomicMin's the first bad position into a slot of the device's error log; at the next host
// wait on that device the log is read in the same wait, and the first recorded error is thrown as
// sru::Error with describe(position) as its message. describe runs on the host and may read tensors
// (it is called only when an error was recorded). Slots are reused after each check; when all are
// pending a check is forced (one host wait). A slot must be used by a kernel launched by the thread
// that reserved it before that thread's next host wait (the ops do both in one call; srutrain drives a
// device from one host thread).
// Null (no slot, no report) inside a CallerCheckedInputs scope; refused while the device's stream is
// being captured into a CUDA graph outside one.
using ErrorDescriber = std::function<std::string(int64_t position)>;
unsigned long long* reserve_error_slot(int device, ErrorDescriber describe);

namespace detail {
inline thread_local bool caller_checked_inputs = false;
}
// For its scope (this thread), the caller vouches for the input values that kernels would otherwise
// check through the error log (embedding and index lookups, cross-entropy targets): they run without a
// slot, and an out-of-range value is skipped as before but not reported. A CUDA graph's captured step
// runs so (a capture may not reserve slots, and its replays would report against the log's later
// state): its inputs are staged by the host, which checks them there (core/cuda/graph.h).
class CallerCheckedInputs {
 public:
  CallerCheckedInputs() : previous_(detail::caller_checked_inputs) { detail::caller_checked_inputs = true; }
  ~CallerCheckedInputs() { detail::caller_checked_inputs = previous_; }
  CallerCheckedInputs(const CallerCheckedInputs&) = delete;
  CallerCheckedInputs& operator=(const CallerCheckedInputs&) = delete;

 private:
  bool previous_;
};
// The value a slot holds when no error was recorded (all bits set: atomicMin leaves it for any position).
constexpr unsigned long long kNoError = ~0ull;

// Milliseconds that the work fn queues on the device's stream takes, measured with CUDA events
// recorded before and after it (waits for the work to finish).
double time_on_stream_ms(int device, const std::function<void()>& fn);

// In-place updates of contiguous device tensors (Tensor's fill_/add_/mul_/clamp_/to(DType)).
void fill(const Tensor& t, double value);
void add_scaled(const Tensor& dst, const Tensor& src, double alpha);  // dst += alpha * src
void scale(const Tensor& t, double factor);
void clamp(const Tensor& t, double low, double high);
void convert(const Tensor& src, const Tensor& dst);  // element-wise dtype conversion, same numel
void zero(const Tensor& t);

}  // namespace sru::cuda
