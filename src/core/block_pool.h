// The CUDA caching allocator's block logic, in plain C++ over an abstract source of raw memory, so that
// it is tested on machines without a GPU (tests/unit/test_block_pool.cpp, with a fake source).
//
// Memory comes from the source in segments and is handed out in blocks carved from them:
//   - every request is rounded up to a multiple of 512 B;
//   - requests up to 1 MiB come from 2 MiB segments (the small pool), larger ones from the large pool,
//     whose segments are 20 MiB for requests under 10 MiB and the request rounded up to 2 MiB above;
//   - a request takes the smallest free block of its pool that fits (best fit) and splits it when the
//     rest is worth keeping (at least 512 B in the small pool, more than 1 MiB in the large pool);
//   - a freed block merges with free neighbours of its segment, so segments do not fragment for good.
// Variable shapes (length-sorted batches, SQuAD) therefore reuse cached memory instead of caching one
// block per distinct size, and reserved memory levels off once the largest batch has been seen. The
// scheme is PyTorch's caching allocator's, without its streams: srutrain queues all work of a device on
// one stream, so a freed block may be handed out again at once — every later use is queued after every
// earlier one (docs/architecture.md, Memory).
//
// Out of memory: when the source has none left, the cached free segments are returned to it and the
// request retried once; after that the error names the request, the bytes in use and the peak. Any
// other failure of the source (a CUDA error left by an earlier kernel) passes through unchanged.
// Not thread-safe: the caller locks.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>

#include "core/allocator.h"

namespace sru {

class RawMemory {
 public:
  virtual ~RawMemory() = default;
  // nbytes of new memory, or nullptr when there is none left; other failures throw sru::Error.
  virtual void* allocate(size_t nbytes) = 0;
  virtual void release(void* ptr, size_t nbytes) = 0;
};

class BlockPool {
 public:
  static constexpr size_t kRound = 512;
  static constexpr size_t kSmallRequest = 1 << 20;     // up to this: small pool
  static constexpr size_t kSmallSegment = 2 << 20;
  static constexpr size_t kMediumRequest = 10 << 20;   // below this: 20 MiB segments
  static constexpr size_t kMediumSegment = 20 << 20;
  static constexpr size_t kLargeRound = 2 << 20;

  // `name` says where the memory is in error messages ("cuda:0").
  BlockPool(RawMemory& source, std::string name);
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // A block of at least nbytes (never null); *granted receives its size (counted as allocated).
  void* allocate(size_t nbytes, size_t* granted);
  void release(void* ptr);
  // Returns every segment that holds no allocated block to the source.
  void empty_cache();
  AllocatorStats stats() const { return stats_; }
  // Starts the peaks over from the current values (benchmarks measure one computation's peak).
  void reset_peak() {
    stats_.peak_allocated = stats_.allocated;
    stats_.peak_reserved = stats_.reserved;
  }
  // Called with (ptr, size) for every block handed out, new or reused (the NaN-fill debug mode).
  void set_fill(std::function<void(void*, size_t)> fill) { fill_ = std::move(fill); }
  // Keep every segment, free or not, until this is switched off again (a CUDA graph's private pool:
  // the graph replays into addresses of blocks freed during its capture, so no segment may go back
  // to the driver, by empty_cache or by the out-of-memory retry, while the graph lives).
  void set_keep_segments(bool keep) { keep_segments_ = keep; }
  // Whether ptr is a block this pool handed out and that is not yet released.
  bool holds(void* ptr) const { return allocated_.count(ptr) != 0; }

  static size_t round_request(size_t nbytes);
  static size_t segment_size_for(size_t rounded);

 private:
  struct Block;
  struct BySizeThenAddress {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeSet = std::set<Block*, BySizeThenAddress>;

  FreeSet& free_set(bool small) { return small ? free_small_ : free_large_; }
  Block* find_free(size_t size, bool small);
  Block* new_segment(size_t size, bool small);
  Block* split(Block* block, size_t size);
  static void absorb_next(Block* block);  // merges the block after `block` into it
  bool release_free_segments();

  RawMemory& source_;
  std::string name_;
  FreeSet free_small_, free_large_;
  std::unordered_map<void*, Block*> allocated_;
  std::map<void*, Block*> segments_;  // segment base -> its first block (for empty_cache)
  AllocatorStats stats_;
  std::function<void(void*, size_t)> fill_;
  bool keep_segments_ = false;
};

}  // namespace sru
