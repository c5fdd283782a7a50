// Per-time-step helpers shared by the composed recurrences.
#include "nn/sequence.h"

#include "ops/shape_ops.h"

namespace sru::nn {

Tensor time_step(const Tensor& seq, int64_t t) { return reshape(slice(seq, 0, t, t + 1), {seq.size(1), seq.size(2)}); }

std::vector<uint8_t> padded_flags(const Tensor& mask_pad) {
  SRU_CHECK(mask_pad.dim() == 2, "mask_pad must be (L, B), got ", shape_str(mask_pad.shape()));
  const Tensor host = mask_pad.to(Device::cpu());
  std::vector<uint8_t> flags(host.numel());
  SRU_DISPATCH_ALL(host.dtype(), "mask_pad", [&]<typename M>() {
    const M* p = host.data<M>();
    for (size_t i = 0; i < flags.size(); ++i) flags[i] = p[i] != M(0);
  });
  return flags;
}

std::vector<Tensor> padding_masks(const Tensor& mask_pad, int64_t width, DType dtype) {
  std::vector<Tensor> masks;
  if (!mask_pad.defined()) return masks;
  const std::vector<uint8_t> flags = padded_flags(mask_pad);
  const int64_t L = mask_pad.size(0), B = mask_pad.size(1);
  for (int64_t t = 0; t < L; ++t) {
    Tensor m = Tensor::zeros({B, width}, dtype);
    for (int64_t b = 0; b < B; ++b)
      if (flags[t * B + b] != 0) m.narrow0(b, 1).fill_(1.0);
    masks.push_back(m.to(mask_pad.device()));  // made on the CPU: one copy instead of B fills
  }
  return masks;
}

}  // namespace sru::nn
