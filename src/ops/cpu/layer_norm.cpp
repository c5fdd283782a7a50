// CPU kernels of layer_norm (math in ops/layer_norm.h). Rows are independent and split across
// threads; the weight/bias gradients sum over rows per column (threads own column ranges), in row
// order, so results do not depend on the thread count. Statistics accumulate in double: float32 rows in
// eight double lanes (ops/cpu/row_exp.h: element c in lane c mod 8, the lanes added in order), which
// vectorise, the others one element at a time. bf16 x, y and dx: weight, bias, statistics and weight
// gradients in float32 (compute_t), each output rounded once.
#include <cmath>
#include <type_traits>

#include "core/parallel.h"
#include "ops/cpu/row_exp.h"
#include "ops/layer_norm.h"

namespace sru::cpu {

void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                        const Tensor& mean, const Tensor& rstd) {
  const int64_t D = x.size(-1), N = x.numel() / D;
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "layer_norm", [&]<typename T>() {
    using C = compute_t<T>;
    const T* px = x.data<T>();
    const C* w = weight.defined() ? weight.data<C>() : nullptr;
    const C* b = bias.defined() ? bias.data<C>() : nullptr;
    T* py = y.data<T>();
    C *pm = mean.data<C>(), *pr = rstd.data<C>();
    parallel_for(0, N, std::max<int64_t>(1, kParallelGrain / D), [&](int64_t lo, int64_t hi) {
      for (int64_t n = lo; n < hi; ++n) {
        const T* row = px + n * D;
        double mu = 0.0, v = 0.0;
        if constexpr (std::is_same_v<T, float>) {
          mu = rows::sum(row, D) / D;
          v = rows::sum_squared_deviations(row, D, mu);
        } else {
          double s = 0.0;
          for (int64_t j = 0; j < D; ++j) s += static_cast<double>(row[j]);
          mu = s / D;
          for (int64_t j = 0; j < D; ++j) v += (static_cast<double>(row[j]) - mu) * (static_cast<double>(row[j]) - mu);
        }
        const double r = 1.0 / std::sqrt(v / D + eps);
        pm[n] = static_cast<C>(mu);
        pr[n] = static_cast<C>(r);
        T* out = py + n * D;
        for (int64_t j = 0; j < D; ++j) {
          C h = static_cast<C>((static_cast<double>(row[j]) - mu) * r);
          if (w) h *= w[j];
          if (b) h += b[j];
          out[j] = T(h);
        }
      }
    });
  });
}

void layer_norm_backward(const Tensor& g, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const int64_t D = x.size(-1), N = x.numel() / D;
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "layer_norm_backward", [&]<typename T>() {
    using C = compute_t<T>;
    const T *pg = g.data<T>(), *px = x.data<T>();
    const C *pm = mean.data<C>(), *pr = rstd.data<C>();
    const C* w = weight.defined() ? weight.data<C>() : nullptr;
    T* pdx = dx.data<T>();
    parallel_for(0, N, std::max<int64_t>(1, kParallelGrain / D), [&](int64_t lo, int64_t hi) {
      for (int64_t n = lo; n < hi; ++n) {
        const T *gr = pg + n * D, *xr = px + n * D;
        const double mu = pm[n], r = pr[n];
        double sum_gh = 0.0, sum_gh_xhat = 0.0;
        if constexpr (std::is_same_v<T, float>) {
          const rows::NormGradSums sums = rows::norm_grad_sums(gr, w, xr, D, mu, r);
          sum_gh = sums.sum_gh;
          sum_gh_xhat = sums.sum_gh_xhat;
        } else {
          for (int64_t j = 0; j < D; ++j) {
            const double gh = w ? C(gr[j]) * w[j] : C(gr[j]);
            sum_gh += gh;
            sum_gh_xhat += gh * (static_cast<double>(xr[j]) - mu) * r;
          }
        }
        const double mean_gh = sum_gh / D, mean_gh_xhat = sum_gh_xhat / D;
        T* out = pdx + n * D;
        for (int64_t j = 0; j < D; ++j) {
          const double gh = w ? C(gr[j]) * w[j] : C(gr[j]);
          const double xhat = (static_cast<double>(xr[j]) - mu) * r;
          out[j] = static_cast<T>(r * (gh - mean_gh - xhat * mean_gh_xhat));
        }
      }
    });
    if (!dweight.defined() && !dbias.defined()) return;
    C* pdw = dweight.defined() ? dweight.data<C>() : nullptr;
    C* pdb = dbias.defined() ? dbias.data<C>() : nullptr;
    parallel_for(0, D, std::max<int64_t>(8, kParallelGrain / std::max<int64_t>(N, 1)), [&](int64_t lo, int64_t hi) {
      std::vector<double> acc_w(hi - lo, 0.0), acc_b(hi - lo, 0.0);
      for (int64_t n = 0; n < N; ++n) {
        const T *gr = pg + n * D, *xr = px + n * D;
        const double mu = pm[n], r = pr[n];
        for (int64_t j = lo; j < hi; ++j) {
          acc_w[j - lo] += static_cast<double>(gr[j]) * (static_cast<double>(xr[j]) - mu) * r;
          acc_b[j - lo] += static_cast<double>(gr[j]);
        }
      }
      for (int64_t j = lo; j < hi; ++j) {
        if (pdw) pdw[j] = static_cast<C>(acc_w[j - lo]);
        if (pdb) pdb[j] = static_cast<C>(acc_b[j - lo]);
      }
    });
  });
}

}  // namespace sru::cpu
