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

// Packs a thread of a warp-per-row kernel holds in registers, so that a kernel reading its row in
// several passes (layer norm: mean, variance, output) loads it once: every load is issued before the
// first reduction waits, one memory round trip a row instead of one a pass (the streaming layer norm
// moved 1.9 TB/s on an H200, 2026-11-28, at 5,120 rows of 512). Calls f.template operator()<P>() with P
// in {1, 2, 4, 8} packs a thread (the smallest that holds C), or P = 0 (stream the row) for a block per
// row or single-element packs.
template <int V, int TPR, typename F>
void with_row_cache(long long C, F&& f) {
  if constexpr (TPR == 32 && V > 1) {
    constexpr long long kMostPacks = kWarpRowMax / (32LL * V);  // 8 of float32, 4 of bf16
    const long long packs = (C + 32LL * V - 1) / (32LL * V);
    if (packs <= 1) f.template operator()<1>();
    else if (packs <= 2) f.template operator()<2>();
    else if (kMostPacks <= 4 || packs <= 4) f.template operator()<4>();
    else if constexpr (kMostPacks > 4) f.template operator()<8>();
  } else {
    f.template operator()<0>();
  }
}

// A thread's packs of one row (elements first, first + stride, ...): held in P registers packs when
// P > 0 (loaded by the constructor), else read from memory at each visit. each(f) calls f(pack, j) in
// the order of j, the same order either way, so results do not depend on P.
template <typename T, int V, int P>
struct RowPacks {
  const T* row;
  long long first, stride, C;
  Pack<T, V> held[P > 0 ? P : 1];
  __device__ RowPacks(const T* row_, long long first_, long long stride_, long long C_)
      : row(row_), first(first_), stride(stride_), C(C_) {
    if constexpr (P > 0) {
#pragma unroll
      for (int q = 0; q < P; ++q)
        if (first + q * stride < C) held[q].load(row + first + q * stride);
    }
  }
  template <typename F>
  __device__ void each(F&& f) const {
    if constexpr (P > 0) {
#pragma unroll
      for (int q = 0; q < P; ++q)
        if (first + q * stride < C) f(held[q], first + q * stride);
    } else {
      for (long long j = first; j < C; j += stride) {
        Pack<T, V> p;
        p.load(row + j);
        f(p, j);
      }
    }
  }
};

}  // namespace sru::cuda
