// softmax / log_softmax over the last dim, and fused cross-entropy with an ignore index.
//
// Shapes: x (..., C) viewed as rows (N, C).
//   softmax:      y = exp(x - max) / sum exp(x - max);   backward dx = y * (g - sum_c g*y)
//   log_softmax:  y = x - logsumexp(x);                   backward dx = g - exp(y) * sum_c g
//   cross_entropy(logits (N, C), target (N) i64/i32): loss_n = logsumexp(logits_n) - logits_n[target_n],
//     rows whose target == ignore_index contribute 0; Mean divides by the number of counted rows.
//     Saves logits and the per-row logsumexp (N); backward dx = (softmax - onehot(target)) * g * scale.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace sru {

enum class Reduction { Mean, Sum };

Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::Mean);

namespace cpu {
void softmax_forward(const Tensor& x, bool log, const Tensor& y);
void softmax_backward(const Tensor& g, const Tensor& y, bool log, const Tensor& gx);
// Writes the per-row logsumexp into lse (N) and returns (sum of counted losses, counted rows).
std::pair<double, int64_t> cross_entropy_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                                 const Tensor& lse);
// gx = (softmax(logits) - onehot(target)) * scale for counted rows, 0 for ignored rows.
void cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& lse, int64_t ignore_index,
                            double scale, const Tensor& gx);
}  // namespace cpu
// The CUDA twins (ops/cuda/softmax.cu): same contracts, tensors on one CUDA device.
namespace cuda {
void softmax_forward(const Tensor& x, bool log, const Tensor& y);
void softmax_backward(const Tensor& g, const Tensor& y, bool log, const Tensor& gx);
std::pair<double, int64_t> cross_entropy_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                                 const Tensor& lse);
void cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& lse, int64_t ignore_index,
                            double scale, const Tensor& gx);
}  // namespace cuda

}  // namespace sru
