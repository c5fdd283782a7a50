// CUDA kernels of the embedding lookup (math in ops/embedding.h; CPU twins in ops/cpu/embedding.cpp).
// forward: out[i, :] = weight[idx[i], :], one thread per output element; an index outside [0, V) is
// reported (first position) after the kernel, as the CPU reports it.
// backward: grad_weight[idx[i], j] += grad[i, j] for rows other than padding_idx, without atomics: the
// (index, position) pairs are sorted by index with a stable radix sort (cub), so each index's positions
// form one run in position order; the thread of (run start, column j) adds the run's gradient rows in
// that order, as the CPU does (deterministic, and the same sums). Parallel over runs x columns.
#include <cub/device/device_radix_sort.cuh>

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

template <typename I>
__global__ void sort_input_kernel(const I* idx, long long n, int32_t* keys, int32_t* positions) {
  SRU_GRID_STRIDE(i, n) {
    keys[i] = static_cast<int32_t>(idx[i]);
    positions[i] = static_cast<int32_t>(i);
  }
}

// One thread per (sorted slot i, column j); the threads at the start of a run of equal keys do the work.
template <typename T>
__global__ void embedding_backward_kernel(const T* g, const int32_t* keys, const int32_t* positions, long long n,
                                          long long D, long long padding_idx, T* gw) {
  SRU_GRID_STRIDE(e, n * D) {
    const long long i = e / D, j = e % D;
    const int32_t key = keys[i];
    if ((i > 0 && keys[i - 1] == key) || key == padding_idx) continue;
    T sum = T(0);
    for (long long k = i; k < n && keys[k] == key; ++k) sum += g[static_cast<long long>(positions[k]) * D + j];
    gw[static_cast<long long>(key) * D + j] += sum;
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
  const int64_t V = grad_weight.size(0), D = grad_weight.size(1), n = indices.numel();
  if (n * D == 0) return;
  SRU_CHECK(n < (int64_t{1} << 31) && V < (int64_t{1} << 31), "embedding_backward: more than 2^31 positions or rows");
  const cudaStream_t s = stream_of(grad_weight);
  const Device device = grad_weight.device();
  Tensor keys_in = Tensor::empty({n}, DType::I32, device), keys = Tensor::empty({n}, DType::I32, device);
  Tensor positions_in = Tensor::empty({n}, DType::I32, device), positions = Tensor::empty({n}, DType::I32, device);
  with_index_data(indices, [&](const auto* idx) {
    sort_input_kernel<<<grid_for(n), kBlock, 0, s>>>(idx, n, keys_in.data<int32_t>(), positions_in.data<int32_t>());
    SRU_CUDA_LAUNCH_CHECK("sort_input_kernel");
  });
  // Sort only the key bits the vocabulary needs (indices were range-checked in the forward pass).
  int end_bit = 1;
  while (end_bit < 31 && (int64_t{1} << end_bit) < V) ++end_bit;
  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in.data<int32_t>(), keys.data<int32_t>(),
                                             positions_in.data<int32_t>(), positions.data<int32_t>(), static_cast<int>(n),
                                             0, end_bit, s));
  Tensor temp = Tensor::empty({static_cast<int64_t>(temp_bytes / 4 + 1)}, DType::F32, device);
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data_ptr(), temp_bytes, keys_in.data<int32_t>(), keys.data<int32_t>(),
                                             positions_in.data<int32_t>(), positions.data<int32_t>(), static_cast<int>(n),
                                             0, end_bit, s));
  SRU_DISPATCH_FLOATING(grad_weight.dtype(), "embedding_backward", [&]<typename T>() {
    embedding_backward_kernel<<<grid_for(n * D), kBlock, 0, s>>>(grad.data<T>(), keys.data<int32_t>(),
                                                                positions.data<int32_t>(), n, D, padding_idx,
                                                                grad_weight.data<T>());
    SRU_CUDA_LAUNCH_CHECK("embedding_backward_kernel");
  });
}

}  // namespace sru::cuda
