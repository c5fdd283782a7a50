// Size-classed segments with block splitting and coalescing (see block_pool.h).
#include "core/block_pool.h"

#include <algorithm>

#include "core/error.h"

namespace sru {

// A block of a segment; the blocks of a segment form an address-ordered list through prev/next.
struct BlockPool::Block {
  char* ptr;
  size_t size;
  bool small;  // which pool the segment belongs to
  bool allocated = false;
  Block* prev = nullptr;
  Block* next = nullptr;
};

bool BlockPool::BySizeThenAddress::operator()(const Block* a, const Block* b) const {
  return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
}

BlockPool::BlockPool(RawMemory& source, std::string name) : source_(source), name_(std::move(name)) {}

BlockPool::~BlockPool() {
  // Process-lifetime pools are never destroyed; test pools free their bookkeeping (not the memory).
  for (auto& [base, first] : segments_)
    for (Block* b = first; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
}

size_t BlockPool::round_request(size_t nbytes) { return (std::max<size_t>(nbytes, 1) + kRound - 1) / kRound * kRound; }

size_t BlockPool::segment_size_for(size_t rounded) {
  if (rounded <= kSmallRequest) return kSmallSegment;
  if (rounded < kMediumRequest) return kMediumSegment;
  return (rounded + kLargeRound - 1) / kLargeRound * kLargeRound;
}

BlockPool::Block* BlockPool::find_free(size_t size, bool small) {
  FreeSet& set = free_set(small);
  Block key{nullptr, size, small};
  auto it = set.lower_bound(&key);
  if (it == set.end()) return nullptr;
  Block* b = *it;
  set.erase(it);
  return b;
}

BlockPool::Block* BlockPool::new_segment(size_t size, bool small) {
  void* p = source_.allocate(size);
  if (p == nullptr) {  // give the cached segments back and try once more
    if (!release_free_segments()) return nullptr;
    p = source_.allocate(size);
    if (p == nullptr) return nullptr;
  }
  auto* b = new Block{static_cast<char*>(p), size, small};
  segments_[p] = b;
  stats_.reserved += size;
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  ++stats_.segments;
  ++stats_.system_allocations;
  return b;
}

// Cuts `size` bytes off the front of a free block when the rest is worth keeping; the rest goes back
// to the free set. Small-pool rests of 512 B and more are kept; large-pool rests only above 1 MiB, so
// that small requests do not nibble at large segments.
BlockPool::Block* BlockPool::split(Block* b, size_t size) {
  const size_t rest = b->size - size;
  if (b->small ? rest < kRound : rest <= kSmallRequest) return b;
  auto* r = new Block{b->ptr + size, rest, b->small};
  r->prev = b;
  r->next = b->next;
  if (b->next) b->next->prev = r;
  b->next = r;
  b->size = size;
  free_set(r->small).insert(r);
  return b;
}

void* BlockPool::allocate(size_t nbytes, size_t* granted) {
  const size_t size = round_request(nbytes);
  const bool small = size <= kSmallRequest;
  Block* b = find_free(size, small);
  if (b == nullptr) {
    b = new_segment(segment_size_for(size), small);
    SRU_CHECK(b != nullptr, "out of memory on ", name_, " allocating ", nbytes, " bytes (", stats_.allocated,
              " bytes in use by tensors, ", stats_.reserved, " reserved, peak in use ", stats_.peak_allocated,
              "); reduce the batch size or the model");
  }
  b = split(b, size);
  b->allocated = true;
  allocated_[b->ptr] = b;
  stats_.allocated += b->size;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  *granted = b->size;
  if (fill_) fill_(b->ptr, b->size);
  return b->ptr;
}

void BlockPool::release(void* ptr) {
  auto it = allocated_.find(ptr);
  SRU_CHECK(it != allocated_.end(), "BlockPool::release: ", ptr, " was not allocated from ", name_);
  Block* b = it->second;
  allocated_.erase(it);
  b->allocated = false;
  stats_.allocated -= b->size;
  FreeSet& set = free_set(b->small);
  // Merge with free neighbours: the segment stays one block where nothing is in use.
  if (b->prev && !b->prev->allocated) {
    set.erase(b->prev);
    b = b->prev;
    absorb_next(b);
  }
  if (b->next && !b->next->allocated) {
    set.erase(b->next);
    absorb_next(b);
  }
  set.insert(b);
}

void BlockPool::absorb_next(Block* b) {
  Block* n = b->next;
  b->size += n->size;
  b->next = n->next;
  if (n->next) n->next->prev = b;
  delete n;
}

bool BlockPool::release_free_segments() {
  if (keep_segments_) return false;
  bool any = false;
  for (auto it = segments_.begin(); it != segments_.end();) {
    Block* b = it->second;
    if (b->allocated || b->next != nullptr) {  // something in use (a free segment is one free block)
      ++it;
      continue;
    }
    free_set(b->small).erase(b);
    source_.release(b->ptr, b->size);
    stats_.reserved -= b->size;
    --stats_.segments;
    delete b;
    it = segments_.erase(it);
    any = true;
  }
  return any;
}

void BlockPool::empty_cache() { release_free_segments(); }

}  // namespace sru
