// Philox4x32-10 counter-based random numbers (Salmon et al., SC'11), shared by the CPU and CUDA paths.
// A random value is a pure function of (seed, counter): element i of a draw that starts at `offset`
// uses counter block offset + i/4 and word i%4, so the CPU and the GPU produce identical dropout masks
// for the same seed whatever their thread layout.
#pragma once

#include <cstdint>

#include "core/hd.h"

namespace sru::philox {

struct U32x4 {
  uint32_t v[4];
};

SRU_HD void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
}

// Ten rounds of Philox4x32 on counter (c0..c3) with key (k0, k1).
SRU_HD U32x4 philox4x32_10(uint64_t counter, uint64_t stream, uint64_t seed) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = static_cast<uint32_t>(stream), c3 = static_cast<uint32_t>(stream >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, c0, hi0, lo0);
    mulhilo(0xCD9E8D57u, c2, hi1, lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// The 32-bit word for element `index` of a draw starting at counter block `offset`. (Selected, not
// indexed: a run-time index into the block's array puts it in local memory on a GPU.)
SRU_HD uint32_t random_u32(uint64_t seed, uint64_t offset, uint64_t index, uint64_t stream = 0) {
  const auto block = philox4x32_10(offset + index / 4, stream, seed);
  const uint64_t word = index % 4;
  return word == 0 ? block.v[0] : word == 1 ? block.v[1] : word == 2 ? block.v[2] : block.v[3];
}

// Uniform in [0, 1) with 24 random bits (exact in float).
SRU_HD float u32_to_unit_float(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }

// Number of counter blocks a draw of n words consumes.
SRU_HD uint64_t blocks_for(uint64_t n) { return (n + 3) / 4; }

}  // namespace sru::philox
