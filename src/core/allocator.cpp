// CPU caching allocator (see allocator.h).
#include "core/allocator.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "core/debug_fill.h"
#include "core/error.h"

namespace sru {

namespace {

std::mutex mutex;
std::map<size_t, std::vector<void*>> free_blocks;  // rounded size -> cached blocks
AllocatorStats totals;

size_t round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace

CpuAllocator& CpuAllocator::instance() {
  static CpuAllocator allocator;
  return allocator;
}

void* CpuAllocator::allocate(size_t nbytes, size_t* rounded) {
  const bool cached = nbytes >= kCachedMinBytes;
  const size_t size = cached ? round_up(nbytes, kCachedGranularity) : round_up(std::max<size_t>(nbytes, 1), kAlignment);
  *rounded = size;
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (cached) {
      auto it = free_blocks.find(size);
      if (it != free_blocks.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
      }
    }
    if (p == nullptr) {
      p = std::aligned_alloc(kAlignment, size);
      SRU_CHECK(p != nullptr, "out of memory allocating ", nbytes, " bytes on the CPU (", totals.allocated,
                " bytes in use, ", totals.reserved - totals.allocated, " cached)");
      totals.reserved += size;
      totals.peak_reserved = std::max(totals.peak_reserved, totals.reserved);
      ++totals.segments;
      ++totals.system_allocations;
    }
    totals.allocated += size;
    totals.peak_allocated = std::max(totals.peak_allocated, totals.allocated);
  }
  if (nan_fill_enabled()) std::memset(p, kNanFillByte, size);
  return p;
}

void CpuAllocator::release(void* ptr, size_t rounded) {
  std::lock_guard<std::mutex> lock(mutex);
  totals.allocated -= rounded;
  if (rounded >= kCachedMinBytes) {
    free_blocks[rounded].push_back(ptr);
    return;
  }
  totals.reserved -= rounded;
  --totals.segments;
  std::free(ptr);
}

void CpuAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex);
  for (auto& [size, blocks] : free_blocks) {
    for (void* p : blocks) std::free(p);
    totals.reserved -= size * blocks.size();
    totals.segments -= blocks.size();
  }
  free_blocks.clear();
}

AllocatorStats CpuAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex);
  return totals;
}

}  // namespace sru
