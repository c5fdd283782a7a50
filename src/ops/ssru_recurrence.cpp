// Autograd wrapper of the SSRU recurrence (ops/ssru_recurrence.h): argument checks, outputs, saved
// state, backward.
#include "ops/ssru_recurrence.h"

#include "autograd/node.h"
#include "ops/dispatch.h"
#include "ops/reduce.h"

namespace sru {

namespace {

void check_args(const SsruTensors& in) {
  const char* op = "ssru_recurrence";
  SRU_CHECK(in.U.defined(), op, ": U is required");
  check_floating(in.U, op);
  SRU_CHECK(in.U.dim() == 3 && in.U.size(2) % 2 == 0, op, ": U must be (L, B, 2d) ([z | u_f]), got ",
            shape_str(in.U.shape()));
  const int64_t L = in.U.size(0), B = in.U.size(1), d = in.U.size(2) / 2;
  if (in.forget_bias.defined()) {
    SRU_CHECK((in.forget_bias.shape() == Shape{d}), op, ": forget_bias must be (", d, "), got ",
              shape_str(in.forget_bias.shape()));
    check_same_dtype(in.U, in.forget_bias, op);
    check_same_device(in.U, in.forget_bias, op);
  }
  if (in.c0.defined()) {
    SRU_CHECK((in.c0.shape() == Shape{B, d}), op, ": c0 must be (", B, ", ", d, "), got ", shape_str(in.c0.shape()));
    check_same_dtype(in.U, in.c0, op);
    check_same_device(in.U, in.c0, op);
  }
  if (in.mask_pad.defined()) {
    SRU_CHECK((in.mask_pad.shape() == Shape{L, B}), op, ": mask_pad must be (", L, ", ", B, "), got ",
              shape_str(in.mask_pad.shape()));
    check_same_device(in.U, in.mask_pad, op);
  }
}

}  // namespace

std::pair<Tensor, Tensor> ssru_recurrence(const Tensor& U, const Tensor& forget_bias, const Tensor& c0,
                                          const Tensor& mask_pad) {
  const SsruTensors in{U, forget_bias, c0, mask_pad};
  check_args(in);
  const int64_t L = U.size(0), B = U.size(1), d = U.size(2) / 2;
  Tensor h = Tensor::empty({L, B, d}, U.dtype(), U.device());
  Tensor c_all = Tensor::empty({L, B, d}, U.dtype(), U.device());
  Tensor c_last = Tensor::empty({B, d}, U.dtype(), U.device());
  SRU_KERNEL(h.device(), ssru_recurrence_forward, in, h, c_all, c_last);

  if (autograd::needs_grad({U, forget_bias, c0})) {
    auto saved = [](const Tensor& t) { return t.defined() ? t.detach() : Tensor(); };
    const SsruTensors kept{saved(U), saved(forget_bias), saved(c0), saved(mask_pad)};
    const bool need_c0 = c0.defined() && c0.requires_grad();
    const bool need_bias = forget_bias.defined() && forget_bias.requires_grad();
    autograd::record("SsruRecurrenceBackward", {U, forget_bias, c0}, {h, c_last}, [=](const std::vector<Tensor>& g) {
      Tensor gU = Tensor::empty(kept.U.shape(), kept.U.dtype(), kept.U.device());
      Tensor gc0 = need_c0 ? Tensor::empty(kept.c0.shape(), kept.c0.dtype(), kept.c0.device()) : Tensor();
      SRU_KERNEL(gU.device(), ssru_recurrence_backward, kept, c_all, g[0], g[1], gU, gc0);
      Tensor gb;
      if (need_bias) {  // sum over (t, b) of u_f's gradient: both halves' column sums, then the second row
        const int64_t d = kept.U.size(2) / 2;
        gb = d > 0 ? sum(gU.view({-1, 2, d}), 0).narrow0(1, 1).view({d})
                   : Tensor::zeros({0}, kept.U.dtype(), kept.U.device());
      }
      return std::vector<Tensor>{gU, gb, gc0};
    }, {/* c_last: the kernels read an undefined gradient as zero */ 1});
  }
  return {h, c_last};
}

}  // namespace sru
