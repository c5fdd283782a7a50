// One time step of the SRU elementwise recurrence for one column (batch b, direction, unit j), and
// its backward step, as SRU_HD functions: the CPU kernel and the CUDA kernel run this same code.
//
//   f   = sigmoid(u1 + vf * c_prev + bf)          forget gate
//   r   = sigmoid(u2 + vr * c_prev + br)          reset (highway) gate
//   c   = f * c_prev + (1 - f) * u0
//   g   = c, or tanh(c) with use_tanh
//   h   = m r g + (1 - m r) x'   with the skip term (x' = alpha x or u3), or h = m r g without it
// m is the dropout mask value (1 when not training). A padded step (mask_pad) keeps c = c_prev and
// outputs h = 0; it is handled by the kernels, not here.
#pragma once

#include <bit>
#include <type_traits>
#include <cstdint>

#include "core/hd.h"
#include "ops/elementwise_math.h"

namespace sru {

// exp(x) for x <= 0 in float, branch-free so loops over it vectorise: x = n ln2 + r with |r| <= ln2/2,
// exp(r) by the Cephes degree-6 polynomial (relative error ~1e-7), 2^n from the exponent bits.
// Inputs below -87 are clamped, so exp(x) never goes below ~1.6e-38 (an absolute error under 2e-38).
SRU_HD float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  // A NaN (or +inf) input must come out non-finite, for the trainer's non-finite check, without the
  // undefined float-to-int conversion of a NaN: the integer part is taken from 0 instead, and r keeps
  // the NaN.
  const float finite_x = (x == x && x <= 0.0f) ? x : 0.0f;
  const float n = static_cast<float>(static_cast<int32_t>(finite_x * 1.44269504088896341f - 0.5f));  // round(x / ln 2)
  const float r = x - n * 0.693359375f - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const uint32_t scale_bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
#if defined(__CUDA_ARCH__)
  return e * __uint_as_float(scale_bits);
#else
  return e * std::bit_cast<float>(scale_bits);
#endif
}

// The SRU's gate sigmoid (also the LSTM kernels' sigmoid and tanh, ops/lstm_math.h): exact (std::exp)
// in double; in float the vectorisable exp on the CPU and, on the GPU, the special-function unit's exp
// (2 + 1.17|x| ulp by CUDA's table: only tiny sigmoid values lose digits) and a fast reciprocal of a
// value in [1, 2]: the recurrence's serial step chain is latency-bound there, and the polynomial exp
// with an IEEE division was most of its instructions (docs/gpu-notes.md).
template <typename T>
SRU_HD T sru_sigmoid(T x) {
  if constexpr (std::is_same_v<T, float>) {
#if defined(__CUDA_ARCH__)
    const float e = __expf(x < 0.0f ? x : -x);  // exp(-|x|) never overflows; NaN stays NaN
    const float inv = __fdividef(1.0f, 1.0f + e);
#else
    const float e = exp_nonpositive(x < 0.0f ? x : -x);  // exp(-|x|) never overflows
    const float inv = 1.0f / (1.0f + e);
#endif
    // Both branches computed, then selected: a conditional multiply would block vectorisation.
    const float negative_side = e * inv;
    return x >= 0.0f ? inv : negative_side;
  } else {
    return sigmoid_of(x);
  }
}

template <typename T>
struct SruStepInput {
  T u0, u1, u2;  // candidate, forget and reset pre-activations from U
  T x_skip;      // x' (ignored without the skip term)
  T vf, vr, bf, br;
  T mask;        // dropout mask value m
};

template <typename T>
SRU_HD T sru_activation(T c, bool use_tanh) {
  return use_tanh ? std::tanh(c) : c;
}

// Forward step: returns c and writes h.
template <typename T>
SRU_HD T sru_step_forward(const SruStepInput<T>& in, T c_prev, bool use_tanh, bool has_skip, T& h) {
  const T f = sru_sigmoid(in.u1 + in.vf * c_prev + in.bf);
  const T r = sru_sigmoid(in.u2 + in.vr * c_prev + in.br);
  const T c = f * c_prev + (T(1) - f) * in.u0;
  const T g = sru_activation(c, use_tanh);
  const T mr = in.mask * r;
  h = has_skip ? mr * g + (T(1) - mr) * in.x_skip : mr * g;
  return c;
}

template <typename T>
struct SruStepGrads {
  T u0, u1, u2;  // d/d u0, u1, u2 (u1, u2 grads equal the gate pre-activation grads, so also d bf, d br)
  T x_skip;      // d/d x'
  T vf, vr;      // contributions to d vf, d vr
  T c_prev;      // d/d c_prev
};

// Backward step. grad_h = dL/dh at this step, grad_c = dL/dc coming from later steps (and the
// final-state gradient). Gates are recomputed from c_prev, so only c needs to be stored.
template <typename T>
SRU_HD SruStepGrads<T> sru_step_backward(const SruStepInput<T>& in, T c_prev, T c, T grad_h, T grad_c,
                                        bool use_tanh, bool has_skip) {
  const T f = sru_sigmoid(in.u1 + in.vf * c_prev + in.bf);
  const T r = sru_sigmoid(in.u2 + in.vr * c_prev + in.br);
  const T g = sru_activation(c, use_tanh);
  const T dg = use_tanh ? T(1) - g * g : T(1);
  const T gc = grad_c + grad_h * in.mask * r * dg;               // total dL/dc
  const T gr = grad_h * in.mask * (has_skip ? g - in.x_skip : g);  // dL/dr
  const T gr_pre = gr * r * (T(1) - r);
  const T gf_pre = gc * (c_prev - in.u0) * f * (T(1) - f);
  SruStepGrads<T> out;
  out.u0 = gc * (T(1) - f);
  out.u1 = gf_pre;
  out.u2 = gr_pre;
  out.x_skip = has_skip ? grad_h * (T(1) - in.mask * r) : T(0);
  out.vf = gf_pre * c_prev;
  out.vr = gr_pre * c_prev;
  out.c_prev = gc * f + gf_pre * in.vf + gr_pre * in.vr;
  return out;
}

}  // namespace sru
