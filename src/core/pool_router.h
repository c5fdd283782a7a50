// A device's memory as block pools (core/block_pool.h): one shared pool, and private pools that CUDA
// graph captures allocate from. A captured graph replays its kernels into the addresses they had while
// it was captured, so while the graph lives no block it used (allocated during the capture, even if
// freed again before the capture ended) may be handed to other work, and no segment of its pool may go
// back to the driver. PyTorch's caching allocator keeps a private pool per graph for the same reason.
//   - create_private() makes an empty pool; set_active(id) routes the allocations of the thread's
//     device to it (id kShared: the shared pool) until set otherwise;
//   - a released block goes back to the pool that handed it out, whichever pool is active;
//   - retire(id) (the graph is destroyed): the pool's segments go back to the source once none of its
//     blocks is in use and no capture runs (at once, at the release of its last block, or when the
//     running capture ends);
//   - a private pool that finds no memory reports out of memory: it returns none of its own segments
//     (the graph may replay into them), and the shared pool's cached segments cannot be returned to
//     the driver while a capture runs (cudaFree synchronises the device); call empty_cache before a
//     capture that needs them.
// Plain C++ over RawMemory, tested without a GPU (tests/unit/test_block_pool.cpp). Not thread-safe: the
// caller locks.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "core/block_pool.h"

namespace sru {

class PoolRouter {
 public:
  using PoolId = int;
  static constexpr PoolId kShared = 0;

  PoolRouter(RawMemory& source, std::string name);
  ~PoolRouter();
  PoolRouter(const PoolRouter&) = delete;
  PoolRouter& operator=(const PoolRouter&) = delete;

  PoolId create_private();
  // Where allocate() takes blocks from; throws for a pool that was never created or is retired.
  void set_active(PoolId id);
  PoolId active() const { return active_; }
  void retire(PoolId id);
  // Private pools alive (created, and not yet retired with all their blocks freed).
  size_t private_pools() const { return private_.size(); }

  void* allocate(size_t nbytes, size_t* granted);
  void release(void* ptr);
  // The shared pool's free segments back to the source (private pools keep theirs).
  void empty_cache();
  // Totals over every pool; peaks are the totals' high-water marks.
  AllocatorStats stats() const;
  void reset_peak();
  void set_fill(std::function<void(void*, size_t)> fill);

 private:
  struct Private {
    std::unique_ptr<BlockPool> pool;
    bool retired = false;
  };

  BlockPool& pool(PoolId id);
  void drop_if_done(PoolId id);
  void note_peaks();

  RawMemory& source_;
  std::string name_;
  BlockPool shared_;
  std::map<PoolId, Private> private_;
  PoolId active_ = kShared, next_id_ = 1;
  std::function<void(void*, size_t)> fill_;
  size_t peak_allocated_ = 0, peak_reserved_ = 0;
  // What retired pools had counted, kept in the totals (system_allocations only grows).
  size_t retired_system_allocations_ = 0;
};

}  // namespace sru
