// CUDA kernel of the selection ops (see ops/select.h; CPU twin ops/cpu/select.cpp):
// out[i] = cond[i % nc] != 0 ? (a ? a[i] : a_value) : (b ? b[i] : b_value), one thread per element.
#include "ops/cuda/kernel_util.cuh"
#include "ops/select.h"

namespace sru::cuda {

namespace {
template <typename T, typename C>
__global__ void select_kernel(const C* cond, long long nc, const T* a, T va, const T* b, T vb, T* out, long long n) {
  SRU_GRID_STRIDE(i, n) {
    const bool take_a = cond[i % nc] != C(0);
    out[i] = take_a ? (a ? a[i] : va) : (b ? b[i] : vb);
  }
}
}  // namespace

void select(const Tensor& cond, const Tensor& a, double a_value, const Tensor& b, double b_value, const Tensor& out) {
  const long long n = out.numel(), nc = cond.numel();
  if (n == 0) return;
  SRU_DISPATCH_FLOATING_BF16(out.dtype(), "select", [&]<typename T>() {
    SRU_DISPATCH_ALL(cond.dtype(), "select condition", [&]<typename C>() {
      select_kernel<<<grid_for(n), kBlock, 0, stream_of(out)>>>(
          cond.data<C>(), nc, data_or_null<T>(a), static_cast<T>(a_value),
          data_or_null<T>(b), static_cast<T>(b_value), out.data<T>(), n);
      SRU_CUDA_LAUNCH_CHECK("select_kernel");
    });
  });
}

}  // namespace sru::cuda
