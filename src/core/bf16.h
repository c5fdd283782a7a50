// bfloat16 <-> float32 conversion of single values, the same code on the host and in CUDA kernels'
// CPU twins. bfloat16 is float32's top 16 bits (sign, 8 exponent bits, 7 mantissa bits), so
//   to float:   bits << 16 (exact);
//   from float: round to nearest, ties to even, on the 16 bits dropped (what CUDA's
//               __float2bfloat16_rn and PyTorch's c10::BFloat16 do): add 0x7FFF plus the kept part's
//               lowest bit, then truncate. Values past the largest bfloat16 round to +-infinity,
//               subnormals round like any other bits, infinities stay. NaN becomes 0x7FFF with the
//               sign dropped, the canonical NaN of the GPU's cvt.rn.bf16.f32 (PyTorch's CPU writes
//               0x7FC0; both are NaN, which is all a reader may rely on).
// Unit roundoff of bfloat16: 2^-8 (8 significant bits with the implicit one).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/hd.h"

namespace sru {

SRU_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

SRU_HD float float_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

SRU_HD uint16_t bf16_bits_from_float(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;  // NaN
  const uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

SRU_HD float float_from_bf16_bits(uint16_t b) { return float_from_bits(static_cast<uint32_t>(b) << 16); }

// The float32 nearest to f that bfloat16 can hold (f itself when it already is one).
SRU_HD float round_to_bf16(float f) { return float_from_bf16_bits(bf16_bits_from_float(f)); }

}  // namespace sru
