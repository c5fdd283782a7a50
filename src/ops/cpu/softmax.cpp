// CPU kernels of softmax, log_softmax and cross-entropy: one row (C classes) per task, rows split
// across threads. f32 and bf16 rows compute in float32 (bf16: the row widened, each output rounded
// once): exps by cpu/row_exp.h's polynomial (eight AVX2 lanes where the processor has them), sums of a
// row in double lanes, the logsumexp itself in double and stored as float32 (compute_t). f64 rows (the
// gradient checks) compute in double with std::exp. Target indices are range-checked (a clear error,
// not a wild read).
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/row_exp.h"
#include "ops/dispatch.h"
#include "ops/softmax.h"
#include "ops/softmax_math.h"

namespace sru::cpu {

namespace {

// The double path's logsumexp (f64 rows).
double row_logsumexp(const double* row, int64_t C) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < C; ++c) mx = std::max<double>(mx, row[c]);
  if (std::isinf(mx)) return mx;
  double s = 0.0;
  for (int64_t c = 0; c < C; ++c) s += std::exp(row[c] - mx);
  return mx + std::log(s);
}

// A float32 row's logsumexp: its max, then the sum of exp(x - max) in double lanes (cpu/row_exp.h).
double row_logsumexp(const float* row, int64_t C) {
  const float mx = rows::max(row, C);
  if (std::isinf(mx)) return mx;
  return static_cast<double>(mx) + std::log(rows::sum_exp(row, C, mx));
}

// A row of T as float32: the row itself for float, else widened into `buffer` (bf16).
template <typename T>
const float* widened(const T* row, int64_t C, std::vector<float>& buffer) {
  if constexpr (std::is_same_v<T, float>) {
    return row;
  } else {
    buffer.resize(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) buffer[c] = static_cast<float>(row[c]);
    return buffer.data();
  }
}

// Where a float32 result row is computed: the output row for float, else `buffer`, which store_row
// then rounds into the output (bf16).
template <typename T>
float* result_row(T* out, int64_t C, std::vector<float>& buffer) {
  if constexpr (std::is_same_v<T, float>) {
    return out;
  } else {
    buffer.resize(static_cast<size_t>(C));
    return buffer.data();
  }
}

template <typename T>
void store_row(const float* values, int64_t C, T* out) {
  if constexpr (!std::is_same_v<T, float>)
    for (int64_t c = 0; c < C; ++c) out[c] = static_cast<T>(values[c]);
}

int64_t row_grain(int64_t C) { return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(C, 1)); }

template <typename I>
void check_targets(const I* t, int64_t N, int64_t C, int64_t ignore_index) {
  for (int64_t n = 0; n < N; ++n) {
    const int64_t k = static_cast<int64_t>(t[n]);
    SRU_CHECK(k == ignore_index || (k >= 0 && k < C), cross_entropy_target_error(k, n, C, ignore_index));
  }
}

}  // namespace

void softmax_forward(const Tensor& x, bool log, const Tensor& y) {
  const int64_t C = x.size(-1), N = C == 0 ? 0 : x.numel() / C;
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "softmax", [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y.data<T>();
    parallel_for(0, N, row_grain(C), [&](int64_t lo, int64_t hi) {
      std::vector<float> in_buffer, out_buffer;
      for (int64_t n = lo; n < hi; ++n) {
        if constexpr (std::is_same_v<T, double>) {
          const double* row = px + n * C;
          const double lse = row_logsumexp(row, C);
          for (int64_t c = 0; c < C; ++c) py[n * C + c] = log ? row[c] - lse : std::exp(row[c] - lse);
        } else {
          const float* row = widened(px + n * C, C, in_buffer);
          float* out = result_row(py + n * C, C, out_buffer);
          const float mx = rows::max(row, C);
          if (std::isinf(mx)) {  // all -inf (NaN out, as x - logsumexp) or a +inf logit
            for (int64_t c = 0; c < C; ++c) out[c] = log ? row[c] - mx : rows::exp(row[c] - mx);
          } else if (log) {
            const float lse = static_cast<float>(static_cast<double>(mx) + std::log(rows::sum_exp(row, C, mx)));
            for (int64_t c = 0; c < C; ++c) out[c] = row[c] - lse;
          } else {
            rows::scale(out, C, static_cast<float>(1.0 / rows::exp_and_sum(row, C, mx, out)));  // one exp an element
          }
          store_row(out, C, py + n * C);
        }
      }
    });
  });
}

void softmax_backward(const Tensor& g, const Tensor& y, bool log, const Tensor& gx) {
  const int64_t C = y.size(-1), N = C == 0 ? 0 : y.numel() / C;
  SRU_DISPATCH_FLOATING_BF16(y.dtype(), "softmax_backward", [&]<typename T>() {
    const T *pg = g.data<T>(), *py = y.data<T>();
    T* po = gx.data<T>();
    parallel_for(0, N, row_grain(C), [&](int64_t lo, int64_t hi) {
      std::vector<float> g_buffer, y_buffer, out_buffer;
      for (int64_t n = lo; n < hi; ++n) {
        if constexpr (std::is_same_v<T, double>) {
          const double *gr = pg + n * C, *yr = py + n * C;
          double dot = 0.0;
          for (int64_t c = 0; c < C; ++c) dot += log ? gr[c] : gr[c] * yr[c];
          for (int64_t c = 0; c < C; ++c) po[n * C + c] = log ? gr[c] - std::exp(yr[c]) * dot : yr[c] * (gr[c] - dot);
        } else {
          const float* gr = widened(pg + n * C, C, g_buffer);
          const float* yr = widened(py + n * C, C, y_buffer);
          float* out = result_row(po + n * C, C, out_buffer);
          if (log) {  // g - exp(y) sum(g)
            rows::exp_scaled(yr, C, 0.0f, static_cast<float>(rows::sum(gr, C)), out);
            for (int64_t c = 0; c < C; ++c) out[c] = gr[c] - out[c];
          } else {  // y (g - sum(g y))
            const float dot = static_cast<float>(rows::dot(gr, yr, C));
            for (int64_t c = 0; c < C; ++c) out[c] = yr[c] * (gr[c] - dot);
          }
          store_row(out, C, po + n * C);
        }
      }
    });
  });
}

void cross_entropy_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index, Reduction reduction,
                           double label_smoothing, const Tensor& lse, const Tensor& share, const Tensor& loss,
                           const Tensor& scale) {
  const int64_t N = logits.size(0), C = logits.size(1);
  const double eps = label_smoothing;
  double total = 0.0;
  int64_t counted = 0;
  SRU_DISPATCH_FLOATING_BF16(logits.dtype(), "cross_entropy", [&]<typename T>() {
    using Acc = compute_t<T>;
    with_index_data(target, [&](const auto* t) {
      check_targets(t, N, C, ignore_index);
      const T* px = logits.data<T>();
      Acc* pl = lse.data<Acc>();
      double* ps = eps > 0 ? share.data<double>() : nullptr;
      std::vector<double> row_loss(N, 0.0);
      parallel_for(0, N, row_grain(C), [&](int64_t lo, int64_t hi) {
        std::vector<float> buffer;
        for (int64_t n = lo; n < hi; ++n) {
          const Acc* row;  // the row in the compute type (float32 for f32 and bf16)
          if constexpr (std::is_same_v<T, double>) row = px + n * C;
          else row = widened(px + n * C, C, buffer);
          const double l = row_logsumexp(row, C);
          pl[n] = static_cast<Acc>(l);
          double kept_sum = 0.0, kept = 0.0;
          if (eps > 0) {
            if constexpr (std::is_same_v<T, double>) {
              for (int64_t c = 0; c < C; ++c)
                if (smoothing_keeps(row[c])) {
                  kept_sum += row[c];
                  kept += 1.0;
                }
            } else {
              const rows::KeptSum k = rows::sum_kept(row, C);
              kept_sum = k.sum;
              kept = static_cast<double>(k.count);
            }
            ps[n] = smoothing_share(eps, kept);
          }
          const int64_t k = static_cast<int64_t>(t[n]);
          row_loss[n] = k == ignore_index ? 0.0 : cross_entropy_row_loss(l, static_cast<double>(row[k]), eps, kept_sum, kept);
        }
      });
      // Summed in row order: the loss does not depend on the thread count.
      for (int64_t n = 0; n < N; ++n) {
        total += row_loss[n];
        counted += static_cast<int64_t>(t[n]) != ignore_index;
      }
    });
    const double s = cross_entropy_scale(reduction, counted);
    *scale.data<double>() = s;
    *loss.data<Acc>() = static_cast<Acc>(total * s);
  });
}

void cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& lse, int64_t ignore_index,
                            double label_smoothing, const Tensor& share, const Tensor& scale, const Tensor& grad,
                            const Tensor& gx) {
  const int64_t N = logits.size(0), C = logits.size(1);
  const double eps = label_smoothing;
  SRU_DISPATCH_FLOATING_BF16(logits.dtype(), "cross_entropy_backward", [&]<typename T>() {
    using Acc = compute_t<T>;
    const double factor = *scale.data<double>() * static_cast<double>(*grad.data<Acc>());
    const double* ps = eps > 0 ? share.data<double>() : nullptr;
    with_index_data(target, [&](const auto* t) {
      const T* px = logits.data<T>();
      const Acc* pl = lse.data<Acc>();
      T* po = gx.data<T>();
      parallel_for(0, N, row_grain(C), [&](int64_t lo, int64_t hi) {
        std::vector<float> in_buffer, out_buffer;
        for (int64_t n = lo; n < hi; ++n) {
          T* out = po + n * C;
          const int64_t k = static_cast<int64_t>(t[n]);
          if (k == ignore_index) {
            std::fill(out, out + C, T(0));
            continue;
          }
          const double row_share = ps ? ps[n] : 0.0;
          if constexpr (std::is_same_v<T, double>) {
            for (int64_t c = 0; c < C; ++c)
              out[c] = cross_entropy_grad<T>(px[n * C + c], pl[n], c == k, eps, row_share, factor);
          } else {
            // (p_c - q_c) factor in float32, as cross_entropy_grad<float> with its exp by rows::exp.
            const float* row = widened(px + n * C, C, in_buffer);
            float* g = result_row(out, C, out_buffer);
            const float l = pl[n], f = static_cast<float>(factor);
            if (eps == 0.0) {
              rows::exp_scaled(row, C, l, f, g);
              g[k] -= f;
            } else {
              rows::exp_scaled(row, C, l, 1.0f, g);
              const float p_target = g[k], s = static_cast<float>(row_share);
              for (int64_t c = 0; c < C; ++c) g[c] = (g[c] - (smoothing_keeps(row[c]) ? s : 0.0f)) * f;
              g[k] = (p_target - static_cast<float>(1.0 - eps + (smoothing_keeps(row[k]) ? row_share : 0.0))) * f;
            }
            store_row(g, C, out);
          }
        }
      });
    });
  });
}

}  // namespace sru::cpu
