// Random number generator state: a seed and a running Philox counter offset. Each draw reserves a
// block range, so results depend only on the seed and the sequence of draws, never on threads.
#pragma once

#include <cstdint>

namespace sru {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0x5EED5EEDull) : seed_(seed) {}

  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed; offset_ = offset; }
  void manual_seed(uint64_t seed) { set_state(seed, 0); }

  // Reserves counter blocks for n 32-bit words and returns the first block's offset.
  uint64_t reserve(uint64_t n_words) {
    const uint64_t start = offset_;
    offset_ += (n_words + 3) / 4;
    return start;
  }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The process-wide generator used when an op is not given one.
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace sru
