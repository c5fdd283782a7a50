// CPU caching allocator. Training frees and re-allocates buffers of the same sizes every step
// (activations, gradients); fresh memory from the OS costs page faults and zeroing each time (on
// this project's VMs a fresh 24 MB GEMM output made the GEMM 3x slower). Blocks of at least
// kCachedMinBytes come from the same block pool as the CUDA allocator's (core/block_pool.h: size
// classes, best fit, splitting and merging), over segments from the C library, so batches of varying
// shapes reuse cached memory and reserved memory levels off; smaller blocks go straight to the C
// library, which already caches them. Thread-safe.
// With the NaN-fill debug mode on (core/debug_fill.h) every block handed out is filled with 0xFF bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sru {

struct AllocatorStats {
  size_t allocated = 0;       // bytes in live tensors (as rounded)
  size_t reserved = 0;        // allocated + cached free blocks
  size_t peak_allocated = 0;  // high-water mark of `allocated`
  size_t peak_reserved = 0;   // high-water mark of `reserved`
  size_t segments = 0;        // memory regions held from the system / driver
  size_t system_allocations = 0;  // calls that got memory from the system / driver, since the start
};

class CpuAllocator {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kCachedMinBytes = 1 << 20;

  static CpuAllocator& instance();
  // Returns at least nbytes, kAlignment-aligned; *rounded receives the size to pass back to release.
  void* allocate(size_t nbytes, size_t* rounded);
  void release(void* ptr, size_t rounded);
  // Returns every cached free block to the operating system.
  void empty_cache();
  AllocatorStats stats() const;
  // Starts peak_allocated and peak_reserved over from the current values.
  void reset_peak_stats();
};

}  // namespace sru
