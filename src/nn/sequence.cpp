// Per-time-step helpers shared by the composed recurrences.
#include "nn/sequence.h"

#include "ops/shape_ops.h"

namespace sru::nn {

Tensor time_step(const Tensor& seq, int64_t t) { return reshape(slice(seq, 0, t, t + 1), {seq.size(1), seq.size(2)}); }

std::vector<Tensor> padding_masks(const Tensor& mask_pad, int64_t width, DType dtype) {
  std::vector<Tensor> masks;
  if (!mask_pad.defined()) return masks;
  SRU_CHECK(mask_pad.dim() == 2, "mask_pad must be (L, B), got ", shape_str(mask_pad.shape()));
  const int64_t L = mask_pad.size(0), B = mask_pad.size(1);
  const auto flags = mask_pad.to_vector<double>();
  for (int64_t t = 0; t < L; ++t) {
    Tensor m = Tensor::zeros({B, width}, dtype);
    for (int64_t b = 0; b < B; ++b)
      if (flags[t * B + b] != 0) m.narrow0(b, 1).fill_(1.0);
    masks.push_back(m.to(mask_pad.device()));  // made on the CPU: one copy instead of B fills
  }
  return masks;
}

}  // namespace sru::nn
