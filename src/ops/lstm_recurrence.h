// The fused LSTM recurrence of one layer and one direction, forward and backward: per time step one
// GEMM for the four gates (h_{t-1} W_hh^T) and one fused gate kernel, with every buffer allocated once
// per call. Math per element: ops/lstm_math.h. The input projection x W_ih^T of all steps is one GEMM
// the caller makes (nn::LSTM), so the op starts from it.
//
// Shapes (L = length, B = batch, H = hidden size; gate blocks in PyTorch's order i, f, g, o):
//   gates_x   (L, B, 4H)  x_t W_ih^T for every step
//   weight_hh (4H, H)     PyTorch's weight_hh_l{k}
//   bias      (4H)        b_ih + b_hh (undefined = none)
//   h0, c0    (B, H)      initial state (undefined = zeros)
//   mask_pad  (L, B)      any dtype, nonzero = padded step: (h, c) carry over, the output is 0, no
//                         gradient flows there; the padding may sit anywhere
//   reverse               walk time from t = L-1 down to 0 (the backward direction)
//   hidden                LstmHidden::Bf16Values (float32 only): every h_t is rounded to the nearest
//                         bfloat16 value (kept in float32) before it is output and fed to the next
//                         step's GEMM, as cuDNN's LSTM at CUDNN_DATA_BFLOAT16 does, whose tensor-core
//                         GEMMs read bf16 h; c and the math stay float32. The CPU twin of nn::LSTM at
//                         train.precision bf16 (nn/lstm.h). Backward passes gradients straight through
//                         the rounding (as the derivative of a cast).
// Returns output (L, B, H) and the last state h, c (B, H) (after t = L-1, or t = 0 when reverse).
//
// Saved for backward: the gates after their nonlinearities (L, B, 4H) and the states h and c
// (L+1, B, H each: the initial state and the state after every step, in time order). Backward walks
// time in reverse: per step the fused kernel turns dL/dh, dL/dc into the pre-activation gradients
// dG_t (B, 4H), and one GEMM sends dG_t W_hh back to h_{t-1}. After the loop, d weight_hh = dG^T
// [h_{t-1}] is one GEMM over all steps and d bias the column sums of dG (ops matmul and sum:
// deterministic on both devices); d gates_x is dG itself. Gradient buffers are fully overwritten.
#pragma once

#include "core/tensor.h"
#include "ops/kernels.h"

namespace sru {

struct LstmRecurrenceResult {
  Tensor output;  // (L, B, H)
  Tensor h, c;    // (B, H): the state after the last step processed
};

// How h_t is stored between steps: exactly, or rounded to bfloat16 values (see above).
enum class LstmHidden { Exact, Bf16Values };

LstmRecurrenceResult lstm_recurrence(const Tensor& gates_x, const Tensor& weight_hh, const Tensor& bias,
                                     const Tensor& h0, const Tensor& c0, const Tensor& mask_pad, bool reverse,
                                     LstmHidden hidden = LstmHidden::Exact);
// The same over PyTorch's two biases, bias = bias_ih + bias_hh (each (4H)): the op adds them (as the add
// op would) and gives each the column sums of dG, written into its flat gradient slot where it has one
// (autograd::gradient_destination: one sum and one copy, where an add's backward would hand one buffer
// to both and the slots would need two copies).
LstmRecurrenceResult lstm_recurrence(const Tensor& gates_x, const Tensor& weight_hh, const Tensor& bias_ih,
                                     const Tensor& bias_hh, const Tensor& h0, const Tensor& c0, const Tensor& mask_pad,
                                     bool reverse, LstmHidden hidden = LstmHidden::Exact);

struct LstmTensors {
  Tensor gates_x, weight_hh, bias, h0, c0;
  Tensor padded;  // mask_pad converted to gates_x's dtype (nonzero = padded), or undefined
  bool reverse = false;
  LstmHidden hidden = LstmHidden::Exact;
};

// The kernels' operands as SRU_KERNEL's device check sees them (ops/dispatch.h).
template <typename F>
void visit_tensors(const LstmTensors& t, F&& f) {
  for (const Tensor* p : {&t.gates_x, &t.weight_hh, &t.bias, &t.h0, &t.c0, &t.padded}) f(*p);
}

// Where the state before and after step t sits in the (L+1, B, H) state buffers: time order with the
// initial state first (forward) or last (reverse), so the states h_{t-1} of all steps are L
// consecutive slots (one GEMM operand for d weight_hh).
struct LstmStateSlots {
  int64_t L;
  bool reverse;
  int64_t initial() const { return reverse ? L : 0; }
  int64_t before(int64_t t) const { return reverse ? t + 1 : t; }
  int64_t after(int64_t t) const { return reverse ? t : t + 1; }
  int64_t first_previous() const { return reverse ? 1 : 0; }  // slot of h_{t-1} for t = 0
};

// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/lstm_recurrence.cu) have the same contracts, tensors on one
// CUDA device.
SRU_DECLARE_KERNELS(

// Writes output (L, B, H), gates (L, B, 4H: i f g o after the nonlinearities; 0 at padded steps) and
// h_states, c_states (L+1, B, H; slots as LstmStateSlots).
void lstm_recurrence_forward(const LstmTensors& in, const Tensor& output, const Tensor& gates, const Tensor& h_states,
                             const Tensor& c_states);
// grad_output (L, B, H), grad_h_last, grad_c_last (B, H): incoming gradients, each may be undefined
// (zero). Overwrites grad_gates (L, B, 4H: dL/d pre-activations, 0 at padded steps) and grad_h0,
// grad_c0 (B, H; used as the running state gradients, so always required).
void lstm_recurrence_backward(const LstmTensors& in, const Tensor& gates, const Tensor& c_states,
                              const Tensor& grad_output, const Tensor& grad_h_last, const Tensor& grad_c_last,
                              const Tensor& grad_gates, const Tensor& grad_h0, const Tensor& grad_c0);

)

}  // namespace sru
