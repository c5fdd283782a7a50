// The caching allocator's block logic (core/block_pool.h) on a fake memory source: size classes,
// splitting and coalescing, statistics, out of memory with retry, errors that are not out of memory,
// the fill hook, and an epoch of variable batch shapes whose reserved memory stays flat; and the
// routing between the shared pool and CUDA graphs' private pools (core/pool_router.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "core/block_pool.h"
#include "core/pool_router.h"
#include "testing.h"

using namespace sru;
using sru::testing::error_of;

namespace {

constexpr size_t MiB = 1 << 20;

// Hands out addresses from a fake address space (never dereferenced), with a capacity, and records calls.
class FakeMemory : public RawMemory {
 public:
  explicit FakeMemory(size_t capacity = SIZE_MAX) : capacity_(capacity) {}
  void* allocate(size_t n) override {
    if (fail_with_error_) SRU_FAIL("CUDA error in cudaMalloc: an illegal memory access was encountered");
    ++allocations;
    if (in_use_ + n > capacity_) return nullptr;
    in_use_ += n;
    void* p = reinterpret_cast<void*>(next_);
    next_ += n + 64 * MiB;  // segments are never adjacent
    live_[p] = n;
    return p;
  }
  void release(void* p, size_t n) override {
    ASSERT_EQ(live_.count(p), 1u);
    ASSERT_EQ(live_[p], n);
    live_.erase(p);
    in_use_ -= n;
    ++releases;
  }
  size_t in_use() const { return in_use_; }
  void fail_with_error() { fail_with_error_ = true; }
  int allocations = 0, releases = 0;

 private:
  size_t capacity_, in_use_ = 0;
  uintptr_t next_ = 1 << 30;
  std::map<void*, size_t> live_;
  bool fail_with_error_ = false;
};

char* at(void* p) { return static_cast<char*>(p); }

void* take(BlockPool& pool, size_t n) {
  size_t granted = 0;
  void* p = pool.allocate(n, &granted);
  EXPECT_GE(granted, n);
  return p;
}

}  // namespace

TEST(BlockPool, RoundsRequestsAndPicksSegmentSizes) {
  EXPECT_EQ(BlockPool::round_request(0), 512u);
  EXPECT_EQ(BlockPool::round_request(513), 1024u);
  EXPECT_EQ(BlockPool::segment_size_for(MiB), 2 * MiB);             // small pool
  EXPECT_EQ(BlockPool::segment_size_for(MiB + 512), 20 * MiB);      // under 10 MiB: 20 MiB segments
  EXPECT_EQ(BlockPool::segment_size_for(10 * MiB), 10 * MiB);       // from 10 MiB: rounded to 2 MiB
  EXPECT_EQ(BlockPool::segment_size_for(11 * MiB + 1), 12 * MiB);
}

TEST(BlockPool, SmallRequestsShareOneSegment) {
  FakeMemory mem;
  BlockPool pool(mem, "fake:0");
  std::vector<void*> blocks;
  for (int i = 0; i < 100; ++i) blocks.push_back(take(pool, 1000));  // 1024 B each
  EXPECT_EQ(mem.allocations, 1);
  EXPECT_EQ(pool.stats().segments, 1u);
  EXPECT_EQ(pool.stats().reserved, 2 * MiB);
  EXPECT_EQ(pool.stats().allocated, 100u * 1024);
  for (int i = 1; i < 100; ++i) EXPECT_EQ(at(blocks[i]) - at(blocks[i - 1]), 1024) << "carved in address order";
  for (void* p : blocks) pool.release(p);
  EXPECT_EQ(pool.stats().allocated, 0u);
  pool.empty_cache();
  EXPECT_EQ(pool.stats().reserved, 0u);
  EXPECT_EQ(mem.releases, 1);
}

TEST(BlockPool, SplitsAndCoalescesLargeBlocks) {
  FakeMemory mem;
  BlockPool pool(mem, "fake:0");
  void* a = take(pool, 3 * MiB);
  void* b = take(pool, 3 * MiB);
  void* c = take(pool, 3 * MiB);
  EXPECT_EQ(mem.allocations, 1) << "three 3 MiB blocks from one 20 MiB segment";
  EXPECT_EQ(at(b) - at(a), static_cast<ptrdiff_t>(3 * MiB));
  EXPECT_EQ(at(c) - at(b), static_cast<ptrdiff_t>(3 * MiB));
  // Free b, then a: they merge, so a 6 MiB request fits where a was without a new segment.
  pool.release(b);
  pool.release(a);
  void* d = take(pool, 6 * MiB);
  EXPECT_EQ(d, a);
  EXPECT_EQ(mem.allocations, 1);
  // A segment with a block in use is not released; once all is free it is one block again and goes.
  pool.empty_cache();
  EXPECT_EQ(pool.stats().reserved, 20 * MiB);
  pool.release(c);
  pool.release(d);
  void* whole = take(pool, 20 * MiB);
  EXPECT_EQ(whole, a) << "the freed segment merged back into one block";
  pool.release(whole);
  pool.empty_cache();
  EXPECT_EQ(pool.stats().reserved, 0u);
  EXPECT_EQ(mem.in_use(), 0u);
}

TEST(BlockPool, KeepsSmallRemaindersOfLargeBlocksInsideTheBlock) {
  FakeMemory mem;
  BlockPool pool(mem, "fake:0");
  size_t granted = 0;
  void* big = pool.allocate(19 * MiB + 512, &granted);  // the rest of the 20 MiB segment is under 1 MiB
  EXPECT_EQ(granted, 20 * MiB);
  pool.release(big);
  void* p = pool.allocate(2 * MiB, &granted);  // now the rest (18 MiB) is split off
  EXPECT_EQ(granted, 2 * MiB);
  EXPECT_EQ(p, big);
  EXPECT_EQ(pool.stats().allocated, 2 * MiB);
}

TEST(BlockPool, StatisticsTrackAllocatedReservedAndPeaks) {
  FakeMemory mem;
  BlockPool pool(mem, "fake:0");
  void* a = take(pool, 12 * MiB);  // own 12 MiB segment
  void* b = take(pool, 4 * MiB);   // a 20 MiB segment
  AllocatorStats s = pool.stats();
  EXPECT_EQ(s.allocated, 16 * MiB);
  EXPECT_EQ(s.reserved, 32 * MiB);
  EXPECT_EQ(s.segments, 2u);
  EXPECT_EQ(s.system_allocations, 2u);
  pool.release(a);
  s = pool.stats();
  EXPECT_EQ(s.allocated, 4 * MiB);
  EXPECT_EQ(s.peak_allocated, 16 * MiB);
  pool.empty_cache();
  s = pool.stats();
  EXPECT_EQ(s.reserved, 20 * MiB);
  EXPECT_EQ(s.peak_reserved, 32 * MiB);
  EXPECT_EQ(s.segments, 1u);
  pool.release(b);
  EXPECT_NE(error_of([&] { pool.release(b); }).find("was not allocated from fake:0"), std::string::npos);
}

TEST(BlockPool, OutOfMemoryReturnsTheCacheAndRetriesOnce) {
  FakeMemory mem(44 * MiB);
  BlockPool pool(mem, "fake:3");
  void* a = take(pool, 12 * MiB);
  void* b = take(pool, 12 * MiB);
  void* c = take(pool, 12 * MiB);
  pool.release(a);
  pool.release(b);  // 24 MiB cached in two free segments, 12 MiB in use
  // 20 MiB does not fit in a cached 12 MiB segment, nor beside them (44 - 36 MiB free): the pool gives
  // the free segments back and the retry succeeds.
  void* d = take(pool, 20 * MiB);
  EXPECT_EQ(mem.releases, 2);
  EXPECT_EQ(pool.stats().reserved, 32 * MiB);
  // Nothing left to give back: the error names the device, the request and the bytes in use.
  const std::string message = error_of([&] { take(pool, 16 * MiB); });
  EXPECT_NE(message.find("out of memory on fake:3 allocating 16777216 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("33554432 bytes in use"), std::string::npos) << message;
  EXPECT_NE(message.find("reduce the batch size"), std::string::npos) << message;
  pool.release(c);
  pool.release(d);
}

TEST(BlockPool, OtherSourceErrorsAreNotReportedAsOutOfMemory) {
  FakeMemory mem;
  BlockPool pool(mem, "fake:0");
  mem.fail_with_error();
  const std::string message = error_of([&] { take(pool, 4 * MiB); });
  EXPECT_NE(message.find("illegal memory access"), std::string::npos) << message;
  EXPECT_EQ(message.find("out of memory"), std::string::npos) << message;
}

TEST(BlockPool, FillsEveryBlockHandedOutNewOrReused) {
  FakeMemory mem;
  BlockPool pool(mem, "fake:0");
  std::vector<std::pair<void*, size_t>> filled;
  pool.set_fill([&](void* p, size_t n) { filled.emplace_back(p, n); });
  void* a = take(pool, 5000);
  pool.release(a);
  void* b = take(pool, 5000);  // reused
  ASSERT_EQ(filled.size(), 2u);
  EXPECT_EQ(filled[0], std::make_pair(a, size_t{5120}));
  EXPECT_EQ(filled[1], std::make_pair(b, size_t{5120}));
  pool.release(b);
}

// An epoch of length-sorted variable batches, as a classification or SQuAD run makes them: each step
// allocates activations whose sizes follow the batch's length, frees them in a mixed order, keeps some
// state alive across steps. With exact-size caching every distinct size keeps its own blocks; here the
// reserved memory is set by the largest step and does not grow over later epochs.
TEST(BlockPool, ReservedMemoryStaysFlatOverEpochsOfVariableShapes) {
  FakeMemory mem;
  BlockPool pool(mem, "fake:0");
  std::mt19937 rng(3);
  const int64_t B = 32, d = 512;
  std::vector<int64_t> lengths(400);
  for (int64_t& L : lengths) L = std::uniform_int_distribution<int64_t>(5, 60)(rng);
  std::vector<size_t> reserved_after_epoch;
  std::map<size_t, size_t> per_size_cache;  // what caching by exact rounded size would hold: size -> blocks
  void* carried = take(pool, B * d * 4);
  for (int epoch = 0; epoch < 4; ++epoch) {
    // Growing lengths first (the worst order for a cache), then shrinking, then shuffled.
    std::vector<int64_t> order = lengths;
    std::sort(order.begin(), order.end());
    if (epoch == 1) std::reverse(order.begin(), order.end());
    if (epoch >= 2) std::shuffle(order.begin(), order.end(), rng);
    for (int64_t L : order) {
      const size_t act = static_cast<size_t>(L * B * d * 4);
      std::vector<size_t> sizes{act, 3 * act, act, act / 4 + 512, static_cast<size_t>(L * B * 8), 4096, act};
      std::vector<void*> live;
      std::map<size_t, size_t> in_step;
      for (size_t n : sizes) {
        live.push_back(take(pool, n));
        const size_t g = n < MiB ? 512 : 2 * MiB;  // the former allocator's rounding
        ++in_step[(n + g - 1) / g * g];
      }
      for (const auto& [size, count] : in_step) per_size_cache[size] = std::max(per_size_cache[size], count);
      // Backward frees in reverse, keeps the state for the next step, frees the old one.
      std::swap(live[1], live[4]);
      for (auto it = live.rbegin(); it != live.rend(); ++it) pool.release(*it);
      void* next = take(pool, B * d * 4);
      pool.release(carried);
      carried = next;
    }
    reserved_after_epoch.push_back(pool.stats().reserved);
  }
  const AllocatorStats s = pool.stats();
  EXPECT_EQ(reserved_after_epoch[1], reserved_after_epoch[0]);
  EXPECT_EQ(reserved_after_epoch[3], reserved_after_epoch[0]);
  EXPECT_EQ(s.peak_reserved, reserved_after_epoch[0]);
  // Bounded by the largest step (plus segment rounding), far below one cached block per distinct size.
  EXPECT_LE(s.peak_reserved, 2 * s.peak_allocated) << "peak in use " << s.peak_allocated;
  size_t exact_size_cache = 0;
  for (const auto& [size, count] : per_size_cache) exact_size_cache += size * count;
  EXPECT_LT(2 * s.peak_reserved, exact_size_cache) << "reserved " << s.peak_reserved << " vs " << exact_size_cache;
  pool.release(carried);
}

// A graph's private pool: what is allocated while it is active (also freed and taken again during the
// capture) comes from its own segments, which neither the shared pool's requests, nor empty_cache, nor
// the out-of-memory retry take back while the graph lives; a block goes back to the pool it came from
// whichever pool is active; retiring the pool returns its segments once its last block is freed.
TEST(PoolRouter, AGraphsPoolKeepsItsBlocksFromOtherWorkUntilRetired) {
  FakeMemory memory;
  PoolRouter router(memory, "cuda:0");
  size_t granted = 0;
  void* before = router.allocate(4096, &granted);  // a parameter, from the shared pool
  router.release(before);                           // its block is now free in the shared pool
  const PoolRouter::PoolId graph = router.create_private();
  router.set_active(graph);
  void* scratch = router.allocate(4096, &granted);
  EXPECT_NE(scratch, before) << "a capture took a block of the shared pool";
  router.release(scratch);                            // freed during the capture...
  void* again = router.allocate(4096, &granted);      // ...and taken again by a later kernel of it: fine
  EXPECT_EQ(again, scratch);
  void* output = router.allocate(3 * MiB, &granted);  // the graph's loss, kept by the host
  router.set_active(PoolRouter::kShared);
  router.release(again);  // released while the shared pool is active: back to the graph's pool
  // Eager work after the capture never gets the graph's blocks.
  std::vector<void*> eager;
  for (int i = 0; i < 8; ++i) {
    eager.push_back(router.allocate(4096, &granted));
    EXPECT_NE(eager.back(), scratch);
  }
  const int releases_before = memory.releases;
  router.empty_cache();
  for (void* p : eager) router.release(p);
  router.empty_cache();
  EXPECT_EQ(router.private_pools(), 1u);
  const AllocatorStats live = router.stats();
  EXPECT_EQ(live.allocated, 3 * MiB);  // the output, still in use
  // Retired with the output still held: the pool stays until that block is freed, then goes.
  router.retire(graph);
  EXPECT_EQ(router.private_pools(), 1u);
  EXPECT_EQ(error_of([&] { router.set_active(graph); }).find("retired") != std::string::npos, true);
  const int releases_at_retire = memory.releases;
  router.release(output);
  EXPECT_EQ(router.private_pools(), 0u);
  EXPECT_EQ(memory.releases - releases_at_retire, 2) << "the graph's small and large segments";
  EXPECT_GT(releases_at_retire, releases_before) << "empty_cache returned the shared pool's free segments";
  EXPECT_EQ(router.stats().allocated, 0u);
  EXPECT_EQ(memory.in_use(), 0u);
  EXPECT_GE(router.stats().peak_allocated, 3 * MiB + 4096);
}

// A private pool that finds no memory reports it, naming the graph's pool, and gives back none of its
// own free segments to make room (the graph replays into them); the shared pool's cache stays too
// (returning it would synchronise the device inside a capture).
// Graphs captured one after another into one private pool (cuda::GraphPool, a run's graphs of several
// batch shapes): the second capture takes what the first freed, never the first's kept outputs, and
// the pool goes once retired and its last block is released.
TEST(PoolRouter, GraphsCapturedOneAfterAnotherShareTheirPool) {
  FakeMemory memory;
  PoolRouter router(memory, "cuda:0");
  size_t granted = 0;
  const PoolRouter::PoolId pool = router.create_private();
  router.set_active(pool);                                // capture A
  void* scratch_a = router.allocate(4096, &granted);
  void* output_a = router.allocate(8192, &granted);       // A's loss, kept by the host
  router.release(scratch_a);
  router.set_active(PoolRouter::kShared);
  const int segments = memory.allocations;
  router.set_active(pool);                                // capture B
  void* scratch_b = router.allocate(4096, &granted);
  void* output_b = router.allocate(8192, &granted);
  EXPECT_EQ(scratch_b, scratch_a) << "B did not take what A freed";
  EXPECT_NE(output_b, output_a) << "B took A's kept output";
  EXPECT_EQ(memory.allocations, segments) << "B asked the source for memory that A's segment had";
  router.release(scratch_b);
  router.set_active(PoolRouter::kShared);
  router.retire(pool);
  EXPECT_EQ(router.private_pools(), 1u) << "retired while the graphs' outputs live";
  router.release(output_a);
  router.release(output_b);
  EXPECT_EQ(router.private_pools(), 0u);
  router.empty_cache();
  EXPECT_EQ(memory.in_use(), 0u);
}

TEST(PoolRouter, APrivatePoolOutOfMemoryKeepsItsOwnSegments) {
  FakeMemory memory(40 * MiB);
  PoolRouter router(memory, "cuda:0");
  size_t granted = 0;
  void* shared_block = router.allocate(20 * MiB, &granted);
  router.release(shared_block);  // 20 MiB cached in the shared pool
  const PoolRouter::PoolId graph = router.create_private();
  router.set_active(graph);
  void* small = router.allocate(4096, &granted);  // a 2 MiB segment of the graph's pool
  router.release(small);
  void* big = router.allocate(16 * MiB, &granted);  // a 16 MiB segment: 2 MiB left in the source
  router.release(big);
  EXPECT_EQ(router.stats().reserved, 38 * MiB);
  const int releases = memory.releases;
  const std::string message = error_of([&] { router.allocate(30 * MiB, &granted); });
  EXPECT_NE(message.find("out of memory on cuda:0 (CUDA graph pool"), std::string::npos) << message;
  EXPECT_EQ(memory.releases, releases) << "a segment went back to the source";
  void* small_again = router.allocate(4096, &granted);
  EXPECT_EQ(small_again, small);
  router.release(small_again);
  router.retire(graph);
  EXPECT_EQ(router.private_pools(), 0u);
  router.empty_cache();
  EXPECT_EQ(memory.in_use(), 0u);
}

// A retired graph's pool whose last block is freed while another capture runs returns its memory only
// when that capture ends (returning it during the capture would synchronise the device inside it).
TEST(PoolRouter, ARetiredPoolWaitsForTheRunningCaptureToEnd) {
  FakeMemory memory;
  PoolRouter router(memory, "cuda:0");
  size_t granted = 0;
  const PoolRouter::PoolId old_graph = router.create_private();
  router.set_active(old_graph);
  void* old_output = router.allocate(4096, &granted);
  router.set_active(PoolRouter::kShared);
  router.retire(old_graph);
  const PoolRouter::PoolId new_graph = router.create_private();
  router.set_active(new_graph);  // a new capture
  router.release(old_output);    // the old graph's output replaced inside it
  EXPECT_EQ(memory.releases, 0);
  EXPECT_EQ(router.private_pools(), 2u);
  router.set_active(PoolRouter::kShared);  // the capture ended
  EXPECT_EQ(memory.releases, 1);
  EXPECT_EQ(router.private_pools(), 1u);
  router.retire(new_graph);
  EXPECT_EQ(router.private_pools(), 0u);
}
