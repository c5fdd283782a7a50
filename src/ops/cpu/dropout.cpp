// CPU kernel filling a dropout mask from Philox (same function of (seed, offset, index) as on CUDA).
#include "core/parallel.h"
#include "core/philox.h"
#include "ops/dropout.h"

#include <algorithm>

namespace sru::cpu {

namespace {

constexpr int kLanes = 8;  // counter blocks computed together: 32 mask elements

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

void fill_dropout_mask(uint64_t seed, uint64_t offset, double p, const Tensor& mask) {
  SRU_DISPATCH_FLOATING(mask.dtype(), "dropout_mask", [&]<typename T>() {
    T* m = mask.data<T>();
    const T keep = static_cast<T>(1.0 / (1.0 - p));
    const float threshold = static_cast<float>(p);
    // Element i takes word i % 4 of counter block offset + i / 4 (philox::random_u32); blocks are
    // computed once for their four elements, eight blocks at a time where a chunk allows.
    parallel_for(0, mask.numel(), kParallelGrain, [&](int64_t lo, int64_t hi) {
      int64_t i = lo;
      auto scalar_until = [&](int64_t end) {
        while (i < end) {
          const philox::U32x4 block = philox::philox4x32_10(offset + static_cast<uint64_t>(i) / 4, 0, seed);
          for (int64_t w = i % 4; w < 4 && i < end; ++w, ++i)
            m[i] = philox::u32_to_unit_float(block.v[w]) >= threshold ? keep : T(0);
        }
      };
      constexpr int64_t group = 4 * kLanes;
      scalar_until(std::min(hi, (lo + group - 1) / group * group));
      uint32_t words[4][kLanes];
      for (; i + group <= hi; i += group) {
        philox_lanes(offset + static_cast<uint64_t>(i) / 4, seed, words);
        for (int64_t e = 0; e < group; ++e)
          m[i + e] = philox::u32_to_unit_float(words[e % 4][e / 4]) >= threshold ? keep : T(0);
      }
      scalar_until(hi);
    });
  });
}

}  // namespace sru::cpu
