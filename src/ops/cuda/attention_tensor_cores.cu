// The fused attention's bf16 kernels on tensor cores (contract and math: ops/attention.h; per-element
// rules: ops/attention_math.h; the SIMT kernels and the CPU twin compute the same op): heads of
// dh = dv = 64 features stored in bf16 on cards of compute capability 8.0 and later, where
// fused_attention_forward / _backward (ops/cuda/attention.cu) hand them here.
//
// Shapes as the SIMT kernels: q (Lq, B, H*64) or head-major, k, v (Lk, ...), out like q; lse (B*H*Lq)
// float32. Every product is mma.sync.m16n8k16 with bf16 operands and float32 sums (PTX ISA, "Matrix
// fragments for mma.m16n8k16": in a warp, lane = 4 g + t; an A fragment (16 x 16, rows x k) holds
// (g, 2t..2t+1), (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..) in its four 32-bit registers; a B
// fragment (16 x 8, k x n) holds (k 2t..2t+1, n g) and (k 2t + 8.., n g); the float32 accumulator
// (16 x 8) holds (g, 2t..2t+1) and (g + 8, 2t..2t+1)). A pair of adjacent k values is one 32-bit word,
// the lower k in the low half, so every fragment is read from shared memory with 32-bit loads from
// tiles laid out so that the pair is contiguous (rows of the operand whose k runs along memory;
// transposed copies where it does not). Two accumulators of adjacent 8-column tiles, rounded to bf16,
// are the A fragment of the next product over those 16 columns (flash attention 2's register reuse).
//
// Forward: a block of 4 warps takes 64 queries of one (b, h), a warp 16 of them (its Q fragments held
// in registers), and walks the keys the block can see in tiles of 64 (K row-major and V transposed in
// shared memory): S = scale Q K^T (32 mmas a tile), masked to -inf where the query does not see the key,
// the online softmax in float32 (row max and sum over the 4 lanes sharing a row), the weights P Z
// (dropout's factor per element, the same Philox word as the SIMT kernels) rounded to bf16, and
// O += (P Z) V (32 mmas). out = O / l, lse = m + log l.
// Backward: (1) per 64 queries: D_i = dO_i . out_i, then per key tile S and dP = dO V^T, dS = P (Z dP
// - D), dQ += dS K (from transposed K); (2) per 64 keys: S^T = K Q^T and dP^T = V dO^T, dV += (P Z)^T dO,
// dK += dS^T Q (from transposed Q and dO). No atomics: each gradient row is one warp's.
// Numerics against the SIMT kernels: the same float32 statistics; P Z and dS are rounded to bf16 before
// their products (flash attention does the same), within the bf16 parity bounds.
// Floors at the issue's bench shape (L 512, B 16, H 8, causal; 128 heads): forward ~4.3 GFLOP (half the
// tiles skipped), backward ~11 GFLOP; at ~300-400 dense bf16 TFLOP/s for mma.sync on an H100/H200 about
// 15 + 35 us; bytes (q, k, v, out, dO, three gradients: 8 x 8.4 MB) ~17 us at 4 TB/s.
#include <cuda_bf16.h>

#include <cstdint>

#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <string>

#include "core/cuda/device_info.h"
#include "core/float16.h"
#include "ops/attention.h"
#include "ops/cuda/attention_tensor_cores.cuh"
#include "ops/cuda/kernel_util.cuh"

namespace sru::cuda {

namespace {

constexpr int kHead = 64;           // dh = dv
constexpr int kBlockRows = 64;      // queries (forward, dq) or keys (dk, dv) a block: 16 a warp
constexpr int kKeys = 64;           // keys (forward, dq) or queries (dk, dv) a tile
constexpr int kPitch = kHead + 8;   // bf16 row pitch of the (64, 64) tiles: 144 bytes, conflict-free loads
constexpr int kWarps = 4;
constexpr long long kMinQueries = 16;  // fewer queries a head go to the SIMT kernels

struct Acc {  // one 16 x 8 float32 accumulator: rows g and g + 8, columns 2t and 2t + 1
  float c[4];
};

__device__ __forceinline__ void clear(Acc acc[8]) {
#pragma unroll
  for (int n = 0; n < 8; ++n) acc[n].c[0] = acc[n].c[1] = acc[n].c[2] = acc[n].c[3] = 0.0f;
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ uint32_t load_pair(const uint16_t* tile, int row, int col) {
  return *reinterpret_cast<const uint32_t*>(tile + row * kPitch + col);
}

// d += a b (a: 4 registers, b: 2).
__device__ __forceinline__ void mma_bf16(Acc& d, const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d.c[0]), "+f"(d.c[1]), "+f"(d.c[2]), "+f"(d.c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // the host hands these kernels only cards of compute capability 8.0 and later
#endif
}

// The A fragments (16 rows from `row0`, all 64 features: 4 k-steps) of a row-major (64, kPitch) tile.
__device__ __forceinline__ void load_a_rows(uint32_t a[4][4], const uint16_t* tile, int row0, int g, int t) {
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    const int col = ks * 16 + 2 * t;
    a[ks][0] = load_pair(tile, row0 + g, col);
    a[ks][1] = load_pair(tile, row0 + g + 8, col);
    a[ks][2] = load_pair(tile, row0 + g, col + 8);
    a[ks][3] = load_pair(tile, row0 + g + 8, col + 8);
  }
}

// acc[n] (8 column tiles of 8: 64 columns) = A (16 x 64, fragments a) times the transpose of the tile's
// 64 rows: column n of the result is row n of `rows` (k runs along the rows' memory).
__device__ __forceinline__ void product_with_rows(Acc acc[8], const uint32_t a[4][4], const uint16_t* rows, int g,
                                                  int t) {
  clear(acc);
#pragma unroll
  for (int n = 0; n < 8; ++n) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
      mma_bf16(acc[n], a[ks], load_pair(rows, n * 8 + g, ks * 16 + 2 * t), load_pair(rows, n * 8 + g, ks * 16 + 2 * t + 8));
  }
}

// acc[n] += P (16 x 64 over the tile's 64 k, given as 8 accumulators of 16 x 8 rounded to bf16 pairs)
// times a (64 k x 64) operand stored transposed: `cols` row c holds column c's 64 k values.
__device__ __forceinline__ void accumulate_product(Acc acc[8], const Acc p[8], const uint16_t* cols, int g, int t) {
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    const uint32_t a[4] = {pack_bf16x2(p[2 * ks].c[0], p[2 * ks].c[1]), pack_bf16x2(p[2 * ks].c[2], p[2 * ks].c[3]),
                           pack_bf16x2(p[2 * ks + 1].c[0], p[2 * ks + 1].c[1]),
                           pack_bf16x2(p[2 * ks + 1].c[2], p[2 * ks + 1].c[3])};
#pragma unroll
    for (int n = 0; n < 8; ++n)
      mma_bf16(acc[n], a, load_pair(cols, n * 8 + g, ks * 16 + 2 * t), load_pair(cols, n * 8 + g, ks * 16 + 2 * t + 8));
  }
}

constexpr int kThreads = kWarps * 32;  // every kernel's block

// Feature f of a word of 8 (uint4) or 2 (uint32_t) bf16 values, the lower feature in the low half.
__device__ __forceinline__ uint16_t feature_of(const uint32_t& w, int f) {
  return static_cast<uint16_t>(f == 0 ? w & 0xffffu : w >> 16);
}
__device__ __forceinline__ uint16_t feature_of(const uint4& w, int f) {
  const uint32_t pair = f < 2 ? w.x : f < 4 ? w.y : f < 6 ? w.z : w.w;
  return feature_of(pair, f % 2);
}

// One operand's tile of rows [first, first + 64) of a head (`head`: its row 0, rows `position` elements
// apart, `count` rows in all), into `rows` as they are (row-major) and / or into `cols` transposed (tile
// row d holds feature d of the 64 rows), either null; rows past count are zeros.
struct TileSource {
  uint16_t* rows;
  uint16_t* cols;
  const uint16_t* head;
  long long position, count;
};

// The words of one or two operands' tiles (TileSource) a thread holds between their global loads and
// their shared stores. W is the word a thread loads: uint4 (8 features; every row must start on a 16-byte
// boundary: sixteen_byte_rows on the host) or uint32_t (2 features); 4 or 16 words a source.
template <typename W, int kSources>
struct TileWords {
  static constexpr int kFeatures = static_cast<int>(sizeof(W)) / 2;
  static constexpr int kWordsARow = kHead / kFeatures;
  static constexpr int kRowsAPass = kThreads / kWordsARow;  // rows the block's threads cover with one word each
  static constexpr int kWords = kBlockRows / kRowsAPass;    // words a thread, a source
  static_assert(kThreads % kWordsARow == 0 && kBlockRows % kRowsAPass == 0, "whole rows a pass");
  W w[kSources][kWords];
  // The thread's first row in the tile and its first feature.
  __device__ static int row0() { return static_cast<int>(threadIdx.x) / kWordsARow; }
  __device__ static int feature0() { return kFeatures * (static_cast<int>(threadIdx.x) % kWordsARow); }
};

// Issues the global loads of rows [first, first + 64) of every source into `words` (rows past a source's
// count are zeros), waiting for none of them: a kernel calls this for the next tile before it computes
// on the current one, so that the loads' latency hides behind the products.
template <typename W, int kSources>
__device__ __forceinline__ void fetch_tiles(TileWords<W, kSources>& words, const TileSource (&sources)[kSources],
                                            long long first) {
  using Words = TileWords<W, kSources>;
  const int r0 = Words::row0(), d = Words::feature0();
#pragma unroll
  for (int k = 0; k < kSources; ++k)
#pragma unroll
    for (int u = 0; u < Words::kWords; ++u) {
      const long long row = first + r0 + u * Words::kRowsAPass;
      words.w[k][u] = row < sources[k].count
                          ? *reinterpret_cast<const W*>(sources[k].head + row * sources[k].position + d)
                          : W{};
    }
}

// Stores `words` into the sources' tiles: row-major as they are, and / or transposed. A transposed
// store writes one feature of the word at a time. With 16-byte words the 8 threads of a warp that share a
// row start at features d = 0, 8, ..., 56; transposed rows are 144 bytes apart, so rows d + f of those 8
// threads are 1,152 bytes apart, on one bank: storing feature f everywhere at once was an 8-way conflict
// (measured on an H200: half the forward's shared wavefronts were excess). Each thread starts at its own
// feature instead (turned by d / kFeatures), so a store's 32 values fall on 16 words of 16 banks. (With
// 4-byte words a warp covers one row and stays 8-way conflicted: that path serves unaligned heads only.)
template <typename W, int kSources>
__device__ __forceinline__ void store_tiles(const TileWords<W, kSources>& words, const TileSource (&sources)[kSources]) {
  using Words = TileWords<W, kSources>;
  constexpr int kFeatures = Words::kFeatures;
  const int r0 = Words::row0(), d = Words::feature0(), turn = (d / kFeatures) % kFeatures;
#pragma unroll
  for (int k = 0; k < kSources; ++k)
#pragma unroll
    for (int u = 0; u < Words::kWords; ++u) {
      const int r = r0 + u * Words::kRowsAPass;
      if (sources[k].rows != nullptr) *reinterpret_cast<W*>(sources[k].rows + r * kPitch + d) = words.w[k][u];
      if (sources[k].cols != nullptr) {
#pragma unroll
        for (int f = 0; f < kFeatures; ++f) {
          const int feature = (f + turn) % kFeatures;
          sources[k].cols[(d + feature) * kPitch + r] = feature_of(words.w[k][u], feature);
        }
      }
    }
}

// Loads the tiles of `sources` (one or two operands) at rows [first, first + 64), all threads: every
// thread issues its global loads for every source before its first shared store, so a tile costs one
// memory latency, not one per word (measured on an H200 before: the forward at 20 TFLOP/s, 4.5x SDPA's
// time, with a load, wait and store per word), and a tile wanted both ways is read from global memory
// once. Blocks of kThreads threads.
template <typename W, int kSources>
__device__ __forceinline__ void load_tiles(const TileSource (&sources)[kSources], long long first) {
  TileWords<W, kSources> words;
  fetch_tiles(words, sources, first);
  store_tiles(words, sources);
}

// The query tile a forward or dQ block takes: the last tiles first. Under a causal mask a later query
// tile sees more keys, and blocks are started in about the order of their index (what the hardware
// does, not a rule), so the longest ones start in the first wave and the short ones fill the last (the
// other way round left the long ones as the tail).
__device__ __forceinline__ long long heavy_first(unsigned tile) { return static_cast<long long>(gridDim.y - 1 - tile); }

// max that keeps a NaN (fmaxf drops it), as the SIMT kernels' nan_max: a NaN score makes its row's
// output and statistics NaN.
__device__ __forceinline__ float nan_max(float a, float b) { return (b > a || b != b) ? b : a; }
__device__ __forceinline__ float quad_max(float v) {
  v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return nan_max(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int lanes = 16; lanes > 0; lanes >>= 1) v += __shfl_xor_sync(0xffffffffu, v, lanes);
  return v;
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// One key tile of the forward's online softmax, for a warp's 16 rows (rows[0] and rows[1]: the lane's
// two): the tile's scores S (unscaled) become the weights P Z in place (0 where the query does not see
// the key), the rows' running max m rises to the tile's (the quad's max), the lane's share l of the
// row sum and the output accumulators o are rescaled by exp(m_old - m_new). NaN scores stay NaN (the
// SIMT kernels' rule: a NaN reaches the row's output and lse).
__device__ __forceinline__ void softmax_tile(Acc sc[8], Acc o[8], float m[2], float l[2], const AttentionShape& s,
                                             const AttentionDropout& drop, const bool* padded, long long b, long long h,
                                             const long long rows[2], long long t0, int t) {
  const float scale = static_cast<float>(s.scale);
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const long long i = rows[e / 2], j = t0 + n * 8 + 2 * t + (e % 2);
      const bool sees = i < s.Lq && j < s.Lk && !padded[j - t0] && s.pattern.sees(i, j);
      sc[n].c[e] = sees ? scale * sc[n].c[e] : -INFINITY;
      tile_max[e / 2] = nan_max(tile_max[e / 2], sc[n].c[e]);
    }
  float alpha[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float m_new = nan_max(m[r], quad_max(tile_max[r]));
    alpha[r] = m_new == -INFINITY ? 1.0f : (m[r] == -INFINITY ? 0.0f : __expf(m[r] - m_new));
    m[r] = m_new;
  }
  float part[2] = {0.0f, 0.0f};
#pragma unroll
  for (int n = 0; n < 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e / 2;
      const float p = sc[n].c[e] == -INFINITY ? 0.0f : __expf(sc[n].c[e] - m[r]);
      part[r] += p;
      const long long j = t0 + n * 8 + 2 * t + (e % 2);
      sc[n].c[e] = p == 0.0f ? 0.0f : p * drop.factor<float>(s.row(b, h, rows[r]) * s.Lk + j);
    }
#pragma unroll
  for (int r = 0; r < 2; ++r) l[r] = l[r] * alpha[r] + part[r];  // a lane's share; summed over the quad at the end
#pragma unroll
  for (int n = 0; n < 8; ++n) {
    o[n].c[0] *= alpha[0];
    o[n].c[1] *= alpha[0];
    o[n].c[2] *= alpha[1];
    o[n].c[3] *= alpha[1];
  }
}

// kPrefetch: the next key tile's global loads issued before this tile's products (186 registers with
// 16-byte words: 2 blocks an SM), or issued at the tile's start and waited for (158: 3 blocks an SM);
// SRU_ATTENTION_PREFETCH=0 chooses the latter, to time the two side by side.
template <typename W, bool kPrefetch>
__global__ void __launch_bounds__(kWarps * 32) tc_forward_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                                                 const float* pad, AttentionShape s, AttentionDropout drop,
                                                                 uint16_t* out, float* lse) {
  drop.offset = PhiloxOffset{drop.offset.value()};
  __shared__ __align__(16) uint16_t qs[kBlockRows * kPitch], ks[kKeys * kPitch], vt[kHead * kPitch];
  __shared__ bool padded[kKeys];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const long long bh = blockIdx.x, b = bh / s.H, h = bh % s.H;
  const long long i0 = heavy_first(blockIdx.y) * kBlockRows;
  load_tiles<W>({TileSource{qs, nullptr, q + s.q.at(0, b, h), s.q.position, s.Lq}}, i0);
  __syncthreads();
  uint32_t qa[4][4];
  load_a_rows(qa, qs, warp * 16, g, t);
  const long long rows[2] = {i0 + warp * 16 + g, i0 + warp * 16 + g + 8};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  Acc o[8];
  clear(o);
  long long begin, end;
  s.pattern.keys_seen_by(i0, min(i0 + kBlockRows, s.Lq) - 1, s.Lk, begin, end);
  const TileSource kv[2] = {TileSource{ks, nullptr, k + s.k.at(0, b, h), s.k.position, s.Lk},
                            TileSource{nullptr, vt, v + s.v.at(0, b, h), s.v.position, s.Lk}};
  TileWords<W, 2> next;  // with kPrefetch, the next key tile's words, in flight while this tile's products run
  const long long first_tile = begin - begin % kKeys;
  if (kPrefetch && first_tile <= end) fetch_tiles(next, kv, first_tile);
  for (long long t0 = first_tile; t0 <= end; t0 += kKeys) {
    __syncthreads();  // the previous tile is read
    if (!kPrefetch) fetch_tiles(next, kv, t0);
    store_tiles(next, kv);
    if (threadIdx.x < kKeys) padded[threadIdx.x] = t0 + threadIdx.x < s.Lk && s.key_padded(pad, b, t0 + threadIdx.x);
    __syncthreads();
    if (kPrefetch && t0 + kKeys <= end) fetch_tiles(next, kv, t0 + kKeys);
    Acc sc[8];
    product_with_rows(sc, qa, ks, g, t);
    softmax_tile(sc, o, m, l, s, drop, padded, b, h, rows, t0, t);
    accumulate_product(o, sc, vt, g, t);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const long long i = rows[r];
    const float sum = quad_sum(l[r]);
    if (i >= s.Lq) continue;
    const bool seen = m[r] != -INFINITY;
    const float inv = seen ? 1.0f / sum : 0.0f;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      const uint32_t pair = pack_bf16x2(o[n].c[2 * r] * inv, o[n].c[2 * r + 1] * inv);
      *reinterpret_cast<uint32_t*>(out + s.o_at(i, b, h) + n * 8 + 2 * t) = pair;
    }
    if (t == 0) lse[s.row(b, h, i)] = seen ? m[r] + __logf(sum) : -INFINITY;
  }
}

// The dQ block's row statistics: lse_i and D_i = dO_i . out_i of its 64 queries into `stats` (and D_i into
// row_dot for the dK / dV kernel), a warp per row, two features a lane.
__device__ __forceinline__ void block_row_stats(float (*stats)[2], const AttentionShape& s, const uint16_t* out,
                                                const uint16_t* grad_out, const float* lse, float* row_dot, long long b,
                                                long long h, long long i0, int warp, int lane) {
  for (int r = warp; r < kBlockRows; r += kWarps) {
    const long long i = i0 + r;
    float part = 0.0f;
    if (i < s.Lq)
      for (int d = lane; d < kHead; d += 32)
        part += float_from_bf16_bits(grad_out[s.o_at(i, b, h) + d]) * float_from_bf16_bits(out[s.o_at(i, b, h) + d]);
    part = warp_sum(part);
    if (lane == 0) {
      stats[r][0] = i < s.Lq ? lse[s.row(b, h, i)] : -INFINITY;
      stats[r][1] = part;
      if (i < s.Lq) row_dot[s.row(b, h, i)] = part;
    }
  }
}

// Backward (1): D_i and dq_i, 16 queries a warp.
template <typename W>
__global__ void __launch_bounds__(kWarps * 32) tc_backward_dq_kernel(const uint16_t* q, const uint16_t* k,
                                                                     const uint16_t* v, const float* pad, AttentionShape s,
                                                                     AttentionDropout drop, const uint16_t* out,
                                                                     const uint16_t* grad_out, const float* lse,
                                                                     float* row_dot, uint16_t* gq) {
  drop.offset = PhiloxOffset{drop.offset.value()};
  __shared__ __align__(16) uint16_t ks[kKeys * kPitch], vs[kKeys * kPitch], kt[kHead * kPitch];
  __shared__ bool padded[kKeys];
  __shared__ float stats[kBlockRows][2];  // lse, D of the block's queries
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const long long bh = blockIdx.x, b = bh / s.H, h = bh % s.H;
  const long long i0 = heavy_first(blockIdx.y) * kBlockRows;
  block_row_stats(stats, s, out, grad_out, lse, row_dot, b, h, i0, warp, lane);
  // The rows' A fragments of Q and dO, staged through the key tiles' memory before the first tile.
  load_tiles<W>({TileSource{ks, nullptr, q + s.q.at(0, b, h), s.q.position, s.Lq},
                 TileSource{vs, nullptr, grad_out + s.o.at(0, b, h), s.o.position, s.Lq}},
                i0);
  __syncthreads();
  uint32_t qa[4][4], ga[4][4];
  load_a_rows(qa, ks, warp * 16, g, t);
  load_a_rows(ga, vs, warp * 16, g, t);
  const int local[2] = {warp * 16 + g, warp * 16 + g + 8};
  const long long rows[2] = {i0 + local[0], i0 + local[1]};
  const float row_lse[2] = {stats[local[0]][0], stats[local[1]][0]}, row_d[2] = {stats[local[0]][1], stats[local[1]][1]};
  Acc dq[8];
  clear(dq);
  const float scale = static_cast<float>(s.scale);
  long long begin, end;
  s.pattern.keys_seen_by(i0, min(i0 + kBlockRows, s.Lq) - 1, s.Lk, begin, end);
  const TileSource kv[2] = {TileSource{ks, kt, k + s.k.at(0, b, h), s.k.position, s.Lk},
                            TileSource{vs, nullptr, v + s.v.at(0, b, h), s.v.position, s.Lk}};
  TileWords<W, 2> next;  // the next key tile's words, in flight while this tile's products run
  const long long first_tile = begin - begin % kKeys;
  if (first_tile <= end) fetch_tiles(next, kv, first_tile);
  for (long long t0 = first_tile; t0 <= end; t0 += kKeys) {
    __syncthreads();
    store_tiles(next, kv);
    if (threadIdx.x < kKeys) padded[threadIdx.x] = t0 + threadIdx.x < s.Lk && s.key_padded(pad, b, t0 + threadIdx.x);
    __syncthreads();
    if (t0 + kKeys <= end) fetch_tiles(next, kv, t0 + kKeys);
    Acc sc[8], dp[8];
    product_with_rows(sc, qa, ks, g, t);
    product_with_rows(dp, ga, vs, g, t);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2;
        const long long i = rows[r], j = t0 + n * 8 + 2 * t + (e % 2);
        const bool sees = i < s.Lq && j < s.Lk && !padded[j - t0] && s.pattern.sees(i, j) && row_lse[r] != -INFINITY;
        float ds = 0.0f;
        if (sees) {
          const float p = __expf(scale * sc[n].c[e] - row_lse[r]);
          const float z = drop.factor<float>(s.row(b, h, i) * s.Lk + j);
          ds = p * (z * dp[n].c[e] - row_d[r]);
        }
        sc[n].c[e] = ds;
      }
    accumulate_product(dq, sc, kt, g, t);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (rows[r] >= s.Lq) continue;
#pragma unroll
    for (int n = 0; n < 8; ++n)
      *reinterpret_cast<uint32_t*>(gq + s.q_at(rows[r], b, h) + n * 8 + 2 * t) =
          pack_bf16x2(scale * dq[n].c[2 * r], scale * dq[n].c[2 * r + 1]);
  }
}

// Backward (2): dk_j and dv_j, 16 keys a warp, over tiles of the queries that can see the block's keys.
template <typename W>
__global__ void __launch_bounds__(kWarps * 32) tc_backward_dkv_kernel(const uint16_t* q, const uint16_t* k,
                                                                      const uint16_t* v, const float* pad,
                                                                      AttentionShape s, AttentionDropout drop,
                                                                      const uint16_t* grad_out, const float* lse,
                                                                      const float* row_dot, uint16_t* gk, uint16_t* gv) {
  drop.offset = PhiloxOffset{drop.offset.value()};
  __shared__ __align__(16) uint16_t qs[kKeys * kPitch], gos[kKeys * kPitch], qt[kHead * kPitch], got[kHead * kPitch];
  __shared__ float stats[kKeys][2];  // lse, D of the tile's queries
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const long long bh = blockIdx.x, b = bh / s.H, h = bh % s.H;
  const long long j0 = static_cast<long long>(blockIdx.y) * kBlockRows;
  load_tiles<W>({TileSource{qs, nullptr, k + s.k.at(0, b, h), s.k.position, s.Lk},
                 TileSource{gos, nullptr, v + s.v.at(0, b, h), s.v.position, s.Lk}},
                j0);
  __syncthreads();
  uint32_t ka[4][4], va[4][4];
  load_a_rows(ka, qs, warp * 16, g, t);
  load_a_rows(va, gos, warp * 16, g, t);
  const long long keys[2] = {j0 + warp * 16 + g, j0 + warp * 16 + g + 8};
  const bool visible[2] = {keys[0] < s.Lk && !s.key_padded(pad, b, keys[0]), keys[1] < s.Lk && !s.key_padded(pad, b, keys[1])};
  Acc dk[8], dv[8];
  clear(dk);
  clear(dv);
  const float scale = static_cast<float>(s.scale);
  long long begin, end;  // the queries that can see the block's keys
  s.pattern.queries_seeing(j0, min(j0 + kBlockRows, s.Lk) - 1, s.Lq, begin, end);
  for (long long t0 = begin - begin % kKeys; t0 <= end; t0 += kKeys) {
    __syncthreads();
    load_tiles<W>({TileSource{qs, qt, q + s.q.at(0, b, h), s.q.position, s.Lq},
                   TileSource{gos, got, grad_out + s.o.at(0, b, h), s.o.position, s.Lq}},
                  t0);
    if (threadIdx.x < kKeys) {
      const long long i = t0 + threadIdx.x;
      stats[threadIdx.x][0] = i < s.Lq ? lse[s.row(b, h, i)] : -INFINITY;
      stats[threadIdx.x][1] = i < s.Lq ? row_dot[s.row(b, h, i)] : 0.0f;
    }
    __syncthreads();
    Acc st[8], dpt[8];
    product_with_rows(st, ka, qs, g, t);    // S^T: rows keys, columns the tile's queries
    product_with_rows(dpt, va, gos, g, t);  // dP^T = V dO^T
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2, c = n * 8 + 2 * t + (e % 2);
        const long long i = t0 + c, j = keys[r];
        float pz = 0.0f, ds = 0.0f;
        if (visible[r] && i < s.Lq && s.pattern.sees(i, j) && stats[c][0] != -INFINITY) {
          const float p = __expf(scale * st[n].c[e] - stats[c][0]);
          const float z = drop.factor<float>(s.row(b, h, i) * s.Lk + j);
          pz = p * z;
          ds = p * (z * dpt[n].c[e] - stats[c][1]);
        }
        dpt[n].c[e] = pz;  // (read above: the element's dP^T becomes its P Z)
        st[n].c[e] = ds;
      }
    accumulate_product(dv, dpt, got, g, t);
    accumulate_product(dk, st, qt, g, t);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const long long j = keys[r];
    if (j >= s.Lk) continue;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      *reinterpret_cast<uint32_t*>(gk + s.k_at(j, b, h) + n * 8 + 2 * t) =
          pack_bf16x2(scale * dk[n].c[2 * r], scale * dk[n].c[2 * r + 1]);
      *reinterpret_cast<uint32_t*>(gv + s.v_at(j, b, h) + n * 8 + 2 * t) = pack_bf16x2(dv[n].c[2 * r], dv[n].c[2 * r + 1]);
    }
  }
}

dim3 tc_grid(long long heads_total, long long rows) {
  const long long tiles = (rows + kBlockRows - 1) / kBlockRows;
  SRU_CHECK(heads_total <= 2147483647LL && tiles <= 65535, "fused_attention: ", heads_total, " heads x ", rows,
            " rows exceed one launch's grid");
  return dim3(static_cast<unsigned>(heads_total), static_cast<unsigned>(tiles < 1 ? 1 : tiles));
}

std::atomic<uint64_t> g_tensor_core_calls{0}, g_narrow_calls{0};
std::atomic<bool> g_tensor_cores_allowed{true};

// Whether environment variable `name` is set to `value` (the kernels' switches for side-by-side rows).
bool environment_says(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == value;
}

// Whether the forward prefetches its next key tile (tc_forward_kernel's kPrefetch): SRU_ATTENTION_PREFETCH=0
// turns it off, asked once.
bool forward_prefetches() {
  static const bool off = environment_says("SRU_ATTENTION_PREFETCH", "0");
  return !off;
}

bool tensor_cores_allowed() {
  static const bool switched_off = environment_says("SRU_ATTENTION_SIMT", "1");
  return !switched_off && g_tensor_cores_allowed.load();
}

bool strides_multiple_of(const HeadStrides& st, long long n) {
  return st.position % n == 0 && st.batch % n == 0 && st.head % n == 0;
}
bool aligned_to(const Tensor& t, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % bytes == 0; }

// Whether every row of 64 features the kernels load starts on a 16-byte boundary (the tensors' data and
// every stride a multiple of 8 elements), for load_tiles's 16-byte words; the calls that cannot are counted.
bool sixteen_byte_rows(const AttentionShape& s, std::initializer_list<const Tensor*> loaded) {
  bool wide = true;
  for (const HeadStrides* st : {&s.q, &s.k, &s.v, &s.o}) wide = wide && strides_multiple_of(*st, 8);
  for (const Tensor* t : loaded) wide = wide && aligned_to(*t, 16);
  if (!wide) g_narrow_calls.fetch_add(1);
  return wide;
}

// Whether the kernels on device `index` were built from code for 8.0 or later (a build whose PTX is for
// an older card would be compiled by the driver without the mma path, which traps), asked once.
bool kernels_hold_mma(int index) {
  constexpr int kDevices = 64;
  static std::once_flag once[kDevices];
  static bool holds[kDevices];
  if (index < 0 || index >= kDevices) return false;
  std::call_once(once[index], [index] {
    int before = 0;
    cudaGetDevice(&before);
    cudaSetDevice(index);
    cudaFuncAttributes attributes{};
    holds[index] = cudaFuncGetAttributes(&attributes, tc_forward_kernel<uint4, true>) == cudaSuccess && attributes.ptxVersion >= 80;
    cudaGetLastError();
    cudaSetDevice(before);
  });
  return holds[index];
}

// Compute capability of each device, asked once (the call is too slow for every attention).
int capability_of(int index) {
  constexpr int kDevices = 64;
  static std::once_flag once[kDevices];
  static int capability[kDevices];
  if (index < 0 || index >= kDevices) return compute_capability(index);
  std::call_once(once[index], [index] { capability[index] = compute_capability(index); });
  return capability[index];
}

}  // namespace

uint64_t tensor_core_attention_calls() { return g_tensor_core_calls.load(); }
uint64_t tensor_core_attention_narrow_calls() { return g_narrow_calls.load(); }
void allow_tensor_core_attention(bool allowed) { g_tensor_cores_allowed.store(allowed); }

bool tensor_core_attention_applies(const AttentionTensors& in, const AttentionShape& s,
                                   std::initializer_list<const Tensor*> others) {
  if (!tensor_cores_allowed() || in.q.dtype() != DType::BF16 || s.dh != kHead || s.dv != kHead) return false;
  // A decoding step's few queries fill a 64-query block poorly: the SIMT kernels' warp a query is better.
  if (s.Lq < kMinQueries) return false;
  if (capability_of(in.q.device().index) < 80 || !kernels_hold_mma(in.q.device().index)) return false;
  for (const HeadStrides* st : {&s.q, &s.k, &s.v, &s.o})
    if (!strides_multiple_of(*st, 2)) return false;
  for (const Tensor* t : {&in.q, &in.k, &in.v})
    if (!aligned_to(*t, 4)) return false;
  for (const Tensor* t : others)
    if (!aligned_to(*t, 4)) return false;
  return true;
}

void tensor_core_attention_forward(const AttentionTensors& in, const AttentionShape& s, const AttentionDropout& drop,
                                   const Tensor& out, const Tensor& lse) {
  g_tensor_core_calls.fetch_add(1);
  const auto raw = [](const Tensor& t) { return static_cast<const uint16_t*>(t.data_ptr()); };
  // 16-byte words where every row allows them (load_tiles), else 4-byte ones.
  const bool wide = sixteen_byte_rows(s, {&in.q, &in.k, &in.v});
  auto* const kernel = forward_prefetches() ? (wide ? tc_forward_kernel<uint4, true> : tc_forward_kernel<uint32_t, true>)
                                            : (wide ? tc_forward_kernel<uint4, false> : tc_forward_kernel<uint32_t, false>);
  kernel<<<tc_grid(s.B * s.H, s.Lq), kWarps * 32, 0, stream_of(in.q)>>>(raw(in.q), raw(in.k), raw(in.v),
                                                                      in.padding_data(), s, drop,
                                                                      static_cast<uint16_t*>(out.data_ptr()),
                                                                      lse.data<float>());
  SRU_CUDA_LAUNCH_CHECK("tc_forward_kernel");
}

void tensor_core_attention_backward(const AttentionTensors& in, const AttentionShape& s, const AttentionDropout& drop,
                                    const Tensor& out, const Tensor& lse, const Tensor& grad_out, const Tensor& row_dot,
                                    const Tensor& gq, const Tensor& gk, const Tensor& gv) {
  g_tensor_core_calls.fetch_add(1);
  const auto raw = [](const Tensor& t) { return static_cast<const uint16_t*>(t.data_ptr()); };
  const auto written = [](const Tensor& t) { return static_cast<uint16_t*>(t.data_ptr()); };
  const cudaStream_t stream = stream_of(in.q);
  const bool wide = sixteen_byte_rows(s, {&in.q, &in.k, &in.v, &grad_out});
  auto* const dq_kernel = wide ? tc_backward_dq_kernel<uint4> : tc_backward_dq_kernel<uint32_t>;
  auto* const dkv_kernel = wide ? tc_backward_dkv_kernel<uint4> : tc_backward_dkv_kernel<uint32_t>;
  if (s.Lq > 0)
    dq_kernel<<<tc_grid(s.B * s.H, s.Lq), kWarps * 32, 0, stream>>>(raw(in.q), raw(in.k), raw(in.v), in.padding_data(),
                                                                    s, drop, raw(out), raw(grad_out), lse.data<float>(),
                                                                    row_dot.data<float>(), written(gq));
  if (s.Lk > 0)
    dkv_kernel<<<tc_grid(s.B * s.H, s.Lk), kWarps * 32, 0, stream>>>(raw(in.q), raw(in.k), raw(in.v), in.padding_data(),
                                                                     s, drop, raw(grad_out), lse.data<float>(),
                                                                     row_dot.data<float>(), written(gk), written(gv));
  SRU_CUDA_LAUNCH_CHECK("tensor-core attention backward kernels");
}

}  // namespace sru::cuda
