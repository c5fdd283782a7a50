// CPU kernels of softmax, log_softmax and cross-entropy: one row (C classes) per task, rows split
// across threads; sums in double. f32, f64 and bf16 rows (bf16: each output rounded once; the
// cross-entropy's row logsumexps, loss and incoming gradient in float32, compute_t). Target indices are range-checked (a clear error, not a wild read).
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "ops/dispatch.h"
#include "ops/softmax.h"
#include "ops/softmax_math.h"

namespace sru::cpu {

namespace {

template <typename T>
double row_logsumexp(const T* row, int64_t C) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < C; ++c) mx = std::max<double>(mx, row[c]);
  if (std::isinf(mx)) return mx;
  double s = 0.0;
  for (int64_t c = 0; c < C; ++c) s += std::exp(static_cast<double>(row[c]) - mx);
  return mx + std::log(s);
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
      for (int64_t n = lo; n < hi; ++n) {
        const T* row = px + n * C;
        T* out = py + n * C;
        const double lse = row_logsumexp(row, C);
        for (int64_t c = 0; c < C; ++c) {
          const double v = static_cast<double>(row[c]) - lse;
          out[c] = static_cast<T>(log ? v : std::exp(v));
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
      for (int64_t n = lo; n < hi; ++n) {
        const T *gr = pg + n * C, *yr = py + n * C;
        T* out = po + n * C;
        double dot = 0.0;
        for (int64_t c = 0; c < C; ++c)
          dot += log ? static_cast<double>(gr[c]) : static_cast<double>(gr[c]) * static_cast<double>(yr[c]);
        for (int64_t c = 0; c < C; ++c) {
          const double gc = static_cast<double>(gr[c]), yc = static_cast<double>(yr[c]);
          out[c] = log ? static_cast<T>(gc - std::exp(yc) * dot) : static_cast<T>(yc * (gc - dot));
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
        for (int64_t n = lo; n < hi; ++n) {
          const T* row = px + n * C;
          const double l = row_logsumexp(row, C);
          pl[n] = static_cast<Acc>(l);
          double kept_sum = 0.0, kept = 0.0;
          if (eps > 0) {
            for (int64_t c = 0; c < C; ++c)
              if (smoothing_keeps(row[c])) {
                kept_sum += static_cast<double>(row[c]);
                kept += 1.0;
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
        for (int64_t n = lo; n < hi; ++n) {
          T* out = po + n * C;
          const int64_t k = static_cast<int64_t>(t[n]);
          if (k == ignore_index) {
            std::fill(out, out + C, T(0));
            continue;
          }
          const double l = pl[n], row_share = ps ? ps[n] : 0.0;
          for (int64_t c = 0; c < C; ++c)
            out[c] = cross_entropy_grad<T>(static_cast<double>(px[n * C + c]), l, c == k, eps, row_share, factor);
        }
      });
    });
  });
}

}  // namespace sru::cpu
