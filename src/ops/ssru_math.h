// One time step of the simplified SRU (SSRU) of Marian's decoder (Kim et al. 2019, "From Research to
// Production and Back: Ludicrously Fast Neural Machine Translation") for one column (batch b, unit j),
// and its backward step, as SRU_HD functions: the CPU kernel and the CUDA kernel run this same code.
//
//   f = sigmoid(u_f + b_f)    (u_f = W_f x, b_f the forget bias)
//   c = f c_prev + (1 - f) z  (z = W x)
//   h = relu(c)
// A padded step (mask_pad) keeps c = c_prev and outputs h = 0; the kernels handle it, not this file.
#pragma once

#include "core/hd.h"
#include "ops/sru_math.h"

namespace sru {

// Forward step: returns c and writes h.
template <typename T>
SRU_HD T ssru_step_forward(T z, T u_f, T b_f, T c_prev, T& h) {
  const T f = sru_sigmoid<T>(u_f + b_f);
  const T c = f * c_prev + (T(1) - f) * z;
  h = c > T(0) ? c : T(0);
  return c;
}

template <typename T>
struct SsruStepGrads {
  T z, u_f;  // d/dz, d/du_f (= d/db_f of this step)
  T c_prev;  // d/dc_prev
};

// Backward step. grad_h = dL/dh at this step, grad_c = dL/dc from later steps (and the final-state
// gradient); c is this step's stored state. relu'(0) = 0, as PyTorch's.
template <typename T>
SRU_HD SsruStepGrads<T> ssru_step_backward(T z, T u_f, T b_f, T c_prev, T c, T grad_h, T grad_c) {
  const T f = sru_sigmoid<T>(u_f + b_f);
  const T gc = grad_c + (c > T(0) ? grad_h : T(0));  // total dL/dc
  SsruStepGrads<T> out;
  out.z = gc * (T(1) - f);
  out.u_f = gc * (c_prev - z) * f * (T(1) - f);
  out.c_prev = gc * f;
  return out;
}

}  // namespace sru
