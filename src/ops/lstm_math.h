// One time step of the LSTM cell for one (batch row, unit) element, and its backward step, as SRU_HD
// functions: the CPU kernel and the CUDA kernel of the fused LSTM recurrence run this same code.
//
//   [a_i a_f a_g a_o] = x_t W_ih^T + (b_ih + b_hh) + h_{t-1} W_hh^T     (pre-activations, PyTorch order)
//   i = sigmoid(a_i)   f = sigmoid(a_f)   g = tanh(a_g)   o = sigmoid(a_o)
//   c = f c_{t-1} + i g          h = o tanh(c)
// A padded step (mask_pad) keeps (h, c) and outputs 0; it is handled by the kernels, not here.
//
// In float the sigmoid is the SRU's branch-free one (ops/sru_math.h: polynomial exp, relative error
// < 3e-7) and tanh(x) = 2 sigmoid(2x) - 1 (absolute error < 1e-6), so the unit loops vectorise; in
// double both are exact (std::exp, std::tanh), which the 1e-10 comparisons with the composed LSTM need.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/hd.h"
#include "ops/sru_math.h"

namespace sru {

template <typename T>
SRU_HD T lstm_tanh(T x) {
  if constexpr (std::is_same_v<T, float>) return 2.0f * sru_sigmoid(2.0f * x) - 1.0f;
  else return std::tanh(x);
}

// The four gates after their nonlinearities (also: the four pre-activation gradients).
template <typename T>
struct LstmGates {
  T i, f, g, o;
};

// Unit j's four values in a (4H) gate row, whose blocks are in PyTorch's order i, f, g, o.
template <typename T>
SRU_HD LstmGates<T> lstm_load(const T* row, int64_t H, int64_t j) {
  return {row[j], row[H + j], row[2 * H + j], row[3 * H + j]};
}

template <typename T>
SRU_HD void lstm_store(T* row, int64_t H, int64_t j, const LstmGates<T>& v) {
  row[j] = v.i;
  row[H + j] = v.f;
  row[2 * H + j] = v.g;
  row[3 * H + j] = v.o;
}

template <typename T>
SRU_HD LstmGates<T> lstm_gates(T a_i, T a_f, T a_g, T a_o) {
  return {sru_sigmoid(a_i), sru_sigmoid(a_f), lstm_tanh(a_g), sru_sigmoid(a_o)};
}

// Forward step: returns c and writes h.
template <typename T>
SRU_HD T lstm_step_forward(const LstmGates<T>& g, T c_prev, T& h) {
  const T c = g.f * c_prev + g.i * g.g;
  h = g.o * lstm_tanh(c);
  return c;
}

template <typename T>
struct LstmStepGrads {
  LstmGates<T> a;  // dL/d pre-activations (= d gates_x, d bias rows, and what d h_{t-1}, d W_hh come from)
  T c_prev;        // dL/d c_{t-1}
};

// Backward step from the stored gates, c_{t-1} and c. grad_h = dL/dh at this step (output gradient
// plus what the next step sends back through W_hh), grad_c = dL/dc from the next step.
template <typename T>
SRU_HD LstmStepGrads<T> lstm_step_backward(const LstmGates<T>& g, T c_prev, T c, T grad_h, T grad_c) {
  const T tc = lstm_tanh(c);
  const T gc = grad_c + grad_h * g.o * (T(1) - tc * tc);  // total dL/dc
  LstmStepGrads<T> out;
  out.a.i = gc * g.g * g.i * (T(1) - g.i);
  out.a.f = gc * c_prev * g.f * (T(1) - g.f);
  out.a.g = gc * g.i * (T(1) - g.g * g.g);
  out.a.o = grad_h * tc * g.o * (T(1) - g.o);
  out.c_prev = gc * g.f;
  return out;
}

}  // namespace sru
