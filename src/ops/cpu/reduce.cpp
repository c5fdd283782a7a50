// CPU kernels of sum/mean. x is viewed as (outer, n, inner); each output element (o, i) sums
// x[o, 0..n, i] in double in index order, so results do not depend on the thread count. bf16: read
// as float, the sum in double, each output rounded once (as the CUDA twin).
#include "core/parallel.h"
#include "ops/reduce.h"

namespace sru::cpu {

void reduce_middle(const Tensor& x, int64_t outer, int64_t n, int64_t inner, double scale, const Tensor& out) {
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "reduce", [&]<typename T>() {
    using C = compute_t<T>;
    const T* px = x.data<T>();
    T* po = out.data<T>();
    if (inner == 1) {
      const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1));
      parallel_for(0, outer, grain, [&](int64_t lo, int64_t hi) {
        for (int64_t o = lo; o < hi; ++o) {
          const T* row = px + o * n;
          double acc = 0.0;
          for (int64_t k = 0; k < n; ++k) acc += static_cast<double>(C(row[k]));
          po[o] = static_cast<T>(acc * scale);
        }
      });
      return;
    }
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n * inner, 1));
    parallel_for(0, outer, grain, [&](int64_t lo, int64_t hi) {
      std::vector<double> acc(inner);
      for (int64_t o = lo; o < hi; ++o) {
        std::fill(acc.begin(), acc.end(), 0.0);
        const T* block = px + o * n * inner;
        for (int64_t k = 0; k < n; ++k)
          for (int64_t i = 0; i < inner; ++i) acc[i] += static_cast<double>(C(block[k * inner + i]));
        for (int64_t i = 0; i < inner; ++i) po[o * inner + i] = static_cast<T>(acc[i] * scale);
      }
    });
  });
}

void broadcast_middle(const Tensor& g, int64_t outer, int64_t n, int64_t inner, double scale, const Tensor& out) {
  SRU_DISPATCH_FLOATING_BF16(g.dtype(), "broadcast", [&]<typename T>() {
    using C = compute_t<T>;
    const T* pg = g.data<T>();
    T* po = out.data<T>();
    const C s = static_cast<C>(scale);
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n * inner, 1));
    parallel_for(0, outer, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t o = lo; o < hi; ++o)
        for (int64_t k = 0; k < n; ++k)
          for (int64_t i = 0; i < inner; ++i) po[(o * n + k) * inner + i] = T(s * C(pg[o * inner + i]));
    });
  });
}

}  // namespace sru::cpu
