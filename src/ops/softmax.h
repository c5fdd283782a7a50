// softmax / log_softmax over the last dim, and fused cross-entropy with an ignore index.
//
// Shapes: x (..., C) viewed as rows (N, C).
//   softmax:      y = exp(x - max) / sum exp(x - max);   backward dx = y * (g - sum_c g*y)
//   log_softmax:  y = x - logsumexp(x);                   backward dx = g - exp(y) * sum_c g
//   cross_entropy(logits (N, C), target (N) i64/i32): loss_n = logsumexp(logits_n) - logits_n[target_n],
//     rows whose target == ignore_index contribute 0; Mean divides by the number of counted rows.
//     Saves logits and the per-row logsumexp (N); backward dx = (softmax - onehot(target)) * g * scale.
//     label_smoothing eps in [0, 1) (PyTorch's nn.CrossEntropyLoss(label_smoothing=eps)): the target
//     distribution is (1 - eps) onehot + eps uniform, loss_n = (1 - eps) nll_n + eps mean_c(-log p_c);
//     backward dx = (softmax - target distribution) * g * scale. Classes with logit -inf (masked) take
//     no smoothing mass (ops/softmax_math.h). Ignored rows still contribute 0 and do not count.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "ops/kernels.h"

namespace sru {

enum class Reduction { Mean, Sum };

Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::Mean, double label_smoothing = 0.0);

// Shared by the CPU and CUDA kernels: d loss / d row loss for `counted` non-ignored rows, and the
// message for a bad target k at row n.
inline double cross_entropy_scale(Reduction reduction, int64_t counted) {
  // Mean over zero counted rows is 0 (nothing to learn from), not NaN.
  return reduction == Reduction::Sum ? 1.0 : (counted > 0 ? 1.0 / static_cast<double>(counted) : 0.0);
}
std::string cross_entropy_target_error(int64_t k, int64_t n, int64_t C, int64_t ignore_index);

// The kernels leave the reduced loss on the device: forward writes the per-row logsumexp into lse (N),
// the loss into loss (0-d, logits' dtype) and d loss / d row loss into scale (0-d f64: 1 for Sum,
// 1 / counted rows for Mean, 0 when no row counts); backward reads scale and the incoming gradient
// grad (0-d) there. With label smoothing eps > 0 forward also writes each row's smoothing share
// eps / K_n into share (N, f64), which backward reads; with eps = 0 share is undefined and unused. So neither needs a host wait. A target outside [0, C) that is not the ignore index
// is an error (on a GPU reported at the next host wait, cuda::reserve_error_slot).
// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/softmax.cu) have the same contracts, tensors on one
// CUDA device.
SRU_DECLARE_KERNELS(
void softmax_forward(const Tensor& x, bool log, const Tensor& y);
void softmax_backward(const Tensor& g, const Tensor& y, bool log, const Tensor& gx);
void cross_entropy_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index, Reduction reduction,
                           double label_smoothing, const Tensor& lse, const Tensor& share, const Tensor& loss,
                           const Tensor& scale);
// gx = (softmax(logits) - target distribution) * scale * grad for counted rows, 0 for ignored rows.
void cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& lse, int64_t ignore_index,
                            double label_smoothing, const Tensor& share, const Tensor& scale, const Tensor& grad,
                            const Tensor& gx);
)

}  // namespace sru
