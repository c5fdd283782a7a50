// CPU kernels of the embedding lookup (see ops/embedding.h for the math).
#include <cstring>

#include "core/parallel.h"
#include "ops/dispatch.h"
#include "ops/embedding.h"

namespace sru::cpu {

void embedding_forward(const Tensor& weight, const Tensor& indices, const Tensor& out) {
  const int64_t V = weight.size(0), D = weight.size(1), n = indices.numel();
  SRU_DISPATCH_FLOATING(weight.dtype(), "embedding", [&]<typename T>() {
    with_index_data(indices, [&](const auto* idx) {
      for (int64_t i = 0; i < n; ++i)
        SRU_CHECK(idx[i] >= 0 && idx[i] < V, embedding_index_error(static_cast<int64_t>(idx[i]), i, V));
      const T* w = weight.data<T>();
      T* o = out.data<T>();
      const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(D, 1));
      parallel_for(0, n, grain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) std::memcpy(o + i * D, w + static_cast<int64_t>(idx[i]) * D, D * sizeof(T));
      });
    });
  });
}

void embedding_backward(const Tensor& grad, const Tensor& indices, int64_t padding_idx, const Tensor& grad_weight) {
  const int64_t D = grad_weight.size(1), n = indices.numel();
  SRU_DISPATCH_FLOATING(grad_weight.dtype(), "embedding_backward", [&]<typename T>() {
    with_index_data(indices, [&](const auto* idx) {
      const T* g = grad.data<T>();
      T* gw = grad_weight.data<T>();
      // Threads own disjoint column ranges: no races, and each element sums in position order.
      const int64_t grain = std::max<int64_t>(8, kParallelGrain / std::max<int64_t>(n, 1));
      parallel_for(0, D, grain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = 0; i < n; ++i) {
          const int64_t row = static_cast<int64_t>(idx[i]);
          if (row == padding_idx) continue;
          T* dst = gw + row * D;
          const T* src = g + i * D;
          for (int64_t j = lo; j < hi; ++j) dst[j] += src[j];
        }
      });
    });
  });
}

}  // namespace sru::cpu
