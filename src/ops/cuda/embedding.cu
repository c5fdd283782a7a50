// CUDA kernels of the embedding lookup (math in ops/embedding.h; CPU twins in ops/cpu/embedding.cpp).
// forward: out[i, :] = weight[idx[i], :], one thread per output element; an index outside [0, V) is
// reported (first position) after the kernel, as the CPU reports it.
// backward: grad_weight[idx[i], j] += grad[i, j] for i != padding rows. One thread per column j adds
// the positions in order: no atomics, so the result is deterministic and equal to the CPU's order.
#include "ops/dispatch.h"
#include "ops/cuda/kernel_util.cuh"
#include "ops/embedding.h"

namespace sru::cuda {

namespace {

template <typename T, typename I>
__global__ void embedding_forward_kernel(const T* w, long long V, long long D, const I* idx, long long n, T* out,
                                         unsigned long long* bad) {
  SRU_GRID_STRIDE(e, n * D) {
    const long long i = e / D, j = e % D;
    const long long row = static_cast<long long>(idx[i]);
    if (row < 0 || row >= V) {
      atomicMin(bad, static_cast<unsigned long long>(i));
      out[e] = T(0);
    } else {
      out[e] = w[row * D + j];
    }
  }
}

template <typename T, typename I>
__global__ void embedding_backward_kernel(const T* g, const I* idx, long long n, long long D, long long padding_idx,
                                          T* gw) {
  SRU_GRID_STRIDE(j, D) {
    for (long long i = 0; i < n; ++i) {
      const long long row = static_cast<long long>(idx[i]);
      if (row != padding_idx) gw[row * D + j] += g[i * D + j];
    }
  }
}

}  // namespace

void embedding_forward(const Tensor& weight, const Tensor& indices, const Tensor& out) {
  const int64_t V = weight.size(0), D = weight.size(1), n = indices.numel();
  if (n * D == 0) return;
  BadIndexFlag bad(weight);
  SRU_DISPATCH_FLOATING(weight.dtype(), "embedding", [&]<typename T>() {
    with_index_data(indices, [&](const auto* idx) {
      embedding_forward_kernel<<<grid_for(n * D), kBlock, 0, stream_of(weight)>>>(weight.data<T>(), V, D, idx, n,
                                                                                   out.data<T>(), bad.ptr());
      SRU_CUDA_LAUNCH_CHECK("embedding_forward_kernel");
    });
  });
  const int64_t i = bad.first_bad();
  if (i >= 0)
    SRU_FAIL("embedding: index ", indices.view({-1}).narrow0(i, 1).item<int64_t>(), " at position ", i,
             " is outside the vocabulary [0, ", V, ")");
}

void embedding_backward(const Tensor& grad, const Tensor& indices, int64_t padding_idx, const Tensor& grad_weight) {
  const int64_t D = grad_weight.size(1), n = indices.numel();
  if (n * D == 0) return;
  SRU_DISPATCH_FLOATING(grad_weight.dtype(), "embedding_backward", [&]<typename T>() {
    with_index_data(indices, [&](const auto* idx) {
      embedding_backward_kernel<<<grid_for(D, 64), 64, 0, stream_of(grad_weight)>>>(grad.data<T>(), idx, n, D,
                                                                                     padding_idx, grad_weight.data<T>());
      SRU_CUDA_LAUNCH_CHECK("embedding_backward_kernel");
    });
  });
}

}  // namespace sru::cuda
