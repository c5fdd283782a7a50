// The CUDA backend's host-side interface, callable from plain C++ (no CUDA headers here): memory,
// copies between devices, the per-device stream, and the in-place tensor updates that Tensor's
// methods need. Implemented in runtime.cu; builds without CUDA link none.cpp instead, whose
// functions throw (they are unreachable there: no tensor can live on a CUDA device).
#pragma once

#include <cstddef>
#include <functional>

#include "core/allocator.h"
#include "core/device.h"

namespace sru {
class Tensor;
}

namespace sru::cuda {

// Device memory from the caching allocator (allocator.cu); *rounded receives the size to release.
void* allocate(size_t nbytes, int device, size_t* rounded);
void release(void* ptr, size_t rounded, int device);
AllocatorStats allocator_stats(int device);
// Returns the cached free blocks of every device to the driver.
void empty_cache();

// Copies nbytes between any two of host and device memory, ordered on the device's stream. Returns
// when the data can be used on the host (device -> host) or the source may be reused (host -> device).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);
// Waits until all work queued on the device's stream has finished.
void synchronize(int device = 0);
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
