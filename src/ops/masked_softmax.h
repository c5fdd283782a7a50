// Softmax and log-softmax over the last dim with a mask of positions to leave out (attention over
// padded keys, causal attention, answer spans that may not start in padding), and the causal softmax
// of attention scores with its mask computed from indices (SRU++).
//
// Shapes: x (..., C) viewed as rows (N, C). mask: any dtype, nonzero = masked, a shape that
// broadcasts to x by right-aligned numpy rules (each mask dim equals x's or is 1; leading dims may
// be missing), e.g. a key-padding mask (B, 1, C) on scores (B, R, C), a causal mask (R, C) on
// (B*H, R, C), a (B, C) mask on (B, C) scores. No copy of the mask is made: the kernels locate each
// row's mask elements by broadcast strides (MaskIndex, ops/masked_softmax_math.h).
//   masked_softmax:      y = exp(x - lse) at unmasked positions, lse = logsumexp of the unmasked x;
//                        masked positions exactly 0; a fully masked row is all 0.
//   masked_log_softmax:  y = x - lse at unmasked positions; masked positions -inf; a fully masked
//                        row is all -inf.
// Backward (saves y and the mask): softmax dx = y (g - sum_unmasked g y), log dx = g - exp(y)
// sum_unmasked g; dx is exactly 0 at masked positions and in fully masked rows (never NaN).
// An undefined mask gives the plain softmax / log_softmax (ops/softmax.h).
//
// causal_softmax(x, scale, offset, window): softmax(scale * x) over the last dim with the causal
// pattern computed from indices (CausalMask in ops/masked_softmax_math.h: query i = row % Lq sees keys
// j <= i + offset, and with window >= 0 only j >= i + offset - window) — attention scores
// (B*H, Lq, Lk) over [offset memory positions | the queries]. No mask tensor is made or read and the
// scale is folded in. Hidden positions are exactly 0, a row that sees no key is all 0; backward (saves
// y): dx = scale * y (g - sum_visible g y), exactly 0 at hidden positions.
//
// causal_softmax(x, scale, offset, window, mask): the same with a mask tensor as well (any dtype, nonzero =
// hidden, broadcast as masked_softmax's, e.g. a (B, 1, 1, Lk) key-padding mask over (B, H, Lq, Lk)
// scores): a key is hidden when the causal pattern or the mask hides it. Saves y and the mask.
//
// Loss on masked scores: cross_entropy (ops/softmax.h) accepts -inf logits, so the negative
// log-likelihood of target positions is cross_entropy(masked_log_softmax(s, m), t) or, the same,
// cross_entropy(masked_fill(s, m, -inf), t); a target at a masked position gives an infinite loss.
#pragma once

#include "core/tensor.h"
#include "ops/kernels.h"
#include "ops/masked_softmax_math.h"

namespace sru {

Tensor masked_softmax(const Tensor& x, const Tensor& mask);
Tensor masked_log_softmax(const Tensor& x, const Tensor& mask);
Tensor causal_softmax(const Tensor& x, double scale, int64_t offset, int64_t window = -1, const Tensor& mask = Tensor());

// The broadcast strides of `mask` over x's rows; throws, naming `op` and both shapes, when the mask
// does not broadcast to x.
MaskIndex broadcast_mask_index(const Shape& x, const Shape& mask, const char* op);

// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/masked_softmax.cu) have the same contracts, tensors on one
// CUDA device.
SRU_DECLARE_KERNELS(
void masked_softmax_forward(const Tensor& x, const Tensor& mask, const MaskIndex& index, bool log, const Tensor& y);
void masked_softmax_backward(const Tensor& g, const Tensor& y, const Tensor& mask, const MaskIndex& index, bool log,
                             const Tensor& gx);
void causal_softmax_forward(const Tensor& x, const CausalMask& causal, double scale, const Tensor& y);
void causal_softmax_backward(const Tensor& g, const Tensor& y, const CausalMask& causal, double scale, const Tensor& gx);
void causal_masked_softmax_forward(const Tensor& x, const CausalMask& causal, const Tensor& mask, const MaskIndex& index,
                                   double scale, const Tensor& y);
void causal_masked_softmax_backward(const Tensor& g, const Tensor& y, const CausalMask& causal, const Tensor& mask,
                                    const MaskIndex& index, double scale, const Tensor& gx);
)

}  // namespace sru
