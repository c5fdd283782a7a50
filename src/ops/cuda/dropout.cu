// CUDA kernel filling a dropout mask: element j is keep = 1/(1-p) when the Philox uniform of
// (seed, offset, window.global_index(j)) is >= p, else 0 (core/philox.h; the window selects a batch
// shard's rows, ops/dropout.h). The CPU twin (ops/cpu/dropout.cpp) computes the same function, so a
// seed gives the same mask on both devices. One thread per element.
#include "core/philox.h"
#include "ops/cuda/kernel_util.cuh"
#include "ops/dropout.h"

namespace sru::cuda {

namespace {
template <typename T>
__global__ void dropout_mask_kernel(unsigned long long seed, unsigned long long offset, float threshold, T keep, T* m,
                                    long long n, MaskWindow window) {
  SRU_GRID_STRIDE(i, n) {
    m[i] = philox::u32_to_unit_float(philox::random_u32(seed, offset, window.global_index(i))) >= threshold ? keep : T(0);
  }
}
}  // namespace

void fill_dropout_mask(uint64_t seed, uint64_t offset, double p, const Tensor& mask, const MaskWindow& window) {
  const long long n = mask.numel();
  if (n == 0) return;
  SRU_DISPATCH_FLOATING(mask.dtype(), "dropout_mask", [&]<typename T>() {
    dropout_mask_kernel<<<grid_for(n), kBlock, 0, stream_of(mask)>>>(seed, offset, static_cast<float>(p),
                                                                    static_cast<T>(1.0 / (1.0 - p)), mask.data<T>(), n,
                                                                    window);
    SRU_CUDA_LAUNCH_CHECK("dropout_mask_kernel");
  });
}

}  // namespace sru::cuda
