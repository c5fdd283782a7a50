// Autograd wrapper of the fused LSTM recurrence: argument checks, outputs, saved state, backward
// (the kernels' time loops, then d weight_hh and d bias over all steps with the matmul and sum ops).
#include "ops/lstm_recurrence.h"

#include "autograd/node.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/shape_ops.h"

namespace sru {

namespace {

void check_args(const Tensor& gates_x, const Tensor& weight_hh, const Tensor& bias, const Tensor& h0, const Tensor& c0,
                const Tensor& mask_pad, LstmHidden hidden) {
  check_floating(gates_x, "lstm_recurrence");
  SRU_CHECK(hidden == LstmHidden::Exact || gates_x.dtype() == DType::F32,
            "lstm_recurrence: h rounded to bf16 values needs float32 tensors, got ", dtype_name(gates_x.dtype()));
  SRU_CHECK(gates_x.dim() == 3 && gates_x.size(2) % 4 == 0 && gates_x.size(2) > 0,
            "lstm_recurrence: gates_x must be (L, B, 4H), got ", shape_str(gates_x.shape()));
  const int64_t L = gates_x.size(0), B = gates_x.size(1), H = gates_x.size(2) / 4;
  SRU_CHECK(L > 0 && B > 0, "lstm_recurrence: empty sequence batch ", shape_str(gates_x.shape()));
  auto expect = [&](const Tensor& t, const Shape& shape, const char* name, bool same_dtype) {
    if (!t.defined()) return;
    SRU_CHECK(t.shape() == shape, "lstm_recurrence: ", name, " must be ", shape_str(shape), ", got ", shape_str(t.shape()));
    if (same_dtype) check_same_dtype(gates_x, t, "lstm_recurrence");
    check_same_device(gates_x, t, "lstm_recurrence");
  };
  SRU_CHECK(weight_hh.defined(), "lstm_recurrence: weight_hh is required");
  expect(weight_hh, {4 * H, H}, "weight_hh", true);
  expect(bias, {4 * H}, "bias", true);
  expect(h0, {B, H}, "h0", true);
  expect(c0, {B, H}, "c0", true);
  expect(mask_pad, {L, B}, "mask_pad", false);
  check_gemm_sizes(B, 4 * H, H, H, H, 4 * H, 1);
}

}  // namespace

LstmRecurrenceResult lstm_recurrence(const Tensor& gates_x, const Tensor& weight_hh, const Tensor& bias,
                                     const Tensor& h0, const Tensor& c0, const Tensor& mask_pad, bool reverse,
                                     LstmHidden hidden) {
  return lstm_recurrence(gates_x, weight_hh, bias, Tensor(), h0, c0, mask_pad, reverse, hidden);
}

LstmRecurrenceResult lstm_recurrence(const Tensor& gates_x, const Tensor& weight_hh, const Tensor& bias_ih,
                                     const Tensor& bias_hh, const Tensor& h0, const Tensor& c0, const Tensor& mask_pad,
                                     bool reverse, LstmHidden hidden) {
  SRU_CHECK(!bias_hh.defined() || bias_ih.defined(), "lstm_recurrence: bias_hh without bias_ih");
  if (bias_hh.defined()) check_args(gates_x, weight_hh, bias_hh, h0, c0, mask_pad, hidden);
  // The kernels take b_ih + b_hh (added as the add op would: the same values).
  Tensor bias = bias_ih;
  if (bias_hh.defined()) {
    autograd::NoGradGuard no_grad;
    bias = add(bias_ih, bias_hh);
  }
  check_args(gates_x, weight_hh, bias, h0, c0, mask_pad, hidden);
  const int64_t L = gates_x.size(0), B = gates_x.size(1), H = gates_x.size(2) / 4;
  const DType dtype = gates_x.dtype();
  const Device device = gates_x.device();
  const LstmTensors in{gates_x, weight_hh, bias, h0, c0, mask_pad.defined() ? mask_pad.to(dtype) : Tensor(), reverse,
                        hidden};
  Tensor output = Tensor::empty({L, B, H}, dtype, device);
  Tensor gates = Tensor::empty({L, B, 4 * H}, dtype, device);
  Tensor h_states = Tensor::empty({L + 1, B, H}, dtype, device);
  Tensor c_states = Tensor::empty({L + 1, B, H}, dtype, device);
  SRU_KERNEL(device, lstm_recurrence_forward, in, output, gates, h_states, c_states);

  const LstmStateSlots slots{L, reverse};
  const int64_t last = slots.after(reverse ? 0 : L - 1);
  // The last state is the final slot of the state buffers (views: no copy).
  LstmRecurrenceResult result{output, reshape(h_states.narrow0(last, 1), {B, H}),
                              reshape(c_states.narrow0(last, 1), {B, H})};

  if (autograd::needs_grad({gates_x, weight_hh, bias_ih, bias_hh, h0, c0})) {
    auto saved = [](const Tensor& t) { return t.defined() ? t.detach() : Tensor(); };
    const LstmTensors kept{saved(gates_x), saved(weight_hh), saved(bias), saved(h0), saved(c0), in.padded, reverse, hidden};
    const bool need_w = weight_hh.requires_grad(), need_b = bias_ih.defined() && bias_ih.requires_grad();
    const bool need_b_hh = bias_hh.defined() && bias_hh.requires_grad();
    const bool need_h0 = h0.defined() && h0.requires_grad(), need_c0 = c0.defined() && c0.requires_grad();
    // h_{t-1} of every step, in time order: L consecutive slots of the state buffer.
    const Tensor h_previous = h_states.narrow0(slots.first_previous(), L);
    autograd::record("LstmRecurrenceBackward", {gates_x, weight_hh, bias_ih, bias_hh, h0, c0},
                     {result.output, result.h, result.c}, [=](const std::vector<Tensor>& g) {
                       Tensor grad_gates = Tensor::empty({L, B, 4 * H}, dtype, device);
                       Tensor grad_h0 = Tensor::empty({B, H}, dtype, device);
                       Tensor grad_c0 = Tensor::empty({B, H}, dtype, device);
                       SRU_KERNEL(device, lstm_recurrence_backward, kept, gates, c_states, g[0], g[1], g[2],
                                  grad_gates, grad_h0, grad_c0);
                       const Tensor rows = grad_gates.view({L * B, 4 * H});
                       // Both biases get the column sums of dG: computed once (into b_ih's flat slot
                       // where it has one), copied into b_hh's slot, else shared as an add's backward
                       // shares it; never b_ih's slot handed to b_hh (the engine adds b_ih's other
                       // gradients into its slot in place).
                       const Tensor into = autograd::gradient_destination(need_b ? 2 : 3);
                       const Tensor grad_bias = need_b || need_b_hh ? sum_into(rows, 0, into) : Tensor();
                       Tensor grad_bias_hh;
                       if (need_b_hh && need_b) {
                         Tensor slot = autograd::gradient_destination(3);
                         const bool in_slot_of_ih = into.defined() && grad_bias.shares_storage(into);
                         if (slot.matches(grad_bias.shape(), grad_bias.dtype(), grad_bias.device()))
                           grad_bias_hh = slot.copy_(grad_bias);
                         else grad_bias_hh = in_slot_of_ih ? grad_bias.clone() : grad_bias;
                       } else if (need_b_hh) {
                         grad_bias_hh = grad_bias;
                       }
                       return std::vector<Tensor>{
                           grad_gates,
                           need_w ? matmul_into(rows, h_previous.view({L * B, H}), true, false,
                                                autograd::gradient_destination(1))
                                  : Tensor(),
                           need_b ? grad_bias : Tensor(), grad_bias_hh,
                           need_h0 ? grad_h0 : Tensor(),
                           need_c0 ? grad_c0 : Tensor()};
                     },
                     {/* output, h, c: the kernels read undefined gradients as zero */ 0, 1, 2});
  }
  return result;
}

}  // namespace sru
