// CUDA kernels of dropout. The mask: element j is keep = 1/(1-p) when the Philox uniform of
// (seed, offset, window.global_index(j)) is >= p, else 0 (core/philox.h; the window selects a batch
// shard's rows, ops/dropout.h). apply_dropout: out[j] = in[j] * that mask element, in compute_t and
// rounded once, with no mask in memory (the forward's x and the backward's gradient alike); floor: read
// in, write out, 2 x 4 bytes a float32 element (the stored mask moved 4 + 12). The CPU twin (ops/cpu/dropout.cpp) computes the same function, so a
// seed gives the same mask on both devices. Without a shard (the window is the identity) a thread per
// Philox block of 4 words writes elements 4b..4b+3 from one philox4x32_10 call; with a shard, a thread
// per element (each computing the block of its word). The per-element kernel ran at 129 GB/s on an H200
// (1.6 ms of a wmt-base step): ten Philox rounds per element, three of every four words thrown away.
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
template <typename T>
__global__ void dropout_mask_blocks_kernel(unsigned long long seed, unsigned long long offset, float threshold, T keep,
                                           T* m, long long n) {
  SRU_GRID_STRIDE(b, (n + 3) / 4) {
    const philox::U32x4 words = philox::philox4x32_10(offset + static_cast<unsigned long long>(b), 0, seed);
    const long long first = 4 * b;
    for (int k = 0; k < 4 && first + k < n; ++k)
      m[first + k] = philox::u32_to_unit_float(words.v[k]) >= threshold ? keep : T(0);
  }
}
template <typename T>
__global__ void apply_dropout_kernel(unsigned long long seed, unsigned long long offset, float threshold,
                                     compute_t<T> keep, const T* x, T* y, long long n, MaskWindow window) {
  using C = compute_t<T>;
  SRU_GRID_STRIDE(i, n) {
    const bool kept = philox::u32_to_unit_float(philox::random_u32(seed, offset, window.global_index(i))) >= threshold;
    y[i] = T(C(x[i]) * (kept ? keep : C(0)));
  }
}
// Without a shard: a thread per Philox block, its four elements.
template <typename T>
__global__ void apply_dropout_blocks_kernel(unsigned long long seed, unsigned long long offset, float threshold,
                                            compute_t<T> keep, const T* x, T* y, long long n) {
  using C = compute_t<T>;
  SRU_GRID_STRIDE(b, (n + 3) / 4) {
    const philox::U32x4 words = philox::philox4x32_10(offset + static_cast<unsigned long long>(b), 0, seed);
    const long long first = 4 * b;
    for (int k = 0; k < 4 && first + k < n; ++k) {
      const bool kept = philox::u32_to_unit_float(words.v[k]) >= threshold;
      y[first + k] = T(C(x[first + k]) * (kept ? keep : C(0)));
    }
  }
}
}  // namespace

void apply_dropout(uint64_t seed, uint64_t offset, double p, const Tensor& in, const Tensor& out, const MaskWindow& window) {
  const long long n = in.numel();
  if (n == 0) return;
  const bool identity = window.first == 0 && window.span == window.global_span;
  SRU_DISPATCH_FLOATING_BF16(in.dtype(), "dropout", [&]<typename T>() {
    const compute_t<T> keep = static_cast<compute_t<T>>(1.0 / (1.0 - p));
    if (identity) {
      apply_dropout_blocks_kernel<T><<<grid_for((n + 3) / 4), kBlock, 0, stream_of(in)>>>(
          seed, offset, static_cast<float>(p), keep, in.data<T>(), out.data<T>(), n);
      SRU_CUDA_LAUNCH_CHECK("apply_dropout_blocks_kernel");
      return;
    }
    apply_dropout_kernel<T><<<grid_for(n), kBlock, 0, stream_of(in)>>>(seed, offset, static_cast<float>(p), keep,
                                                                      in.data<T>(), out.data<T>(), n, window);
    SRU_CUDA_LAUNCH_CHECK("apply_dropout_kernel");
  });
}

void fill_dropout_mask(uint64_t seed, uint64_t offset, double p, const Tensor& mask, const MaskWindow& window) {
  const long long n = mask.numel();
  if (n == 0) return;
  const bool identity = window.first == 0 && window.span == window.global_span;
  SRU_DISPATCH_FLOATING(mask.dtype(), "dropout_mask", [&]<typename T>() {
    if (identity) {
      dropout_mask_blocks_kernel<<<grid_for((n + 3) / 4), kBlock, 0, stream_of(mask)>>>(
          seed, offset, static_cast<float>(p), static_cast<T>(1.0 / (1.0 - p)), mask.data<T>(), n);
      SRU_CUDA_LAUNCH_CHECK("dropout_mask_blocks_kernel");
      return;
    }
    dropout_mask_kernel<<<grid_for(n), kBlock, 0, stream_of(mask)>>>(seed, offset, static_cast<float>(p),
                                                                    static_cast<T>(1.0 / (1.0 - p)), mask.data<T>(), n,
                                                                    window);
    SRU_CUDA_LAUNCH_CHECK("dropout_mask_kernel");
  });
}

}  // namespace sru::cuda
