// Autograd wrapper of the fused SRU recurrence: argument checks, outputs, saved state, backward.
#include "ops/sru_recurrence.h"
#include "ops/dispatch.h"

#include "autograd/node.h"

#include <atomic>

namespace sru {

namespace {

std::atomic<bool> column_pairs_on{true};

void check_args(const Tensor& U, const Tensor& x, const Tensor& weight_c, const Tensor& bias, const Tensor& c0,
                const Tensor& mask_c, const Tensor& mask_pad, const SruRecurrenceOptions& o) {
  const Tensor& scale_x = o.scale_x_tensor;
  SRU_CHECK(o.k == 3 || o.k == 4, "sru_recurrence: k must be 3 or 4, got ", o.k);
  SRU_CHECK(o.hidden_size > 0, "sru_recurrence: hidden_size must be positive, got ", o.hidden_size);
  SRU_CHECK(U.dtype() == DType::F32 || U.dtype() == DType::F64 || U.dtype() == DType::BF16,
            "sru_recurrence: U must be f32, f64 or bf16, got ", dtype_name(U.dtype()));
  // With bf16 I/O, U and x are bf16 and the parameters and states float32 (sru_recurrence.h).
  const DType io = U.dtype(), compute = io == DType::BF16 ? DType::F32 : io;
  const int64_t out = (o.bidirectional ? 2 : 1) * o.hidden_size;
  SRU_CHECK(U.dim() == 3 && U.size(2) == out * o.k, "sru_recurrence: U must be (L, B, ", out * o.k, "), got ",
            shape_str(U.shape()));
  const int64_t L = U.size(0), B = U.size(1);
  auto expect = [&](const Tensor& t, const Shape& shape, const char* name) {
    if (!t.defined()) return;
    SRU_CHECK(t.shape() == shape, "sru_recurrence: ", name, " must be ", shape_str(shape), ", got ", shape_str(t.shape()));
    const std::string n = name;
    if (n != "mask_pad")
      SRU_CHECK(t.dtype() == (n == "x" ? io : compute), "sru_recurrence: ", name, " must be ",
                dtype_name(n == "x" ? io : compute), " with U of ", dtype_name(io), ", got ", dtype_name(t.dtype()));
    check_same_device(U, t, "sru_recurrence");
  };
  expect(weight_c, {2 * out}, "weight_c");
  expect(bias, {2 * out}, "bias");
  expect(c0, {B, out}, "c0");
  expect(mask_c, {B, out}, "mask_c");
  SRU_CHECK(!o.mask_c_draw.on || !mask_c.defined(), "sru_recurrence: both a mask_c tensor and a mask drawn in the kernel");
  expect(mask_pad, {L, B}, "mask_pad");
  expect(scale_x, {1}, "scale_x");
  SRU_CHECK(weight_c.defined() && bias.defined(), "sru_recurrence: weight_c and bias are required");
  if (o.has_skip_term && o.k == 3) {
    SRU_CHECK(x.defined(), "sru_recurrence: the skip term with k = 3 needs the input x");
    expect(x, {L, B, out}, "x");
  }
}

}  // namespace

bool set_sru_column_pairs(bool on) { return column_pairs_on.exchange(on); }
bool sru_column_pairs() { return column_pairs_on.load(); }

std::pair<Tensor, Tensor> sru_recurrence(const Tensor& U, const Tensor& x, const Tensor& weight_c, const Tensor& bias,
                                         const Tensor& c0, const Tensor& mask_c, const Tensor& mask_pad,
                                         const SruRecurrenceOptions& o) {
  check_args(U, x, weight_c, bias, c0, mask_c, mask_pad, o);
  // x only takes part when it feeds the skip term.
  const Tensor x_used = o.has_skip_term && o.k == 3 ? x : Tensor();
  const int64_t L = U.size(0), B = U.size(1), out = (o.bidirectional ? 2 : 1) * o.hidden_size;
  Tensor h = Tensor::empty({L, B, out}, U.dtype(), U.device());
  Tensor c_all = Tensor::empty({L, B, out}, weight_c.dtype(), U.device());  // the state: float32 under bf16 I/O
  Tensor c_last = Tensor::empty({B, out}, weight_c.dtype(), U.device());
  const SruTensors in{U, x_used, weight_c, bias, c0, mask_c, mask_pad, o.scale_x_tensor};
  SRU_KERNEL(h.device(), sru_recurrence_forward, in, o, h, c_all, c_last);

  if (autograd::needs_grad({U, x_used, weight_c, bias, c0})) {
    auto saved = [](const Tensor& t) { return t.defined() ? t.detach() : Tensor(); };
    const SruTensors kept{saved(U),  saved(x_used), saved(weight_c), saved(bias),
                          saved(c0), saved(mask_c), saved(mask_pad), saved(o.scale_x_tensor)};
    const bool need_x = x_used.defined() && x_used.requires_grad();
    const bool need_wc = weight_c.requires_grad(), need_b = bias.requires_grad();
    const bool need_c0 = c0.defined() && c0.requires_grad();
    autograd::record("SruRecurrenceBackward", {U, x_used, weight_c, bias, c0}, {h, c_last},
                     [=](const std::vector<Tensor>& g) {
                       SRU_CHECK(g[0].dtype() == kept.U.dtype(), "sru_recurrence backward: the gradient of h is ",
                                 dtype_name(g[0].dtype()), ", h is ", dtype_name(kept.U.dtype()));
                       Tensor gU = Tensor::empty(kept.U.shape(), kept.U.dtype(), kept.U.device());
                       Tensor gx = need_x ? Tensor::empty(kept.x.shape(), kept.x.dtype(), kept.x.device()) : Tensor();
                       // The kernels write every element of gw and gb: a parameter's flat slot serves.
                       Tensor gw = autograd::gradient_buffer(2, kept.weight_c.shape(), kept.weight_c.dtype(),
                                                             kept.weight_c.device());
                       Tensor gb = autograd::gradient_buffer(3, kept.bias.shape(), kept.bias.dtype(), kept.bias.device());
                       Tensor gc0 = need_c0 ? Tensor::empty(kept.c0.shape(), kept.c0.dtype(), kept.c0.device()) : Tensor();
                       SRU_KERNEL(gU.device(), sru_recurrence_backward, kept, o, c_all, g[0], g[1], gU, gx, gw, gb, gc0);
                       return std::vector<Tensor>{gU, gx, need_wc ? gw : Tensor(), need_b ? gb : Tensor(), gc0};
                     },
                     {/* c_last: the kernels read an undefined gradient as zero */ 1});
  }
  return {h, c_last};
}

}  // namespace sru
