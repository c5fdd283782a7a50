// The simplified SRU (SSRU) recurrence of Marian's decoder (Kim et al. 2019), forward and backward,
// one direction. Math per element: ops/ssru_math.h.
//
// Shapes (L = length, B = batch, d = hidden):
//   U            (L, B, 2d)  per step the projection [z | u_f]: z = W x in columns 0..d-1, u_f = W_f x in
//                            columns d..2d-1 (one bias-free product's output, read in place)
//   forget_bias  (d)         b_f, added to u_f (undefined = 0)
//   c0           (B, d)      initial state (undefined = zeros)
//   mask_pad     (L, B)      any dtype, nonzero = padded step: c carries over, h = 0, no gradient
// Returns h (L, B, d) and the last state c (B, d).
// Saved for backward: c at every step (L, B, d), plus U. Backward walks time in reverse; every gradient
// of U is per (t, b, j) and fully overwritten; the forget bias's is the sum of u_f's over (t, b), taken
// by the wrapper with the sum op (fixed order). f32 and f64.
#pragma once

#include <utility>

#include "core/tensor.h"
#include "ops/kernels.h"

namespace sru {

std::pair<Tensor, Tensor> ssru_recurrence(const Tensor& U, const Tensor& forget_bias, const Tensor& c0,
                                          const Tensor& mask_pad);

struct SsruTensors {
  Tensor U, forget_bias, c0, mask_pad;
};

// For the dispatcher's device check (ops/dispatch.h): every tensor operand.
template <typename F>
void visit_tensors(const SsruTensors& t, F&& f) {
  for (const Tensor* p : {&t.U, &t.forget_bias, &t.c0, &t.mask_pad}) f(*p);
}

// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/ssru_recurrence.cu) have the same
// contracts, tensors on one CUDA device.
SRU_DECLARE_KERNELS(
// Writes h (L, B, d), c_all (L, B, d) and c_last (B, d).
void ssru_recurrence_forward(const SsruTensors& in, const Tensor& h, const Tensor& c_all, const Tensor& c_last);
// Overwrites grad_U (L, B, 2d) and grad_c0 (B, d, when defined). grad_h and grad_c_last (undefined =
// zeros) are the incoming gradients.
void ssru_recurrence_backward(const SsruTensors& in, const Tensor& c_all, const Tensor& grad_h,
                              const Tensor& grad_c_last, const Tensor& grad_U, const Tensor& grad_c0);
)

}  // namespace sru
