// The fused SRU elementwise recurrence (paper Algorithm 1), forward and backward, for one layer and
// both directions at once. Math per element: ops/sru_math.h.
//
// Shapes (L = length, B = batch, d = hidden per direction, D = 1 or 2 directions, out = D*d,
// k = 3 or 4 matrices per unit):
//   U        (L, B, out*k)  column ((dir*d + j)*k + m), m: 0 candidate, 1 forget, 2 reset, 3 skip
//   x        (L, B, out)    the residual input, read when k == 3 with the skip term (x' = scale_x * x)
//   weight_c (2*out)        [vf dir0 | vf dir1 | vr dir0 | vr dir1];  bias (2*out) likewise [bf | br]
//   c0       (B, out)       initial state (undefined = zeros)
//   mask_c   (B, out)       dropout mask values (undefined = 1), fixed across time
//   mask_pad (L, B)         any dtype, nonzero = padded step: c carries over, h = 0, no gradient
// Returns h (L, B, out) and the last state c (B, out) (direction 1 runs from t = L-1 down to 0, so
// its last state is the one after t = 0).
// bfloat16 I/O (mixed precision): U and x may be bf16, with weight_c, bias, c0 and mask_c float32. Then
// h is bf16 (it feeds the next layer's GEMM), and so are the gradients of U and x (they feed GEMMs)
// and the incoming gradient of h; the state c (saved and last), every step's arithmetic and the
// gradients of weight_c, bias and c0 stay float32. Each bf16 output is its float32 value rounded to
// nearest even once. The CPU twin converts to float32, runs the float kernels and rounds the same
// outputs; the CUDA kernels read and write bf16 directly (36 bytes per (t, b, unit) instead of 64).
// Saved for backward: c at every step (L, B, out), plus the inputs. Backward walks time in reverse,
// recomputes the gates from the stored c, and accumulates grad weight_c / bias per (batch, column)
// before a fixed-order reduction over the batch (deterministic). Gradients are written into zeroed
// or fully overwritten buffers; nothing is accumulated across calls.
#pragma once

#include <utility>

#include "core/tensor.h"
#include "ops/dropout.h"
#include "ops/kernels.h"

namespace sru {

struct SruRecurrenceOptions {
  int64_t hidden_size = 0;  // d
  bool bidirectional = false;
  int k = 3;
  bool has_skip_term = true;
  bool use_tanh = false;
  double scale_x = 1.0;     // alpha, multiplies x when k == 3
  // When defined: a (1) tensor of the compute dtype (U's; float32 under bf16 I/O) on U's device (the
  // layer's scale_x buffer) whose value is used instead of scale_x, read by the kernel itself, so the
  // caller never reads it to the host.
  Tensor scale_x_tensor;
  // When on: the dropout mask on c (B, out), drawn by the kernels themselves from these Philox numbers
  // (ops/dropout.h MaskDraw: element b * out + j is the value dropout_mask would have written), instead
  // of a mask_c tensor filled before (one dispatch and a (B, out) buffer less per layer); mask_c must
  // then be undefined.
  MaskDraw mask_c_draw;
};

std::pair<Tensor, Tensor> sru_recurrence(const Tensor& U, const Tensor& x, const Tensor& weight_c, const Tensor& bias,
                                         const Tensor& c0, const Tensor& mask_c, const Tensor& mask_pad,
                                         const SruRecurrenceOptions& options);

struct SruTensors {
  Tensor U, x, weight_c, bias, c0, mask_c, mask_pad, scale_x;  // scale_x: options.scale_x_tensor
};

// The kernels' operands as SRU_KERNEL's device check sees them (ops/dispatch.h).
template <typename F>
void visit_tensors(const SruTensors& t, F&& f) {
  for (const Tensor* p : {&t.U, &t.x, &t.weight_c, &t.bias, &t.c0, &t.mask_c, &t.mask_pad, &t.scale_x}) f(*p);
}
template <typename F>
void visit_tensors(const SruRecurrenceOptions& o, F&& f) {
  f(o.scale_x_tensor);
}

// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/sru_recurrence.cu) have the same
// contracts, tensors on one CUDA device.
SRU_DECLARE_KERNELS(
// Writes h (L, B, out), c_all (L, B, out) and c_last (B, out).
void sru_recurrence_forward(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& h, const Tensor& c_all,
                            const Tensor& c_last);
// Overwrites every defined output gradient: grad_U (L, B, out*k), grad_x (L, B, out), grad_weight_c and
// grad_bias (2*out), grad_c0 (B, out). grad_h / grad_c_last are the incoming gradients.
void sru_recurrence_backward(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& c_all,
                             const Tensor& grad_h, const Tensor& grad_c_last, const Tensor& grad_U,
                             const Tensor& grad_x, const Tensor& grad_weight_c, const Tensor& grad_bias,
                             const Tensor& grad_c0);
)

// Whether the CUDA kernels with bf16 I/O may take two neighbouring columns a thread where they fit
// (ops/sru_recurrence_threads.h; on by default). `srubench --sru-column-pairs off` times the one-column
// kernels beside them in one process. Returns the previous setting.
bool set_sru_column_pairs(bool on);
bool sru_column_pairs();

namespace cpu {
// The CPU kernel builds, narrowest first; each gives the same results to the bit.
enum class SruKernelIsa { Baseline, Avx2, Avx512 };
// Which compiled kernel build runs: "avx512" or "avx2" (the widest the processor has) or "baseline".
// The fused LSTM recurrence's row kernels (ops/cpu/lstm_row_kernels.h) and the softmax family's and
// layer norm's row primitives (ops/cpu/row_exp.h) follow the same choice.
const char* sru_kernel_isa();
SruKernelIsa sru_kernel_isa_in_use();
// Runs no build wider than `widest` (parity tests, benchmarks); returns the previous limit.
SruKernelIsa limit_sru_kernel_isa(SruKernelIsa widest);
}  // namespace cpu

}  // namespace sru
