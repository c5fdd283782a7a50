// Per-time-step SRU from basic ops (see sru_composed.h). Shapes as in ops/sru_recurrence.h.
#include "nn/sru_composed.h"

#include <vector>

#include "nn/sequence.h"
#include "ops/elementwise.h"
#include "ops/select.h"
#include "ops/shape_ops.h"

namespace sru::nn {

namespace {

// Block [dir*d, dir*d + d) of the last dim.
Tensor direction(const Tensor& t, int64_t dir, int64_t d) { return slice(t, t.dim() - 1, dir * d, dir * d + d); }

}  // namespace

std::pair<Tensor, Tensor> sru_recurrence_composed(const Tensor& U, const Tensor& x, const Tensor& weight_c,
                                                  const Tensor& bias, const Tensor& c0, const Tensor& mask_c,
                                                  const Tensor& mask_pad, const SruRecurrenceOptions& o) {
  const int64_t L = U.size(0), B = U.size(1), d = o.hidden_size, D = o.bidirectional ? 2 : 1, out = D * d, k = o.k;
  // U (L, B, out*k) -> one (L, B, out) tensor per block m.
  const Tensor U5 = reshape(U, {L, B, out, k});
  std::vector<Tensor> blocks;
  for (int64_t m = 0; m < k; ++m) blocks.push_back(reshape(slice(U5, 3, m, m + 1), {L, B, out}));
  const Tensor vf_all = slice(weight_c, 0, 0, out), vr_all = slice(weight_c, 0, out, 2 * out);
  const Tensor bf_all = slice(bias, 0, 0, out), br_all = slice(bias, 0, out, 2 * out);
  const bool skip_from_x = o.has_skip_term && k == 3;

  const std::vector<Tensor> pad_steps = padding_masks(mask_pad, d, U.dtype());

  std::vector<Tensor> h_dirs, c_dirs;
  for (int64_t dir = 0; dir < D; ++dir) {
    const Tensor vf = direction(vf_all, dir, d), vr = direction(vr_all, dir, d);
    const Tensor bf = direction(bf_all, dir, d), br = direction(br_all, dir, d);
    const Tensor u0 = direction(blocks[0], dir, d), u1 = direction(blocks[1], dir, d), u2 = direction(blocks[2], dir, d);
    Tensor skip;
    if (k == 4) skip = direction(blocks[3], dir, d);
    else if (skip_from_x) skip = direction(x, dir, d) * o.scale_x;
    const Tensor m = mask_c.defined() ? direction(mask_c, dir, d) : Tensor();
    Tensor c = c0.defined() ? direction(c0, dir, d) : Tensor::zeros({B, d}, U.dtype(), U.device());
    const std::vector<Tensor> u0_t = unbind(u0), u1_t = unbind(u1), u2_t = unbind(u2);
    const std::vector<Tensor> skip_t = skip.defined() ? unbind(skip) : std::vector<Tensor>();
    std::vector<Tensor> h_steps(L);
    for (int64_t s = 0; s < L; ++s) {
      const int64_t t = dir == 0 ? s : L - 1 - s;
      const Tensor f = sigmoid(u1_t[t] + vf * c + bf);
      const Tensor r = sigmoid(u2_t[t] + vr * c + br);
      Tensor c_new = f * c + (1.0 - f) * u0_t[t];
      const Tensor g = o.use_tanh ? tanh(c_new) : c_new;
      const Tensor mr = m.defined() ? m * r : r;
      Tensor h = mr * g;
      if (o.has_skip_term) h = h + (1.0 - mr) * skip_t[t];
      if (!pad_steps.empty()) {
        c_new = where(pad_steps[t], c, c_new);
        h = masked_fill(h, pad_steps[t], 0.0);
      }
      c = c_new;
      h_steps[t] = reshape(h, {1, B, d});
    }
    h_dirs.push_back(concat(h_steps, 0));
    c_dirs.push_back(c);
  }
  return {D == 1 ? h_dirs[0] : concat(h_dirs, 2), D == 1 ? c_dirs[0] : concat(c_dirs, 1)};
}

}  // namespace sru::nn
