// Building blocks of the float32 row kernels (softmax, cross-entropy, layer norm: ops/cuda/softmax.cu,
// layer_norm.cu): rows (N, C) of f32 or bf16 storage, a warp per row up to kWarpRowMax elements (8 rows a
// block of kBlock threads) or a block per row; 16-byte packs of a row (4 floats or 8 bf16) where every row
// pointer is 16-byte aligned, else one element at a time; sums over a row's threads by warp shuffles, then
// across warps in warp order (fixed: the same result every run, in every thread of the row).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "ops/cuda/kernel_util.cuh"

namespace sru::cuda {

constexpr long long kWarpRowMax = 1024;  // rows up to this many elements: a warp per row

// V consecutive elements of a row as float32: one 16-byte access when V > 1.
template <typename T, int V>
struct Pack {
  float v[V];
  __device__ void load(const T* p) {
    if constexpr (V == 1) {
      v[0] = static_cast<float>(p[0]);
    } else {
      static_assert(V * sizeof(T) == 16, "a pack is one 16-byte access");
      const uint4 raw = *reinterpret_cast<const uint4*>(p);
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = static_cast<float>(e[k]);
    }
  }
  __device__ void store(T* p) const {
    if constexpr (V == 1) {
      p[0] = static_cast<T>(v[0]);
    } else {
      uint4 raw;
      T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
      for (int k = 0; k < V; ++k) e[k] = static_cast<T>(v[k]);
      *reinterpret_cast<uint4*>(p) = raw;
    }
  }
};

// The threads of one row: TPR = 32 (a warp) or kBlock (the block). lane: the thread's place in the row.
template <int TPR>
struct RowThreads {
  static constexpr int kRowsPerBlock = kBlock / TPR;
  int lane = threadIdx.x % TPR;
  long long first = static_cast<long long>(blockIdx.x) * kRowsPerBlock + threadIdx.x / TPR;
  long long step = static_cast<long long>(gridDim.x) * kRowsPerBlock;
};

__device__ inline float warp_sum_f32(float v) {
  for (int lanes = 16; lanes > 0; lanes >>= 1) v += __shfl_xor_sync(0xffffffffu, v, lanes);
  return v;
}

// Sum over the row's threads; every thread of the row gets it. `shared`: kBlock / 32 floats (TPR = kBlock).
template <int TPR>
__device__ float row_sum(float v, float* shared) {
  v = warp_sum_f32(v);
  if constexpr (TPR == 32) {
    return v;
  } else {
    if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < kBlock / 32; ++w) total += shared[w];
    __syncthreads();
    return total;
  }
}

// The launch shape of a float32 row kernel: 16-byte packs when every row pointer is 16-byte aligned
// (the bases aligned and C * sizeof(T) a multiple of 16), a warp or a block per row by C.
struct RowLaunch {
  bool packed;
  bool warp_per_row;
  unsigned blocks;
};

template <typename T>
RowLaunch row_launch(long long N, long long C, std::initializer_list<const void*> bases) {
  bool aligned = (C * static_cast<long long>(sizeof(T))) % 16 == 0;
  for (const void* p : bases) aligned = aligned && reinterpret_cast<uintptr_t>(p) % 16 == 0;
  const bool warp = C <= kWarpRowMax;
  return {aligned, warp, grid_for(N, warp ? kBlock / 32 : 1)};
}

// Calls launch.template operator()<V, TPR>() with the pack width and threads per row of `shape`.
template <typename T, typename F>
void with_row_shape(const RowLaunch& shape, F&& launch) {
  constexpr int kPack = 16 / sizeof(T);
  if (shape.packed) {
    if (shape.warp_per_row) launch.template operator()<kPack, 32>();
    else launch.template operator()<kPack, kBlock>();
  } else {
    if (shape.warp_per_row) launch.template operator()<1, 32>();
    else launch.template operator()<1, kBlock>();
  }
}

}  // namespace sru::cuda
