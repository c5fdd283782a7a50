// Shared per-element math of the cross-entropy kernels (ops/cpu/softmax.cpp, ops/cuda/softmax.cu),
// written once as SRU_HD functions: the row loss on both devices, and the per-element gradient of f64
// rows (f32 and bf16 rows compute the same expressions in float32, each backend with its own exp).
//
// Label smoothing (eps in [0, 1), PyTorch's nn.CrossEntropyLoss(label_smoothing=eps)): the target
// distribution of row n with target k is q_c = (1 - eps) [c == k] + eps / K_n, and
//   loss_n = -sum_c q_c log p_c = (1 - eps) (l_n - x_k) + eps (l_n - S_n / K_n)
// with l_n the row's logsumexp, K_n its classes and S_n the sum of their logits (-mean_c log p_c =
// l_n - S_n / K_n). Classes whose logit is -inf (masked, e.g. SQuAD's padded positions in its
// log-probabilities) are left out of K_n and S_n: they take no smoothing mass (PyTorch's formula would
// make such a row's loss inf). Without such classes K_n = C, PyTorch's value.
// eps = 0 is the plain loss l_n - x_k and its gradient softmax - onehot, rounded exactly as before.
#pragma once

#include <cmath>

#include "core/dtype.h"
#include "core/hd.h"

namespace sru {

// Whether class logit x takes a share of the smoothing mass (not masked with -inf).
SRU_HD bool smoothing_keeps(double x) { return x != -INFINITY; }

// The loss of a counted row: lse = its logsumexp, x_target the target's logit, kept_sum and kept the
// sum of the kept classes' logits and their number (unused when eps = 0).
SRU_HD double cross_entropy_row_loss(double lse, double x_target, double eps, double kept_sum, double kept) {
  const double nll = lse - x_target;
  if (eps == 0.0) return nll;
  return (1.0 - eps) * nll + eps * (lse - kept_sum / kept);
}

// The smoothing mass of each kept class of a row, eps / K_n (saved per row for backward).
SRU_HD double smoothing_share(double eps, double kept) { return kept > 0 ? eps / kept : 0.0; }

// d loss / d x_c of a counted row times `factor` (the reduction's scale times the incoming gradient):
// (p_c - q_c) factor. eps = 0: exp(x - lse) factor, minus factor at the target, each rounded to T's
// compute type (float for bf16, whose gradient is then rounded once more, to bf16).
template <typename T>
SRU_HD T cross_entropy_grad(double x, double lse, bool is_target, double eps, double share, double factor) {
  using C = compute_t<T>;
  if (eps == 0.0) {
    C v = static_cast<C>(std::exp(x - lse) * factor);
    if (is_target) v -= static_cast<C>(factor);
    return T(v);
  }
  const double q = (is_target ? 1.0 - eps : 0.0) + (smoothing_keeps(x) ? share : 0.0);
  return T(static_cast<C>((std::exp(x - lse) - q) * factor));
}

}  // namespace sru
