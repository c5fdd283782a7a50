// A padding mask (mask_pad, any dtype, nonzero = padded) as one byte per element, so the recurrence
// kernels (SRU, Embed-SRU) read one type; empty when there is no mask.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace sru::cpu {

inline std::vector<uint8_t> padding_bytes(const Tensor& mask_pad) {
  std::vector<uint8_t> pad;
  if (!mask_pad.defined()) return pad;
  SRU_DISPATCH_ALL(mask_pad.dtype(), "mask_pad", [&]<typename M>() {
    const M* p = mask_pad.data<M>();
    pad.resize(mask_pad.numel());
    for (size_t i = 0; i < pad.size(); ++i) pad[i] = p[i] != M(0);
  });
  return pad;
}

}  // namespace sru::cpu
