// The shared and private block pools of one device (see pool_router.h).
#include "core/pool_router.h"

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace sru {

PoolRouter::PoolRouter(RawMemory& source, std::string name)
    : source_(source), name_(name), shared_(source, name) {}

PoolRouter::~PoolRouter() = default;

PoolRouter::PoolId PoolRouter::create_private() {
  const PoolId id = next_id_++;
  Private p;
  p.pool = std::make_unique<BlockPool>(source_, name_ + " (CUDA graph pool " + std::to_string(id) + ")");
  p.pool->set_keep_segments(true);
  if (fill_) p.pool->set_fill(fill_);
  private_.emplace(id, std::move(p));
  return id;
}

BlockPool& PoolRouter::pool(PoolId id) {
  if (id == kShared) return shared_;
  auto it = private_.find(id);
  SRU_CHECK(it != private_.end() && !it->second.retired, "memory pool ", id, " of ", name_,
            " does not exist or is retired");
  return *it->second.pool;
}

void PoolRouter::set_active(PoolId id) {
  pool(id);  // checks it
  active_ = id;
  if (id != kShared) return;
  // A capture ended: the retired pools whose last block went during it return their memory now.
  std::vector<PoolId> retired;
  for (const auto& [pid, p] : private_)
    if (p.retired) retired.push_back(pid);
  for (PoolId pid : retired) drop_if_done(pid);
}

void PoolRouter::retire(PoolId id) {
  SRU_CHECK(id != kShared, "the shared memory pool of ", name_, " cannot be retired");
  auto it = private_.find(id);
  SRU_CHECK(it != private_.end() && !it->second.retired, "memory pool ", id, " of ", name_,
            " does not exist or is already retired");
  it->second.retired = true;
  if (active_ == id) active_ = kShared;
  drop_if_done(id);
}

// A retired pool with nothing in use returns its segments (every one a free block then) and goes; not
// while a capture runs (a private pool active): returning memory to the driver would synchronise the
// device inside the capture, so set_active(kShared) after it does it.
void PoolRouter::drop_if_done(PoolId id) {
  if (active_ != kShared) return;
  auto it = private_.find(id);
  if (it == private_.end() || !it->second.retired || it->second.pool->stats().allocated != 0) return;
  BlockPool& p = *it->second.pool;
  retired_system_allocations_ += p.stats().system_allocations;
  p.set_keep_segments(false);
  p.empty_cache();
  private_.erase(it);
}

void PoolRouter::note_peaks() {
  const AllocatorStats s = stats();
  peak_allocated_ = std::max(peak_allocated_, s.allocated);
  peak_reserved_ = std::max(peak_reserved_, s.reserved);
}

void* PoolRouter::allocate(size_t nbytes, size_t* granted) {
  void* p = pool(active_).allocate(nbytes, granted);
  note_peaks();
  return p;
}

void PoolRouter::release(void* ptr) {
  for (auto& [id, p] : private_)
    if (p.pool->holds(ptr)) {
      p.pool->release(ptr);
      drop_if_done(id);  // invalidates p; returns at once
      return;
    }
  shared_.release(ptr);
}

void PoolRouter::empty_cache() { shared_.empty_cache(); }

AllocatorStats PoolRouter::stats() const {
  AllocatorStats total = shared_.stats();
  total.system_allocations += retired_system_allocations_;
  for (const auto& [id, p] : private_) {
    const AllocatorStats s = p.pool->stats();
    total.allocated += s.allocated;
    total.reserved += s.reserved;
    total.segments += s.segments;
    total.system_allocations += s.system_allocations;
  }
  total.peak_allocated = std::max(peak_allocated_, total.allocated);
  total.peak_reserved = std::max(peak_reserved_, total.reserved);
  return total;
}

void PoolRouter::reset_peak() {
  const AllocatorStats s = stats();
  peak_allocated_ = s.allocated;
  peak_reserved_ = s.reserved;
  shared_.reset_peak();
}

void PoolRouter::set_fill(std::function<void(void*, size_t)> fill) {
  fill_ = fill;
  shared_.set_fill(fill);
  for (auto& [id, p] : private_) p.pool->set_fill(fill);
}

}  // namespace sru
