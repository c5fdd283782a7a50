// CUDA kernels of the optimisers and of gradient clipping (contracts in optim/optimizer.h; CPU twins in
// optim/cpu/optimizer.cpp).
// optimizer_update: one thread per element runs update_element (optim/optimizer_math.h), the code the
// CPU loop runs, on parameter p, gradient g and slots s0, s1 (all p's shape), in double arithmetic.
// Clipping, with no value leaving the device: sum_squares_blocks writes the sum of g[i]^2 over each
// block of `block` elements into its place in one partial buffer (one CUDA block per block, fixed-tree
// reduction in double); finish_grad_norm adds the partial sums of all parameters in order on one
// thread (as the CPU does) and writes the norm and the clip factor; scale_by_clip_factor multiplies
// each gradient by the factor it reads on the device.
#include "ops/cuda/kernel_util.cuh"
#include "optim/optimizer.h"

namespace sru::optim::cuda {

namespace {

template <OptimizerKind K, typename T>
__global__ void update_kernel(T* w, const T* g, T* s0, T* s1, long long n, StepScalars o) {
  SRU_GRID_STRIDE(i, n) update_element<K, T>(w[i], g[i], s0[i], s1[i], o);
}

template <typename T>
__global__ void block_squares_kernel(const T* g, long long n, long long block, long long blocks, double* out) {
  __shared__ double shared[sru::cuda::kBlock];
  SRU_ROW_STRIDE(b, blocks) {
    const long long begin = b * block, end = begin + block < n ? begin + block : n;
    double s = 0.0;
    for (long long i = begin + threadIdx.x; i < end; i += sru::cuda::kBlock) s += static_cast<double>(g[i]) * g[i];
    s = sru::cuda::block_sum(s, shared);
    if (threadIdx.x == 0) out[b] = s;
  }
}

__global__ void finish_norm_kernel(const double* partial, long long n, double max_norm, double* result) {
  double total = 0.0;
  for (long long i = 0; i < n; ++i) total += partial[i];
  result[0] = sqrt(total);
  result[1] = clip_factor(result[0], max_norm);
}

template <typename T>
__global__ void scale_kernel(T* g, long long n, const double* result) {
  const double factor = result[1];
  if (factor == 1.0) return;
  const T f = static_cast<T>(factor);
  SRU_GRID_STRIDE(i, n) g[i] *= f;
}

}  // namespace

void optimizer_update(OptimizerKind kind, const Tensor& p, const Tensor& g, const Tensor& s0, const Tensor& s1,
                      const StepScalars& scalars) {
  const long long n = p.numel();
  if (n == 0) return;
  const cudaStream_t stream = sru::cuda::stream_of(p);
  SRU_DISPATCH_FLOATING(p.dtype(), "optimizer step", [&]<typename T>() {
    with_optimizer_kind(kind, [&]<OptimizerKind K>() {
      update_kernel<K, T><<<sru::cuda::grid_for(n), sru::cuda::kBlock, 0, stream>>>(p.data<T>(), g.data<T>(), s0.data<T>(),
                                                                                    s1.data<T>(), n, scalars);
      SRU_CUDA_LAUNCH_CHECK("optimizer update_kernel");
    });
  });
}

void sum_squares_blocks(const Tensor& g, int64_t block_size, const Tensor& partial, int64_t at) {
  const int64_t n = g.numel(), blocks = (n + block_size - 1) / block_size;
  if (blocks == 0) return;
  SRU_DISPATCH_FLOATING(g.dtype(), "clip_grad_norm", [&]<typename T>() {
    block_squares_kernel<<<sru::cuda::rows_grid(blocks), sru::cuda::kBlock, 0, sru::cuda::stream_of(g)>>>(
        g.data<T>(), n, block_size, blocks, partial.data<double>() + at);
    SRU_CUDA_LAUNCH_CHECK("block_squares_kernel");
  });
}

void finish_grad_norm(const Tensor& partial, double max_norm, const Tensor& result) {
  finish_norm_kernel<<<1, 1, 0, sru::cuda::stream_of(result)>>>(partial.data<double>(), partial.numel(), max_norm,
                                                                result.data<double>());
  SRU_CUDA_LAUNCH_CHECK("finish_norm_kernel");
}

void scale_by_clip_factor(const Tensor& g, const Tensor& result) {
  const long long n = g.numel();
  if (n == 0) return;
  SRU_DISPATCH_FLOATING(g.dtype(), "clip_grad_norm", [&]<typename T>() {
    scale_kernel<<<sru::cuda::grid_for(n), sru::cuda::kBlock, 0, sru::cuda::stream_of(g)>>>(g.data<T>(), n,
                                                                                             result.data<double>());
    SRU_CUDA_LAUNCH_CHECK("scale_kernel");
  });
}

}  // namespace sru::optim::cuda
