// Autograd wrapper of the Embed-SRU / Super-Embed-SRU recurrence: argument checks, outputs, saved
// state, backward.
#include "ops/embed_sru_recurrence.h"

#include "autograd/node.h"
#include "ops/dispatch.h"

namespace sru {

namespace {

void check_args(const EmbedSruTensors& in) {
  const char* op = "embed_sru_recurrence";
  SRU_CHECK(in.u.defined() && in.f.defined() && in.r.defined() && in.x.defined(), op, ": u, f, r and x are required");
  check_floating(in.u, op);
  SRU_CHECK(in.u.dim() == 3, op, ": u must be (L, B, d), got ", shape_str(in.u.shape()));
  const int64_t L = in.u.size(0), B = in.u.size(1), d = in.u.size(2);
  auto expect = [&](const Tensor& t, const Shape& shape, const char* name, bool same_dtype) {
    if (!t.defined()) return;
    SRU_CHECK(t.shape() == shape, op, ": ", name, " must be ", shape_str(shape), " like u, got ", shape_str(t.shape()));
    if (same_dtype) check_same_dtype(in.u, t, op);
    check_same_device(in.u, t, op);
  };
  expect(in.f, {L, B, d}, "f", true);
  expect(in.r, {L, B, d}, "r", true);
  expect(in.x, {L, B, d}, "x", true);
  expect(in.c0, {B, d}, "c0", true);
  expect(in.mask_c, {B, d}, "mask_c", true);
  expect(in.mask_pad, {L, B}, "mask_pad", false);
}

}  // namespace

std::pair<Tensor, Tensor> embed_sru_recurrence(const Tensor& u, const Tensor& f, const Tensor& r, const Tensor& x,
                                               const Tensor& c0, const Tensor& mask_c, const Tensor& mask_pad,
                                               const EmbedSruRecurrenceOptions& o) {
  const EmbedSruTensors in{u, f, r, x, c0, mask_c, mask_pad};
  check_args(in);
  const Shape& shape = u.shape();
  Tensor h = Tensor::empty(shape, u.dtype(), u.device());
  Tensor c_all = Tensor::empty(shape, u.dtype(), u.device());
  Tensor c_last = Tensor::empty({shape[1], shape[2]}, u.dtype(), u.device());
  SRU_KERNEL(h.device(), embed_sru_recurrence_forward, in, o, h, c_all, c_last);

  if (autograd::needs_grad({u, f, r, x, c0})) {
    auto saved = [](const Tensor& t) { return t.defined() ? t.detach() : Tensor(); };
    const EmbedSruTensors kept{saved(u), saved(f), saved(r), saved(x), saved(c0), saved(mask_c), saved(mask_pad)};
    const bool need_c0 = c0.defined() && c0.requires_grad();
    autograd::record("EmbedSruRecurrenceBackward", {u, f, r, x, c0}, {h, c_last}, [=](const std::vector<Tensor>& g) {
      auto like = [](const Tensor& t) { return Tensor::empty(t.shape(), t.dtype(), t.device()); };
      Tensor gu = like(kept.u), gf = like(kept.u), gr = like(kept.u), gx = like(kept.u);
      Tensor gc0 = need_c0 ? like(kept.c0) : Tensor();
      SRU_KERNEL(gu.device(), embed_sru_recurrence_backward, kept, o, c_all, g[0], g[1], gu, gf, gr, gx, gc0);
      return std::vector<Tensor>{gu, gf, gr, gx, gc0};
    }, {/* c_last: the kernels read an undefined gradient as zero */ 1});
  }
  return {h, c_last};
}

}  // namespace sru
