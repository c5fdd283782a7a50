// The 16-bit floating types of tensor storage (DType::BF16, DType::F16): conversion of single values
// to and from float32, the same code on the host and in CUDA kernels, and the value types `bf16` and
// `f16` that hold the bits (what data<bf16>() points to; arithmetic goes through float).
//
// bfloat16 is float32's top 16 bits (sign, 8 exponent bits, 7 mantissa bits), so
//   to float:   bits << 16 (exact);
//   from float: round to nearest, ties to even, on the 16 bits dropped (what CUDA's
//               __float2bfloat16_rn and PyTorch's c10::BFloat16 do): add 0x7FFF plus the kept part's
//               lowest bit, then truncate. Values past the largest bfloat16 round to +-infinity,
//               subnormals round like any other bits, infinities stay. NaN becomes 0x7FFF with the
//               sign dropped, the canonical NaN of the GPU's cvt.rn.bf16.f32 (PyTorch's CPU writes
//               0x7FC0; both are NaN, which is all a reader may rely on).
// Unit roundoff of bfloat16: 2^-8 (8 significant bits with the implicit one).
//
// IEEE half (f16: sign, 5 exponent bits, 10 mantissa bits, bias 15, largest finite 65504):
//   to float:   exact (normal, subnormal, infinity; NaN stays NaN with its payload's top bits);
//   from float: round to nearest, ties to even, including into the subnormals (steps of 2^-24);
//               |x| >= 65520 (the tie above 65504) becomes infinity; NaN becomes 0x7E00 with its sign
//               (PyTorch's c10::Half does the same). Unit roundoff 2^-11.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/hd.h"

namespace sru {

// The bits of a value as another type of the same size (memcpy: defined behaviour, and a plain move
// on the host and in CUDA code alike).
template <typename To, typename From>
SRU_HD To same_bits_as(From v) {
  static_assert(sizeof(To) == sizeof(From), "same_bits_as: the sizes differ");
  To out;
  memcpy(&out, &v, sizeof out);
  return out;
}

SRU_HD uint32_t float_bits(float f) { return same_bits_as<uint32_t>(f); }
SRU_HD float float_from_bits(uint32_t u) { return same_bits_as<float>(u); }

SRU_HD uint16_t bf16_bits_from_float(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;  // NaN
  const uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

SRU_HD float float_from_bf16_bits(uint16_t b) { return float_from_bits(static_cast<uint32_t>(b) << 16); }

// The float32 nearest to f that bfloat16 can hold (f itself when it already is one).
SRU_HD float round_to_bf16(float f) { return float_from_bf16_bits(bf16_bits_from_float(f)); }

SRU_HD uint16_t f16_bits_from_float(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t x = u & 0x7FFFFFFFu;
  if (x > 0x7F800000u) return sign | 0x7E00u;  // NaN
  if (x >= 0x477FF000u) return sign | 0x7C00u;  // 65520 and up (infinity too): infinity
  if (x >= 0x38800000u) {                       // normal half: rebias the exponent, round 13 bits away
    const uint32_t r = x - 0x38000000u;
    return sign | static_cast<uint16_t>((r + 0x0FFFu + ((r >> 13) & 1u)) >> 13);
  }
  if (x <= 0x33000000u) return sign;  // up to 2^-25 (the tie with the smallest subnormal): zero
  // Subnormal half: the value in units of 2^-24, rounded to nearest even. x >= 2^-25 here, so the
  // exponent field e is at least 102 and the shift 126 - e at most 24.
  const uint32_t e = x >> 23, m = (x & 0x7FFFFFu) | 0x800000u, shift = 126u - e;
  uint32_t r = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (r & 1u))) ++r;
  return sign | static_cast<uint16_t>(r);
}

SRU_HD float float_from_f16_bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1Fu) return float_from_bits(sign | 0x7F800000u | (m << 13));  // infinity or NaN
  if (e != 0) return float_from_bits(sign | ((e + 112u) << 23) | (m << 13));
  // Zero or subnormal: m 2^-24, exact in float.
  const float magnitude = static_cast<float>(m) * 5.9604644775390625e-8f;
  return sign ? -magnitude : magnitude;
}

// Storage types: the bits of one value, converted through float. Constructible from any number
// (double and the integers go through float first, as PyTorch's BFloat16/Half do), convertible to
// float implicitly, so generic copy and conversion code (static_cast<T>(v)) works for them; kernels
// that do arithmetic are instantiated for float/double only (SRU_DISPATCH_FLOATING). Format: a struct
// with the two conversions, encode(float) -> bits and decode(bits) -> float.
template <typename Format>
struct Float16Storage {
  uint16_t bits = 0;
  Float16Storage() = default;
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U, float>>>
  SRU_HD explicit Float16Storage(U v) : bits(Format::encode(static_cast<float>(v))) {}
  SRU_HD operator float() const { return Format::decode(bits); }
};

struct Bf16Format {
  static SRU_HD uint16_t encode(float f) { return bf16_bits_from_float(f); }
  static SRU_HD float decode(uint16_t b) { return float_from_bf16_bits(b); }
};
struct F16Format {
  static SRU_HD uint16_t encode(float f) { return f16_bits_from_float(f); }
  static SRU_HD float decode(uint16_t b) { return float_from_f16_bits(b); }
};
using bf16 = Float16Storage<Bf16Format>;
using f16 = Float16Storage<F16Format>;
static_assert(sizeof(bf16) == 2 && sizeof(f16) == 2, "16-bit storage types must be 2 bytes");

}  // namespace sru
