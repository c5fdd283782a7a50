// CPU kernels of masked_softmax / masked_log_softmax (ops/masked_softmax.h; CUDA twin
// ops/cuda/masked_softmax.cu). Rows x (N, C) are split across threads, one row per task; a row's
// mask elements are found through MaskIndex (broadcast strides, no mask copy); max and sums in
// double, in column order. The per-element math is ops/masked_softmax_math.h, shared with CUDA.
// Forward writes y; backward writes gx (not accumulated) from g, the saved y and the mask.
#include <algorithm>

#include "core/parallel.h"
#include "ops/masked_softmax.h"

namespace sru::cpu {

namespace {

// Runs body(row n, mask row pointer, mask column stride) for every row, rows split over threads.
template <typename M, typename Body>
void for_each_row(const Tensor& x, const Tensor& mask, const MaskIndex& index, const Body& body) {
  const int64_t C = x.size(-1), N = C == 0 ? 0 : x.numel() / C;
  const M* pm = mask.data<M>();
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(C, 1));
  parallel_for(0, N, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) body(n, pm + index.row_offset(n), index.column_stride);
  });
}

}  // namespace

void masked_softmax_forward(const Tensor& x, const Tensor& mask, const MaskIndex& index, bool log, const Tensor& y) {
  const int64_t C = x.size(-1);
  SRU_DISPATCH_FLOATING(x.dtype(), "masked_softmax", [&]<typename T>() {
    SRU_DISPATCH_ALL(mask.dtype(), "masked_softmax mask", [&]<typename M>() {
      const T* px = x.data<T>();
      T* py = y.data<T>();
      for_each_row<M>(x, mask, index, [&](int64_t n, const M* m, int64_t ms) {
        const T* row = px + n * C;
        T* out = py + n * C;
        double row_max = -INFINITY;
        for (int64_t c = 0; c < C; ++c) row_max = std::max(row_max, masked_max_term(row[c], m[c * ms] != M(0)));
        double lse = row_max;
        if (row_max != -INFINITY) {
          double s = 0.0;
          for (int64_t c = 0; c < C; ++c) s += masked_exp_term(row[c], row_max, m[c * ms] != M(0));
          lse = row_max + std::log(s);
        }
        for (int64_t c = 0; c < C; ++c) out[c] = static_cast<T>(masked_softmax_value(row[c], lse, m[c * ms] != M(0), log));
      });
    });
  });
}

void masked_softmax_backward(const Tensor& g, const Tensor& y, const Tensor& mask, const MaskIndex& index, bool log,
                             const Tensor& gx) {
  const int64_t C = y.size(-1);
  SRU_DISPATCH_FLOATING(y.dtype(), "masked_softmax_backward", [&]<typename T>() {
    SRU_DISPATCH_ALL(mask.dtype(), "masked_softmax mask", [&]<typename M>() {
      const T *pg = g.data<T>(), *py = y.data<T>();
      T* po = gx.data<T>();
      for_each_row<M>(y, mask, index, [&](int64_t n, const M* m, int64_t ms) {
        const T *gr = pg + n * C, *yr = py + n * C;
        T* out = po + n * C;
        double dot = 0.0;
        for (int64_t c = 0; c < C; ++c) dot += masked_softmax_dot_term(gr[c], yr[c], m[c * ms] != M(0), log);
        for (int64_t c = 0; c < C; ++c)
          out[c] = static_cast<T>(masked_softmax_grad(gr[c], yr[c], dot, m[c * ms] != M(0), log));
      });
    });
  });
}

}  // namespace sru::cpu
