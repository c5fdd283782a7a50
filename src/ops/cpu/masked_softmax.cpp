// CPU kernels of masked_softmax / masked_log_softmax and causal_softmax (ops/masked_softmax.h; CUDA
// twin ops/cuda/masked_softmax.cu). Rows x (N, C) are split across threads, one row per task; the keys a
// row leaves out come from a row provider (ops/masked_softmax_math.h): a mask tensor's elements through
// MaskIndex (broadcast strides, no mask copy), or the causal pattern computed from the row index. Max and
// the scores are multiplied by `scale` first (1 for masked_softmax). Forward writes y; backward writes gx
// (not accumulated) from g and the saved y: gx = scale * (the softmax backward).
// f32 and bf16 rows compute in float32, as the CUDA warp kernel (rows up to 1,024 keys; longer rows run
// the CUDA block kernel in double): the row's scores with hidden keys as
// -inf in a scratch row, then cpu/row_exp.h's max, exp polynomial and double-lane sums (bf16: read as
// float, each output rounded once). f64 rows (the gradient checks) run the per-element math of
// ops/masked_softmax_math.h in double, in column order.
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/row_exp.h"
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

template <typename Rows>
void softmax_rows_f64(const Tensor& x, const Rows& rows, double scale, bool log, const Tensor& y) {
  const int64_t C = x.size(-1);
  const double* px = x.data<double>();
  double* py = y.data<double>();
  for_each_row(x, rows, [&](int64_t n, const auto& mask) {
    const double* row = px + n * C;
    double* out = py + n * C;
    double row_max = -INFINITY;
    for (int64_t c = 0; c < C; ++c) row_max = std::max(row_max, masked_max_term(scale * row[c], mask.hidden(c)));
    double lse = row_max;
    if (row_max != -INFINITY) {
      double s = 0.0;
      for (int64_t c = 0; c < C; ++c) s += masked_exp_term(scale * row[c], row_max, mask.hidden(c));
      lse = row_max + std::log(s);
    }
    for (int64_t c = 0; c < C; ++c) out[c] = masked_softmax_value(scale * row[c], lse, mask.hidden(c), log);
  });
}

template <typename Rows>
void softmax_rows_backward_f64(const Tensor& g, const Tensor& y, const Rows& rows, double scale, bool log,
                               const Tensor& gx) {
  const int64_t C = y.size(-1);
  const double *pg = g.data<double>(), *py = y.data<double>();
  double* po = gx.data<double>();
  for_each_row(y, rows, [&](int64_t n, const auto& mask) {
    const double *gr = pg + n * C, *yr = py + n * C;
    double* out = po + n * C;
    double dot = 0.0;
    for (int64_t c = 0; c < C; ++c) dot += masked_softmax_dot_term(gr[c], yr[c], mask.hidden(c), log);
    for (int64_t c = 0; c < C; ++c) out[c] = scale * masked_softmax_grad(gr[c], yr[c], dot, mask.hidden(c), log);
  });
}

// A thread's float32 scratch rows (one per chunk of rows, reused row after row).
struct ScratchRows {
  std::vector<float> a, b;
  explicit ScratchRows(int64_t C) : a(static_cast<size_t>(C)), b(static_cast<size_t>(C)) {}
};

// Runs body(row n, its mask, the thread's scratch rows) for every row, rows split over threads.
template <typename Rows, typename Body>
void for_each_row_f32(const Tensor& x, const Rows& rows, const Body& body) {
  const int64_t C = x.size(-1), N = C == 0 ? 0 : x.numel() / C;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(C, 1));
  parallel_for(0, N, grain, [&](int64_t lo, int64_t hi) {
    ScratchRows scratch(C);
    for (int64_t n = lo; n < hi; ++n) body(n, rows.row(n), scratch);
  });
}

// Forward in float32: scores (scale x, hidden keys -inf) in scratch.a, their max m and s = sum exp(score
// - m), then y = exp(score - m) / s (hidden: 0) or score - (m + log s) (hidden: -inf); a fully hidden
// row gives 0 / -inf.
template <typename T, typename Rows>
void softmax_rows_f32(const Tensor& x, const Rows& rows, double scale, bool log, const Tensor& y) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  const int64_t C = x.size(-1);
  const T* px = x.data<T>();
  T* py = y.data<T>();
  const float k = static_cast<float>(scale);
  for_each_row_f32(x, rows, [&](int64_t n, const auto& mask, ScratchRows& scratch) {
    float* score = scratch.a.data();
    for (int64_t c = 0; c < C; ++c) score[c] = mask.hidden(c) ? kMinusInf : k * static_cast<float>(px[n * C + c]);
    const float row_max = cpu::rows::max(score, C);
    T* out = py + n * C;
    if (row_max == kMinusInf) {
      std::fill(out, out + C, static_cast<T>(log ? kMinusInf : 0.0f));
      return;
    }
    float* result = std::is_same_v<T, float> ? reinterpret_cast<float*>(out) : scratch.b.data();
    if (log) {
      const double sum = cpu::rows::sum_exp(score, C, row_max);
      const float lse = static_cast<float>(static_cast<double>(row_max) + std::log(sum));
      for (int64_t c = 0; c < C; ++c) result[c] = score[c] - lse;
    } else {
      // exp(score - max) / sum: the exps stored as they are summed, then scaled (one exp an element)
      const double sum = cpu::rows::exp_and_sum(score, C, row_max, result);
      cpu::rows::scale(result, C, static_cast<float>(1.0 / sum));
    }
    if constexpr (!std::is_same_v<T, float>)
      for (int64_t c = 0; c < C; ++c) out[c] = static_cast<T>(result[c]);
  });
}

// Backward in float32: the dot over visible keys (g, or g y) in double lanes, then
// scale (g - exp(y) dot) or scale y (g - dot) on visible keys, 0 on hidden ones.
template <typename T, typename Rows>
void softmax_rows_backward_f32(const Tensor& g, const Tensor& y, const Rows& rows, double scale, bool log,
                               const Tensor& gx) {
  const int64_t C = y.size(-1);
  const T *pg = g.data<T>(), *py = y.data<T>();
  T* po = gx.data<T>();
  const float k = static_cast<float>(scale);
  for_each_row_f32(y, rows, [&](int64_t n, const auto& mask, ScratchRows& scratch) {
    const T *gr = pg + n * C, *yr = py + n * C;
    float* term = scratch.a.data();  // g on visible keys, 0 on hidden ones
    for (int64_t c = 0; c < C; ++c) term[c] = mask.hidden(c) ? 0.0f : static_cast<float>(gr[c]);
    float* y_row = scratch.b.data();
    for (int64_t c = 0; c < C; ++c) y_row[c] = static_cast<float>(yr[c]);
    const float dot = static_cast<float>(log ? cpu::rows::sum(term, C) : cpu::rows::dot(term, y_row, C));
    T* out = po + n * C;
    if (log) {
      cpu::rows::exp_scaled(y_row, C, 0.0f, dot, y_row);  // exp(y) dot, in place
      for (int64_t c = 0; c < C; ++c)
        out[c] = static_cast<T>(mask.hidden(c) ? 0.0f : k * (static_cast<float>(gr[c]) - y_row[c]));
    } else {
      for (int64_t c = 0; c < C; ++c)
        out[c] = static_cast<T>(mask.hidden(c) ? 0.0f : k * (y_row[c] * (static_cast<float>(gr[c]) - dot)));
    }
  });
}

template <typename T, typename Rows>
void softmax_rows(const Tensor& x, const Rows& rows, double scale, bool log, const Tensor& y) {
  if constexpr (std::is_same_v<T, double>) softmax_rows_f64(x, rows, scale, log, y);
  else softmax_rows_f32<T>(x, rows, scale, log, y);
}

template <typename T, typename Rows>
void softmax_rows_backward(const Tensor& g, const Tensor& y, const Rows& rows, double scale, bool log,
                           const Tensor& gx) {
  if constexpr (std::is_same_v<T, double>) softmax_rows_backward_f64(g, y, rows, scale, log, gx);
  else softmax_rows_backward_f32<T>(g, y, rows, scale, log, gx);
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
