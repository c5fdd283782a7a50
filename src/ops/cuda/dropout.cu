// CUDA kernels of dropout. The mask: element j is keep = 1/(1-p) when the Philox uniform of
// (seed, offset, window.global_index(j)) is >= p, else 0 (core/philox.h; the window selects a batch
// shard's rows, ops/dropout.h). apply_dropout: out[j] = in[j] * that mask element, in compute_t and
// rounded once, with no mask in memory (the forward's x and the backward's gradient alike); floor: read
// in, write out, 2 x 4 bytes a float32 element (the stored mask moved 4 + 12). The CPU twin
// (ops/cpu/dropout.cpp) computes the same function, so a seed gives the same mask on both devices. Without a shard (the window is the identity) a thread per
// Philox block of 4 words writes elements 4b..4b+3 from one philox4x32_10 call; with a shard, a thread
// per element (each computing the block of its word). The per-element kernel ran at 129 GB/s on an H200
// (1.6 ms of a wmt-base step): ten Philox rounds per element, three of every four words thrown away.
#include "core/cuda/quads.cuh"
#include "core/philox.h"
#include "ops/cuda/kernel_util.cuh"
#include "ops/dropout.h"

namespace sru::cuda {

namespace {
// The two kernels both ops run, over what each writes per element: write(i, kept), kept when element i's
// Philox uniform is >= threshold. A thread per element under a shard; else a thread per Philox block.
template <typename Write>
__global__ void dropout_kernel(unsigned long long seed, PhiloxOffset draw, float threshold, long long n,
                               MaskWindow window, Write write) {
  const unsigned long long offset = draw.value();  // a captured step's base read from device memory
  SRU_GRID_STRIDE(i, n) {
    write(i, philox::u32_to_unit_float(philox::random_u32(seed, offset, window.global_index(i))) >= threshold);
  }
}
// A thread per Philox block b: elements 4b..4b+3 from its four words; write.quad when the four are in
// range and the functor's pointers are 4-element aligned (write.vector), else one element at a time.
template <typename Write>
__global__ void dropout_blocks_kernel(unsigned long long seed, PhiloxOffset draw, float threshold, long long n,
                                      Write write) {
  const unsigned long long offset = draw.value();
  SRU_GRID_STRIDE(b, (n + 3) / 4) {
    const philox::U32x4 words = philox::philox4x32_10(offset + static_cast<unsigned long long>(b), 0, seed);
    const long long first = 4 * b;
    if (write.vector && first + 4 <= n) {
      const bool kept[4] = {philox::u32_to_unit_float(words.v[0]) >= threshold,
                            philox::u32_to_unit_float(words.v[1]) >= threshold,
                            philox::u32_to_unit_float(words.v[2]) >= threshold,
                            philox::u32_to_unit_float(words.v[3]) >= threshold};
      write.quad(first, kept);
      continue;
    }
    for (int k = 0; k < 4 && first + k < n; ++k) write(first + k, philox::u32_to_unit_float(words.v[k]) >= threshold);
  }
}

template <typename Write>
void launch_dropout(uint64_t seed, PhiloxOffset offset, double p, long long n, const MaskWindow& window, Write write,
                    cudaStream_t stream) {
  if (window.first == 0 && window.span == window.global_span) {
    dropout_blocks_kernel<<<grid_for((n + 3) / 4), kBlock, 0, stream>>>(seed, offset, static_cast<float>(p), n, write);
    SRU_CUDA_LAUNCH_CHECK("dropout_blocks_kernel");
    return;
  }
  dropout_kernel<<<grid_for(n), kBlock, 0, stream>>>(seed, offset, static_cast<float>(p), n, window, write);
  SRU_CUDA_LAUNCH_CHECK("dropout_kernel");
}

// The mask element: keep or 0.
template <typename T>
struct MaskWrite {
  T keep;
  T* m;
  bool vector;  // m is 4-element aligned
  __device__ void operator()(long long i, bool kept) const { m[i] = kept ? keep : T(0); }
  __device__ void quad(long long first, const bool (&kept)[4]) const {
    T out[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) out[k] = kept[k] ? keep : T(0);
    store4(m + first, out);
  }
};
// The product with the mask element, in compute_t, rounded once.
template <typename T>
struct ApplyWrite {
  compute_t<T> keep;
  const T* x;
  T* y;
  bool vector;  // x and y are 4-element aligned
  __device__ void operator()(long long i, bool kept) const {
    using C = compute_t<T>;
    y[i] = T(C(x[i]) * (kept ? keep : C(0)));
  }
  __device__ void quad(long long first, const bool (&kept)[4]) const {
    using C = compute_t<T>;
    T in[4], out[4];
    load4(x + first, in);
#pragma unroll
    for (int k = 0; k < 4; ++k) out[k] = T(C(in[k]) * (kept[k] ? keep : C(0)));
    store4(y + first, out);
  }
};
}  // namespace

void apply_dropout(uint64_t seed, PhiloxOffset offset, double p, const Tensor& in, const Tensor& out, const MaskWindow& window) {
  const long long n = in.numel();
  if (n == 0) return;
  SRU_DISPATCH_FLOATING_BF16(in.dtype(), "dropout", [&]<typename T>() {
    const T* x = in.data<T>();
    T* y = out.data<T>();
    const ApplyWrite<T> write{static_cast<compute_t<T>>(1.0 / (1.0 - p)), x, y, quad_aligned(x) && quad_aligned(y)};
    launch_dropout(seed, offset, p, n, window, write, stream_of(in));
  });
}

void fill_dropout_mask(uint64_t seed, PhiloxOffset offset, double p, const Tensor& mask, const MaskWindow& window) {
  const long long n = mask.numel();
  if (n == 0) return;
  SRU_DISPATCH_FLOATING(mask.dtype(), "dropout_mask", [&]<typename T>() {
    launch_dropout(seed, offset, p, n, window,
                   MaskWrite<T>{static_cast<T>(1.0 / (1.0 - p)), mask.data<T>(), quad_aligned(mask.data<T>())},
                   stream_of(mask));
  });
}

}  // namespace sru::cuda
