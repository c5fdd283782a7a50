// Philox words for element ranges (core/philox_fill.h): blocks eight at a time in vectorisable lanes.
#include "core/philox_fill.h"

#include <algorithm>

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
  uint32_t words[4][kLanes];
  for (; i + group <= end; i += group) {
    philox_lanes(offset + static_cast<uint64_t>(i) / 4, seed, words);
    for (int64_t e = 0; e < group; ++e) out[i - begin + e] = words[e % 4][e / 4];
  }
  scalar_until(end);
}

}  // namespace sru::philox
