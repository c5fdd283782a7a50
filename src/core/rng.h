// Random number generator state: a seed and a running Philox counter offset. Each draw reserves a
// block range, so results depend only on the seed and the sequence of draws, never on threads.
// In data-parallel training a generator may also carry a batch shard: this process computes rows
// [first, first + count) of a batch of `rows`, and dropout masks draw exactly those rows' numbers of
// the whole batch's mask (ops/dropout.h), so every rank advances the generator as one process would.
#pragma once

#include <cstdint>

#include "core/hd.h"

namespace sru {

// A draw's first Philox counter block as a kernel reads it: `offset`, plus the value at `base` when set.
// A CUDA graph replays a training step's kernels with the arguments they were captured with, so there
// the step's first block is read from device memory the host writes before each replay and each
// draw's offset within the step is the captured constant (PyTorch's philox_cuda_state); elsewhere base
// is null and offset is the whole counter. value() dereferences base: call it where base points (a
// device pointer in a CUDA kernel).
struct PhiloxOffset {
  uint64_t offset = 0;
  const uint64_t* base = nullptr;
  SRU_HD uint64_t value() const { return base ? *base + offset : offset; }
};

struct BatchShard {
  int64_t rows = 0;   // the whole batch; 0 = no shard (this process computes every row)
  int64_t first = 0;  // this process's rows
  int64_t count = 0;
  bool active() const { return rows > 0; }
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 0x5EED5EEDull) : seed_(seed) {}

  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed; offset_ = offset; }
  void manual_seed(uint64_t seed) { set_state(seed, 0); }
  const BatchShard& batch_shard() const { return shard_; }
  void set_batch_shard(const BatchShard& shard) { shard_ = shard; }

  // Reserves counter blocks for n 32-bit words and returns the first block's offset.
  uint64_t reserve(uint64_t n_words) {
    const uint64_t start = offset_;
    offset_ += (n_words + 3) / 4;
    return start;
  }
  // reserve() as a kernel argument: relative to the base while one is set (set_offset_base), else the
  // whole offset. The counter advances the same either way, so the numbers drawn are the same when
  // *base holds the counter's value at set_offset_base.
  PhiloxOffset draw(uint64_t n_words) {
    const uint64_t start = reserve(n_words);
    return base_ ? PhiloxOffset{start - base_start_, base_} : PhiloxOffset{start, nullptr};
  }
  // From here on draw() hands out offsets relative to the counter's current value, read at `base` (a
  // captured step's draws: core/cuda/graph.h); null: whole offsets again. While it is set, every
  // kernel a draw goes to must run where base points (the captured device).
  void set_offset_base(const uint64_t* base) {
    base_ = base;
    base_start_ = offset_;
  }
  const uint64_t* offset_base() const { return base_; }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
  BatchShard shard_;
  const uint64_t* base_ = nullptr;
  uint64_t base_start_ = 0;
};

// Sets a generator's batch shard for its scope (a data-parallel training forward pass).
class BatchShardScope {
 public:
  BatchShardScope(Generator& gen, const BatchShard& shard) : gen_(gen), previous_(gen.batch_shard()) {
    gen.set_batch_shard(shard);
  }
  ~BatchShardScope() { gen_.set_batch_shard(previous_); }
  BatchShardScope(const BatchShardScope&) = delete;
  BatchShardScope& operator=(const BatchShardScope&) = delete;

 private:
  Generator& gen_;
  BatchShard previous_;
};

// The process-wide generator used when an op is not given one.
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace sru
