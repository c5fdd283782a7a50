// The fused recurrence of the Embed-SRU and Super-Embed-SRU first layers (a study built on the SRU:
// "Recurrent Net Language Model using SRU"), forward and backward, one direction. Math per element:
// ops/embed_sru_math.h.
//
// Shapes (L = length, B = batch, d = hidden):
//   u, f, r, x  (L, B, d)  per step: candidate, forget gate, reset gate, skip term (the caller looks
//                          them up per word; the gates are used as they are, no sigmoid)
//   c0          (B, d)     initial state (undefined = zeros)
//   mask_c      (B, d)     dropout mask values (undefined = 1), fixed across time
//   mask_pad    (L, B)     any dtype, nonzero = padded step: c carries over, h = 0, no gradient
// Returns h (L, B, d) and the last state c (B, d).
// Saved for backward: c at every step (L, B, d), plus the inputs. Backward walks time in reverse; every
// gradient is per (t, b, j) (no parameter is shared across steps inside the op), so nothing is reduced
// and every output gradient buffer is fully overwritten.
#pragma once

#include <utility>

#include "core/tensor.h"
#include "ops/kernels.h"

namespace sru {

struct EmbedSruRecurrenceOptions {
  bool super_embed = false;  // c = f c + u, h = m r g + x  (else the Embed-SRU form with 1 - f, 1 - m r)
  bool use_tanh = true;
};

std::pair<Tensor, Tensor> embed_sru_recurrence(const Tensor& u, const Tensor& f, const Tensor& r, const Tensor& x,
                                               const Tensor& c0, const Tensor& mask_c, const Tensor& mask_pad,
                                               const EmbedSruRecurrenceOptions& options);

struct EmbedSruTensors {
  Tensor u, f, r, x, c0, mask_c, mask_pad;
};

// For the dispatcher's device check (ops/dispatch.h): every tensor operand, and none in the options.
template <typename F>
void visit_tensors(const EmbedSruTensors& t, F&& f) {
  for (const Tensor* p : {&t.u, &t.f, &t.r, &t.x, &t.c0, &t.mask_c, &t.mask_pad}) f(*p);
}
template <typename F>
void visit_tensors(const EmbedSruRecurrenceOptions&, F&&) {}

// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/embed_sru_recurrence.cu) have the same contracts, tensors on one
// CUDA device.
SRU_DECLARE_KERNELS(
// Writes h (L, B, d), c_all (L, B, d) and c_last (B, d).
void embed_sru_recurrence_forward(const EmbedSruTensors& in, const EmbedSruRecurrenceOptions& o, const Tensor& h,
                                  const Tensor& c_all, const Tensor& c_last);
// Overwrites grad_u, grad_f, grad_r, grad_x (L, B, d) and grad_c0 (B, d, when defined). grad_h and
// grad_c_last (undefined = zeros) are the incoming gradients.
void embed_sru_recurrence_backward(const EmbedSruTensors& in, const EmbedSruRecurrenceOptions& o, const Tensor& c_all,
                                   const Tensor& grad_h, const Tensor& grad_c_last, const Tensor& grad_u,
                                   const Tensor& grad_f, const Tensor& grad_r, const Tensor& grad_x,
                                   const Tensor& grad_c0);
)

}  // namespace sru
