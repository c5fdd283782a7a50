// CPU kernels of masked_softmax / masked_log_softmax and causal_softmax (ops/masked_softmax.h; CUDA
// twin ops/cuda/masked_softmax.cu). Rows x (N, C) are split across threads, one row per task; the keys a
// row leaves out come from a row provider (ops/masked_softmax_math.h): a mask tensor's elements through
// MaskIndex (broadcast strides, no mask copy), or the causal pattern computed from the row index. Max and
// sums in double, in column order; the scores are multiplied by `scale` first (1 for masked_softmax).
// The per-element math is ops/masked_softmax_math.h, shared with CUDA. Forward writes y; backward writes
// gx (not accumulated) from g and the saved y: gx = scale * (the softmax backward). f32, f64 and bf16
// rows (bf16: read as float, the math in double, each output rounded once, as the CUDA twin).
#include <algorithm>

#include "core/parallel.h"
#include "ops/masked_softmax.h"

namespace sru::cpu {

namespace {

// Runs body(row n, what row n hides) for every row of x viewed as (N, C), rows split over threads.
template <typename Rows, typename Body>
void for_each_row(const Tensor& x, const Rows& rows, const Body& body) {
  const int64_t C = x.size(-1), N = C == 0 ? 0 : x.numel() / C;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(C, 1));
  parallel_for(0, N, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) body(n, rows.row(n));
  });
}

template <typename T, typename Rows>
void softmax_rows(const Tensor& x, const Rows& rows, double scale, bool log, const Tensor& y) {
  const int64_t C = x.size(-1);
  const T* px = x.data<T>();
  T* py = y.data<T>();
  for_each_row(x, rows, [&](int64_t n, const auto& mask) {
    const T* row = px + n * C;
    T* out = py + n * C;
    double row_max = -INFINITY;
    for (int64_t c = 0; c < C; ++c) row_max = std::max(row_max, masked_max_term(scale * row[c], mask.hidden(c)));
    double lse = row_max;
    if (row_max != -INFINITY) {
      double s = 0.0;
      for (int64_t c = 0; c < C; ++c) s += masked_exp_term(scale * row[c], row_max, mask.hidden(c));
      lse = row_max + std::log(s);
    }
    for (int64_t c = 0; c < C; ++c) out[c] = static_cast<T>(masked_softmax_value(scale * row[c], lse, mask.hidden(c), log));
  });
}

template <typename T, typename Rows>
void softmax_rows_backward(const Tensor& g, const Tensor& y, const Rows& rows, double scale, bool log,
                           const Tensor& gx) {
  const int64_t C = y.size(-1);
  const T *pg = g.data<T>(), *py = y.data<T>();
  T* po = gx.data<T>();
  for_each_row(y, rows, [&](int64_t n, const auto& mask) {
    const T *gr = pg + n * C, *yr = py + n * C;
    T* out = po + n * C;
    double dot = 0.0;
    for (int64_t c = 0; c < C; ++c) dot += masked_softmax_dot_term(gr[c], yr[c], mask.hidden(c), log);
    for (int64_t c = 0; c < C; ++c)
      out[c] = static_cast<T>(scale * masked_softmax_grad(gr[c], yr[c], dot, mask.hidden(c), log));
  });
}

}  // namespace

void masked_softmax_forward(const Tensor& x, const Tensor& mask, const MaskIndex& index, bool log, const Tensor& y) {
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "masked_softmax", [&]<typename T>() {
    SRU_DISPATCH_ALL(mask.dtype(), "masked_softmax mask", [&]<typename M>() {
      softmax_rows<T>(x, TensorMaskRows<M>{mask.data<M>(), index}, 1.0, log, y);
    });
  });
}

void masked_softmax_backward(const Tensor& g, const Tensor& y, const Tensor& mask, const MaskIndex& index, bool log,
                             const Tensor& gx) {
  SRU_DISPATCH_FLOATING_BF16(y.dtype(), "masked_softmax_backward", [&]<typename T>() {
    SRU_DISPATCH_ALL(mask.dtype(), "masked_softmax mask", [&]<typename M>() {
      softmax_rows_backward<T>(g, y, TensorMaskRows<M>{mask.data<M>(), index}, 1.0, log, gx);
    });
  });
}

void causal_softmax_forward(const Tensor& x, const CausalMask& causal, double scale, const Tensor& y) {
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "causal_softmax", [&]<typename T>() { softmax_rows<T>(x, causal, scale, false, y); });
}

void causal_softmax_backward(const Tensor& g, const Tensor& y, const CausalMask& causal, double scale, const Tensor& gx) {
  SRU_DISPATCH_FLOATING_BF16(y.dtype(), "causal_softmax_backward", [&]<typename T>() {
    softmax_rows_backward<T>(g, y, causal, scale, false, gx);
  });
}

void causal_masked_softmax_forward(const Tensor& x, const CausalMask& causal, const Tensor& mask, const MaskIndex& index,
                                   double scale, const Tensor& y) {
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "causal_softmax", [&]<typename T>() {
    SRU_DISPATCH_ALL(mask.dtype(), "causal_softmax mask", [&]<typename M>() {
      softmax_rows<T>(x, CausalTensorMaskRows<M>{causal, TensorMaskRows<M>{mask.data<M>(), index}}, scale, false, y);
    });
  });
}

void causal_masked_softmax_backward(const Tensor& g, const Tensor& y, const CausalMask& causal, const Tensor& mask,
                                    const MaskIndex& index, double scale, const Tensor& gx) {
  SRU_DISPATCH_FLOATING_BF16(y.dtype(), "causal_softmax_backward", [&]<typename T>() {
    SRU_DISPATCH_ALL(mask.dtype(), "causal_softmax mask", [&]<typename M>() {
      softmax_rows_backward<T>(g, y, CausalTensorMaskRows<M>{causal, TensorMaskRows<M>{mask.data<M>(), index}}, scale, false, gx);
    });
  });
}

}  // namespace sru::cpu
