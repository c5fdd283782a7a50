// Philox words for element ranges (core/philox_fill.h): blocks eight at a time in vectorisable lanes.
#include "core/philox_fill.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/philox.h"

namespace sru::philox {

namespace {

constexpr int kLanes = 8;  // counter blocks computed together: 32 words

// Philox4x32-10 (philox::philox4x32_10 with stream 0) of blocks first .. first + 7, written as
// independent lanes so that the compiler vectorises the rounds (AVX2: vpmuludq).
void philox_lanes(uint64_t first, uint64_t seed, uint32_t out[4][kLanes]) {
  uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    c0[l] = static_cast<uint32_t>(first + l);
    c1[l] = static_cast<uint32_t>((first + l) >> 32);
    c2[l] = c3[l] = 0;
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    for (int l = 0; l < kLanes; ++l) {
      const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0[l];
      const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2[l];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[l] ^ k0, n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[l] ^ k1;
      c1[l] = static_cast<uint32_t>(p1);
      c3[l] = static_cast<uint32_t>(p0);
      c0[l] = n0;
      c2[l] = n2;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int l = 0; l < kLanes; ++l) out[0][l] = c0[l], out[1][l] = c1[l], out[2][l] = c2[l], out[3][l] = c3[l];
}

#if defined(__x86_64__)
// The same eight blocks with AVX2 intrinsics, for processors that have it (chosen at run time): the
// portable lanes above vectorise poorly (GCC widens each 32-bit lane to 64 bits: 7 ns a word on an
// AVX2 EPYC, 2026-11-28). Each round's two mulhilo over eight 32-bit lanes is two vpmuludq (even and
// odd lanes), with the 64-bit products' halves blended back into lanes. Writes the 32 words in
// element order (block l's words 4l .. 4l + 3).
// hi and lo 32-bit halves of m * c for each of the eight 32-bit lanes.
__attribute__((target("avx2"), always_inline)) inline void mulhilo_avx2(__m256i m, __m256i c, __m256i& hi, __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(c, m);                         // lanes 0, 2, 4, 6: 64-bit products
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(c, 32), m);  // lanes 1, 3, 5, 7
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

__attribute__((target("avx2"))) void philox_lanes_avx2(uint64_t first, uint64_t seed, uint32_t* out) {
  alignas(32) uint32_t lo_words[kLanes], hi_words[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    lo_words[l] = static_cast<uint32_t>(first + l);
    hi_words[l] = static_cast<uint32_t>((first + l) >> 32);
  }
  __m256i c0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo_words));
  __m256i c1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi_words));
  __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u)), m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    __m256i hi0, lo0, hi1, lo1;
    mulhilo_avx2(m0, c0, hi0, lo0);
    mulhilo_avx2(m1, c2, hi1, lo1);
    const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
    const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // Interleave (c0 c1 c2 c3) of lanes 0..7 into block order: 4x4 transposes of 32-bit words per half.
  const __m256i a01 = _mm256_unpacklo_epi32(c0, c1), b01 = _mm256_unpackhi_epi32(c0, c1);  // c0 c1 pairs
  const __m256i a23 = _mm256_unpacklo_epi32(c2, c3), b23 = _mm256_unpackhi_epi32(c2, c3);
  const __m256i blk0 = _mm256_unpacklo_epi64(a01, a23), blk1 = _mm256_unpackhi_epi64(a01, a23);  // lanes 0,1 | 4,5
  const __m256i blk2 = _mm256_unpacklo_epi64(b01, b23), blk3 = _mm256_unpackhi_epi64(b01, b23);  // lanes 2,3 | 6,7
  __m256i* o = reinterpret_cast<__m256i*>(out);
  _mm256_storeu_si256(o + 0, _mm256_permute2x128_si256(blk0, blk1, 0x20));  // blocks 0, 1
  _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(blk2, blk3, 0x20));  // blocks 2, 3
  _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(blk0, blk1, 0x31));  // blocks 4, 5
  _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(blk2, blk3, 0x31));  // blocks 6, 7
}

bool have_avx2() {
  static const bool supported = __builtin_cpu_supports("avx2");
  return supported;
}
#endif

}  // namespace

void fill_u32(uint64_t seed, uint64_t offset, int64_t begin, int64_t end, uint32_t* out) {
  // Element i is word i % 4 of counter block offset + i / 4 (random_u32).
  int64_t i = begin;
  auto scalar_until = [&](int64_t stop) {
    while (i < stop) {
      const U32x4 block = philox4x32_10(offset + static_cast<uint64_t>(i) / 4, 0, seed);
      for (int64_t w = i % 4; w < 4 && i < stop; ++w, ++i) out[i - begin] = block.v[w];
    }
  };
  constexpr int64_t group = 4 * kLanes;
  scalar_until(std::min(end, (begin + group - 1) / group * group));
#if defined(__x86_64__)
  if (have_avx2()) {
    for (; i + group <= end; i += group) philox_lanes_avx2(offset + static_cast<uint64_t>(i) / 4, seed, out + (i - begin));
    scalar_until(end);
    return;
  }
#endif
  uint32_t words[4][kLanes];
  for (; i + group <= end; i += group) {
    philox_lanes(offset + static_cast<uint64_t>(i) / 4, seed, words);
    for (int64_t e = 0; e < group; ++e) out[i - begin + e] = words[e % 4][e / 4];
  }
  scalar_until(end);
}

}  // namespace sru::philox
