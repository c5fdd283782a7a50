// One time step of the Embed-SRU / Super-Embed-SRU recurrence for one column (batch b, unit j), and its
// backward step, as SRU_HD functions: the CPU kernel and the CUDA kernel run this same code.
// The gates f, r and the candidate u are given per step (looked up per word by the caller): no
// matrix product and no sigmoid, unlike the SRU (ops/sru_math.h, whose activation g this shares).
//
//   Embed-SRU:        c = f c_prev + (1 - f) u      h = m r g + (1 - m r) x
//   Super-Embed-SRU:  c = f c_prev + u              h = m r g + x
//   g = c, or tanh(c) with use_tanh;  m = the dropout mask value (1 when not training).
// Super-Embed's u and x are Embed's (1 - f) u and (1 - r) x, learned (or precomputed) per word. A
// padded step (mask_pad) keeps c = c_prev and outputs h = 0; the kernels handle it, not this file.
//
// Both forms compute c as f * c_prev + (term) and h as m r * g + (term), the SRU's own expression
// order, so a Super-Embed layer converted from a v1 SRU layer gives the SRU's values bit for bit
// where the compiler does not contract a * b + c into an FMA (the CPU builds here).
#pragma once

#include "core/hd.h"
#include "ops/sru_math.h"

namespace sru {

template <typename T>
struct EmbedSruStepInput {
  T u;     // candidate (Embed: x~; Super-Embed: (1 - f) x~)
  T f, r;  // forget and reset gates, used as they are
  T x;     // skip term (Embed: x; Super-Embed: (1 - r) x)
  T mask;  // dropout mask value m
};

// Forward step: returns c and writes h.
template <typename T, bool SUPER>
SRU_HD T embed_sru_step_forward(const EmbedSruStepInput<T>& in, T c_prev, bool use_tanh, T& h) {
  const T c = SUPER ? in.f * c_prev + in.u : in.f * c_prev + (T(1) - in.f) * in.u;
  const T g = sru_activation(c, use_tanh);
  const T mr = in.mask * in.r;
  h = SUPER ? mr * g + in.x : mr * g + (T(1) - mr) * in.x;
  return c;
}

template <typename T>
struct EmbedSruStepGrads {
  T u, f, r, x;  // d/d of each step input
  T c_prev;      // d/d c_prev
};

// Backward step. grad_h = dL/dh at this step, grad_c = dL/dc from later steps (and the final-state
// gradient); c is this step's stored state.
template <typename T, bool SUPER>
SRU_HD EmbedSruStepGrads<T> embed_sru_step_backward(const EmbedSruStepInput<T>& in, T c_prev, T c, T grad_h, T grad_c,
                                                   bool use_tanh) {
  const T g = sru_activation(c, use_tanh);
  const T dg = use_tanh ? T(1) - g * g : T(1);
  const T mr = in.mask * in.r;
  const T gc = grad_c + grad_h * mr * dg;  // total dL/dc
  EmbedSruStepGrads<T> out;
  out.r = grad_h * in.mask * (SUPER ? g : g - in.x);
  out.x = SUPER ? grad_h : grad_h * (T(1) - mr);
  out.f = gc * (SUPER ? c_prev : c_prev - in.u);
  out.u = SUPER ? gc : gc * (T(1) - in.f);
  out.c_prev = gc * in.f;
  return out;
}

}  // namespace sru
