// CUDA kernels of the embedding lookup (math in ops/embedding.h; CPU twins in ops/cpu/embedding.cpp).
// forward: out[i, :] = weight[idx[i], :], one thread per output element; an index outside [0, V) gives a
// zero row and goes into the device error log (first position; reported at the next host wait with the
// CPU's message, core/cuda/runtime.h), so the lookup needs no host wait.
// backward: grad_weight[idx[i], j] += grad[i, j] for rows other than padding_idx, without atomics: the
// (index, position) pairs are sorted by index with a stable radix sort (ops/cuda/index_sort.cuh; an index
// outside [0, V) is keyed V, sorts last and is skipped), so each index's positions form one run in
// position order; the thread of (run start, column j) adds the run's gradient rows in that order, as the
// CPU does (deterministic, and the same sums). Parallel over runs x columns.
#include "ops/cuda/index_sort.cuh"
#include "ops/cuda/kernel_util.cuh"
#include "ops/dispatch.h"
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

// One thread per (sorted slot i, column j); the threads at the start of a run of equal keys do the work.
template <typename T>
__global__ void embedding_backward_kernel(const T* g, const int32_t* keys, const int32_t* positions, long long n,
                                          long long V, long long D, long long padding_idx, T* gw) {
  SRU_GRID_STRIDE(e, n * D) {
    const long long i = e / D, j = e % D;
    const int32_t key = keys[i];
    if ((i > 0 && keys[i - 1] == key) || key == padding_idx || key >= V) continue;
    T sum = T(0);
    for (long long k = i; k < n && keys[k] == key; ++k) sum += g[static_cast<long long>(positions[k]) * D + j];
    gw[static_cast<long long>(key) * D + j] += sum;
  }
}

}  // namespace

void embedding_forward(const Tensor& weight, const Tensor& indices, const Tensor& out) {
  const int64_t V = weight.size(0), D = weight.size(1), n = indices.numel();
  if (n * D == 0) return;
  // The indices are kept by the describer until the check, so that the message can name the value.
  unsigned long long* bad = reserve_error_slot(weight.device().index, [indices, V](int64_t i) {
    const int64_t k = indices.view({-1}).narrow0(i, 1).item<int64_t>();  // error path only
    return embedding_index_error(k, i, V);
  });
  SRU_DISPATCH_FLOATING(weight.dtype(), "embedding", [&]<typename T>() {
    with_index_data(indices, [&](const auto* idx) {
      embedding_forward_kernel<<<grid_for(n * D), kBlock, 0, stream_of(weight)>>>(weight.data<T>(), V, D, idx, n,
                                                                                   out.data<T>(), bad);
      SRU_CUDA_LAUNCH_CHECK("embedding_forward_kernel");
    });
  });
}

void embedding_backward(const Tensor& grad, const Tensor& indices, int64_t padding_idx, const Tensor& grad_weight) {
  const int64_t V = grad_weight.size(0), D = grad_weight.size(1), n = indices.numel();
  if (n * D == 0) return;
  checked_int(n, "positions", "embedding_backward");
  checked_int(V + 1, "rows + 1", "embedding_backward");
  const IndexRuns runs = sort_positions_by_index(indices, V, grad_weight.device());
  SRU_DISPATCH_FLOATING(grad_weight.dtype(), "embedding_backward", [&]<typename T>() {
    embedding_backward_kernel<<<grid_for(n * D), kBlock, 0, stream_of(grad_weight)>>>(
        grad.data<T>(), runs.keys.data<int32_t>(), runs.positions.data<int32_t>(), n, V, D, padding_idx,
        grad_weight.data<T>());
    SRU_CUDA_LAUNCH_CHECK("embedding_backward_kernel");
  });
}

}  // namespace sru::cuda
