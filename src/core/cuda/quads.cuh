// Four consecutive elements of a device array in one access: 16 bytes for 4-byte elements, 8 for
// 2-byte ones (bf16, f16), two of 16 for 8-byte ones. For kernels that handle four elements a thread
// (dropout's Philox blocks, dtype conversions) where the pointer is aligned to four elements
// (quad_aligned); element-at-a-time accesses of a warp in that pattern span 512 bytes in 16 sectors
// per instruction, four times the L2 transactions.
#pragma once

#include <cstdint>
#include <cstring>

namespace sru::cuda {

template <typename T>
__device__ inline void load4(const T* p, T (&out)[4]) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "2-, 4- or 8-byte elements");
  if constexpr (sizeof(T) == 2) {
    const uint2 raw = *reinterpret_cast<const uint2*>(p);
    memcpy(out, &raw, sizeof(raw));
  } else {
    const uint4* q = reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int h = 0; h < static_cast<int>(sizeof(T)) / 4; ++h) {
      const uint4 raw = q[h];
      memcpy(reinterpret_cast<char*>(out) + 16 * h, &raw, sizeof(raw));
    }
  }
}

template <typename T>
__device__ inline void store4(T* p, const T (&in)[4]) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "2-, 4- or 8-byte elements");
  if constexpr (sizeof(T) == 2) {
    uint2 raw;
    memcpy(&raw, in, sizeof(raw));
    *reinterpret_cast<uint2*>(p) = raw;
  } else {
    uint4* q = reinterpret_cast<uint4*>(p);
#pragma unroll
    for (int h = 0; h < static_cast<int>(sizeof(T)) / 4; ++h) {
      uint4 raw;
      memcpy(&raw, reinterpret_cast<const char*>(in) + 16 * h, sizeof(raw));
      q[h] = raw;
    }
  }
}

template <typename T>
inline bool quad_aligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (4 * sizeof(T)) == 0;
}

}  // namespace sru::cuda
