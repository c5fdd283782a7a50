// CUDA kernels of the optimisers and of gradient clipping (CPU twins in optim/optimizer.cpp).
// optimizer_update: one thread per element runs update_element (optim/optimizer_math.h), the code the
// CPU loop runs, on parameter p, gradient g and slots s0, s1 (all p's shape), in double arithmetic.
// block_sums_of_squares: sum of g[i]^2 in double over consecutive blocks of `block` elements, one CUDA
// block per block with a fixed-tree reduction; the host adds the block sums in order, as the CPU does.
#include <vector>

#include "ops/cuda/kernel_util.cuh"
#include "optim/optimizer.h"

namespace sru::optim::cuda {

namespace {

template <OptimizerKind K, typename T>
__global__ void update_kernel(T* w, const T* g, T* s0, T* s1, long long n, StepScalars o) {
  SRU_GRID_STRIDE(i, n) update_element<K, T>(w[i], g[i], s0[i], s1[i], o);
}

template <typename T>
__global__ void block_squares_kernel(const T* g, long long n, long long block, double* out) {
  __shared__ double shared[sru::cuda::kBlock];
  const long long begin = blockIdx.x * block, end = begin + block < n ? begin + block : n;
  double s = 0.0;
  for (long long i = begin + threadIdx.x; i < end; i += sru::cuda::kBlock) s += static_cast<double>(g[i]) * g[i];
  s = sru::cuda::block_sum(s, shared);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
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

std::vector<double> block_sums_of_squares(const Tensor& g, int64_t block_size) {
  const int64_t n = g.numel(), blocks = (n + block_size - 1) / block_size;
  if (blocks == 0) return {};
  Tensor partial = Tensor::empty({blocks}, DType::F64, g.device());
  SRU_DISPATCH_FLOATING(g.dtype(), "clip_grad_norm", [&]<typename T>() {
    block_squares_kernel<<<static_cast<unsigned>(blocks), sru::cuda::kBlock, 0, sru::cuda::stream_of(g)>>>(
        g.data<T>(), n, block_size, partial.data<double>());
    SRU_CUDA_LAUNCH_CHECK("block_squares_kernel");
  });
  return partial.to_vector<double>();
}

}  // namespace sru::optim::cuda
