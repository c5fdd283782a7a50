// CPU caching allocator (see allocator.h).
#include "core/allocator.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

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
  std::lock_guard<std::mutex> lock(mutex);
  if (cached) {
    auto it = free_blocks.find(size);
    if (it != free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      totals.allocated += size;
      totals.peak_allocated = std::max(totals.peak_allocated, totals.allocated);
      return p;
    }
  }
  void* p = std::aligned_alloc(kAlignment, size);
  SRU_CHECK(p != nullptr, "out of memory allocating ", nbytes, " bytes on the CPU (", totals.allocated,
            " bytes in use, ", totals.reserved - totals.allocated, " cached)");
  totals.allocated += size;
  totals.reserved += size;
  totals.peak_allocated = std::max(totals.peak_allocated, totals.allocated);
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
  std::free(ptr);
}

void CpuAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex);
  for (auto& [size, blocks] : free_blocks) {
    for (void* p : blocks) std::free(p);
    totals.reserved -= size * blocks.size();
  }
  free_blocks.clear();
}

AllocatorStats CpuAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex);
  return totals;
}

}  // namespace sru
