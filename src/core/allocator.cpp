// CPU caching allocator (see allocator.h).
#include "core/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "core/block_pool.h"
#include "core/debug_fill.h"
#include "core/error.h"

namespace sru {

namespace {

size_t round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// Segments for the block pool, from the C library, kAlignment-aligned (blocks start at multiples of
// BlockPool::kRound = 512 bytes inside them, so they stay aligned).
class CHeap : public RawMemory {
 public:
  void* allocate(size_t nbytes) override { return std::aligned_alloc(CpuAllocator::kAlignment, nbytes); }
  void release(void* ptr, size_t) override { std::free(ptr); }
};

std::mutex mutex;
CHeap heap;
// Blocks of at least kCachedMinBytes come from size classes with splitting and merging (as the CUDA
// allocator's), so the variable shapes of length-sorted batches reuse cached memory instead of
// caching one block per distinct size (which grew without bound over a SQuAD epoch).
BlockPool pool(heap, "the CPU");
AllocatorStats small;  // blocks below kCachedMinBytes: straight from and back to the C library
size_t peak_total = 0;  // high-water mark of the pool's and the small blocks' bytes together

void note_total() { peak_total = std::max(peak_total, pool.stats().allocated + small.allocated); }

}  // namespace

CpuAllocator& CpuAllocator::instance() {
  static CpuAllocator allocator;
  return allocator;
}

void* CpuAllocator::allocate(size_t nbytes, size_t* rounded) {
  void* p = nullptr;
  if (nbytes >= kCachedMinBytes) {
    std::lock_guard<std::mutex> lock(mutex);
    p = pool.allocate(nbytes, rounded);
    note_total();
  } else {
    const size_t size = round_up(std::max<size_t>(nbytes, 1), kAlignment);
    *rounded = size;
    p = std::aligned_alloc(kAlignment, size);
    std::lock_guard<std::mutex> lock(mutex);
    SRU_CHECK(p != nullptr, "out of memory allocating ", nbytes, " bytes on the CPU (",
              small.allocated + pool.stats().allocated, " bytes in use)");
    small.allocated += size;
    small.peak_allocated = std::max(small.peak_allocated, small.allocated);
    note_total();
    ++small.segments;
    ++small.system_allocations;
  }
  if (nan_fill_enabled()) std::memset(p, kNanFillByte, *rounded);
  return p;
}

void CpuAllocator::release(void* ptr, size_t rounded) {
  std::lock_guard<std::mutex> lock(mutex);
  if (rounded >= kCachedMinBytes) {
    pool.release(ptr);
    return;
  }
  small.allocated -= rounded;
  --small.segments;
  std::free(ptr);
}

void CpuAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex);
  pool.empty_cache();
}

void CpuAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex);
  pool.reset_peak();
  small.peak_allocated = small.allocated;
  peak_total = pool.stats().allocated + small.allocated;
}

AllocatorStats CpuAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex);
  AllocatorStats s = pool.stats();
  s.peak_allocated = peak_total;
  s.allocated += small.allocated;
  s.reserved += small.allocated;
  s.peak_reserved = std::max(s.peak_reserved, s.reserved);
  s.segments += small.segments;
  s.system_allocations += small.system_allocations;
  return s;
}

}  // namespace sru
