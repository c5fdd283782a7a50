// Kernel dispatch helpers shared by the CPU and CUDA kernels.
//
// SRU_KERNEL(device, name, args...): calls cuda::name(args...) when `device` is a CUDA device and
// cpu::name(args...) otherwise. Builds without the CUDA backend call the CPU kernel directly (no tensor
// can live on a CUDA device there), so the ops need no CUDA symbols.
#pragma once

#include "core/device.h"
#include "core/tensor.h"

#if defined(SRU_WITH_CUDA)
#define SRU_KERNEL(DEVICE, NAME, ...) \
  ((DEVICE).is_cuda() ? ::sru::cuda::NAME(__VA_ARGS__) : ::sru::cpu::NAME(__VA_ARGS__))
#else
#define SRU_KERNEL(DEVICE, NAME, ...) ::sru::cpu::NAME(__VA_ARGS__)
#endif

namespace sru {

// Calls fn(const I* data) with the data of an index tensor (i64 or i32; callers check the dtype).
template <typename F>
void with_index_data(const Tensor& indices, const F& fn) {
  if (indices.dtype() == DType::I64) fn(indices.data<int64_t>());
  else fn(indices.data<int32_t>());
}

}  // namespace sru
