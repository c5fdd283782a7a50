// Philox words for a range of elements, computed a counter block at a time (each block's four words
// are used) and eight blocks at once in vectorisable lanes: the CPU's fast path to the values
// philox::random_u32 defines. Used by dropout masks and the random tensor initialisers.
#pragma once

#include <cstdint>

namespace sru::philox {

// out[k] = random_u32(seed, offset, begin + k) for k in [0, end - begin).
void fill_u32(uint64_t seed, uint64_t offset, int64_t begin, int64_t end, uint32_t* out);

// Calls fn(i, w) for every element i in [begin, end) in order, where element i owns the K words
// w[0..K) = random_u32(seed, offset, K*i + k); words are produced into a small stack buffer.
constexpr int64_t kFillChunk = 2048;
template <int K, typename F>
void for_each_element_words(uint64_t seed, uint64_t offset, int64_t begin, int64_t end, const F& fn) {
  static_assert(K >= 1 && kFillChunk % K == 0);
  uint32_t words[kFillChunk];
  for (int64_t lo = begin; lo < end; lo += kFillChunk / K) {
    const int64_t hi = end - lo < kFillChunk / K ? end : lo + kFillChunk / K;
    fill_u32(seed, offset, K * lo, K * hi, words);
    for (int64_t i = lo; i < hi; ++i) fn(i, words + K * (i - lo));
  }
}

}  // namespace sru::philox
