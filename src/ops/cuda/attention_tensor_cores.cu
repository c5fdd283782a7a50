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
// the lower k in the low half. Every tile sits in shared memory row-major as the operand is stored (a
// row's 64 features contiguous, rows kPitch apart), copied there by cp.async; fragments are read with
// ldmatrix: as they are where k runs along the rows (Q, K, dO, V as A operands, and K, V, Q, dO as the B
// operand of Q K^T, dO V^T and their transposes), with ldmatrix.trans where k runs across them (V in
// P V, K in dS K, dO in P^T dO, Q in dS^T Q). Two accumulators of adjacent 8-column tiles, rounded to
// bf16, are the A fragment of the next product over those 16 columns (flash attention 2's register reuse).
//
// Forward: a block of 4 warps takes 64 queries of one (b, h), a warp 16 of them (its Q fragments held in
// registers), and walks the keys the block can see in tiles of 64, two buffers deep (tile n + 1 copied
// while tile n is computed): S = scale Q K^T (32 mmas a tile), masked to -inf where the query does not
// see the key, the online softmax in float32 (row max and sum over the 4 lanes sharing a row), the
// weights P Z (dropout's factor per element, the same Philox word as the SIMT kernels) rounded to bf16,
// and O += (P Z) V (32 mmas). out = O / l, lse = m + log l.
// Backward: (1) per 64 queries: D_i = dO_i . out_i, then per key tile S and dP = dO V^T, dS = P (Z dP
// - D), dQ += dS K; (2) per 64 keys: S^T = K Q^T and dP^T = V dO^T, dV += (P Z)^T dO, dK += dS^T Q,
// the query tiles (with their lse and D) two buffers deep. No atomics: each gradient row is one warp's.
// Numerics against the SIMT kernels: the same float32 statistics; P Z and dS are rounded to bf16 before
// their products (flash attention does the same), within the bf16 parity bounds.
// Floors at the issue's bench shape (L 512, B 16, H 8, causal; 128 heads): a product over the causal half
// is 2.15 GFLOP; the forward makes 2 (4.3 GFLOP), the backward 7 (15 GFLOP: dQ recomputes S and dP, dK /
// dV both again); at ~300-400 dense bf16 TFLOP/s for mma.sync on an H100/H200 about 11-14 + 38-50 us;
// bytes (q, k, v, out, dO, three gradients: 8 x 8.4 MB) ~17 us at 4 TB/s; shared-memory reads (every B
// fragment, 8 KB a warp a product, and the backward's reloaded A fragments) ~0.3 GB forward and ~1.25 GB
// backward, 9 + 38 us at ~33 TB/s (132 SMs x 128 bytes a cycle).
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

template <int kTiles = 8>
__device__ __forceinline__ void clear(Acc acc[kTiles]) {
#pragma unroll
  for (int n = 0; n < kTiles; ++n) acc[n].c[0] = acc[n].c[1] = acc[n].c[2] = acc[n].c[3] = 0.0f;
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
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

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// Shared-memory address of a generic pointer into shared memory (the operand of ldmatrix and cp.async).
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
#endif

// ldmatrix.x4: four 8 x 8 bf16 matrices of shared memory, lane l giving the address of row l % 8 of matrix
// l / 8 (8 contiguous values, 16-byte aligned), register m of every lane holding matrix m's (row g, columns
// 2t..2t+1); kTransposed (.trans): (rows 2t..2t+1, column g), the matrix read as its transpose.
template <bool kTransposed = false>
__device__ __forceinline__ void load_matrices(uint32_t r[4], const uint16_t* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kTransposed)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)));
#else
  __trap();
#endif
}

// The A fragments (16 rows from `row0`, all 64 features: 4 k-steps) of a row-major (64, kPitch) tile: a
// k-step's four matrices are rows 0-7 / 8-15 by features 0-7 / 8-15, in the fragment's register order.
// Rows kPitch (144 bytes) apart put a matrix's 8 rows on 8 distinct groups of 4 banks: no conflict.
__device__ __forceinline__ void load_a_rows(uint32_t a[4][4], const uint16_t* tile, int row0, int lane) {
  const uint16_t* at = tile + (row0 + lane % 8 + (lane / 8) % 2 * 8) * kPitch + lane / 16 * 8;
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) load_matrices(a[ks], at + ks * 16);
}

// acc[n] (kTiles column tiles of 8: 8 kTiles columns) = A (16 x 64, fragments a) times the transpose of
// the first 8 kTiles rows of `rows`: column n of the result is row n (k runs along the rows' memory). One
// ldmatrix holds a column tile's B fragments of two k-steps: its rows at features 0-7, 8-15, 16-23, 24-31
// of the pair.
template <int kTiles = 8>
__device__ __forceinline__ void product_with_rows(Acc acc[kTiles], const uint32_t a[4][4], const uint16_t* rows,
                                                  int lane) {
  clear<kTiles>(acc);
  const uint16_t* at = rows + lane % 8 * kPitch + lane / 8 * 8;
#pragma unroll
  for (int n = 0; n < kTiles; ++n)
#pragma unroll
    for (int pair = 0; pair < 2; ++pair) {
      uint32_t b[4];
      load_matrices(b, at + n * 8 * kPitch + pair * 32);
      mma_bf16(acc[n], a[2 * pair], b[0], b[1]);
      mma_bf16(acc[n], a[2 * pair + 1], b[2], b[3]);
    }
}

// acc[n] += P (16 x 16 kSteps: 2 kSteps accumulators of 16 x 8, rounded to bf16 pairs) times the first
// 16 kSteps rows of a row-major operand (row k holds its 64 columns), read transposed: ldmatrix.trans
// hands each lane (k 2t..2t+1, column g), the B fragment. One call holds two column tiles' fragments of
// a k-step: k 0-7 / 8-15 by columns 0-7 / 8-15 of the pair.
template <int kSteps = 4>
__device__ __forceinline__ void accumulate_product(Acc acc[8], const Acc p[2 * kSteps], const uint16_t* rows, int lane) {
  const uint16_t* at = rows + (lane % 8 + (lane / 8) % 2 * 8) * kPitch + lane / 16 * 8;
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    const uint32_t a[4] = {pack_bf16x2(p[2 * ks].c[0], p[2 * ks].c[1]), pack_bf16x2(p[2 * ks].c[2], p[2 * ks].c[3]),
                           pack_bf16x2(p[2 * ks + 1].c[0], p[2 * ks + 1].c[1]),
                           pack_bf16x2(p[2 * ks + 1].c[2], p[2 * ks + 1].c[3])};
#pragma unroll
    for (int pair = 0; pair < 4; ++pair) {
      uint32_t b[4];
      load_matrices<true>(b, at + ks * 16 * kPitch + pair * 16);
      mma_bf16(acc[2 * pair], a, b[0], b[1]);
      mma_bf16(acc[2 * pair + 1], a, b[2], b[3]);
    }
  }
}

constexpr int kThreads = kWarps * 32;  // every kernel's block

// cp.async: copies one W (16 or 4 bytes) from global `src` to shared `dst` without the thread waiting for
// it; zeros when !valid (src is not read then, but must be a valid address). Copies issued since the last
// commit_copies() form a group; wait_copies<n>() returns when all but the newest n groups have landed in
// shared memory (the thread's own copies: a __syncthreads() after it makes every thread's visible).
template <typename W>
__device__ __forceinline__ void copy_async(void* dst, const void* src, bool valid) {
  static_assert(sizeof(W) == 16 || sizeof(W) == 4, "cp.async words of 16 or 4 bytes");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int bytes = valid ? static_cast<int>(sizeof(W)) : 0;
  if constexpr (sizeof(W) == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src), "r"(bytes)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)), "l"(src), "r"(bytes)
                 : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void commit_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int kNewest>
__device__ __forceinline__ void wait_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kNewest) : "memory");
#endif
}

// The rows of one operand of a head: row 0 at `head`, rows `position` elements apart, `count` rows.
struct HeadRows {
  const uint16_t* head;
  long long position, count;
};

// Issues the copies of rows [first, first + 64) of `src` into a row-major (64, kPitch) tile, all threads;
// rows past count are zeros. W is the word a thread copies: uint4 (8 features; every row must start on a
// 16-byte boundary: sixteen_byte_rows on the host) or uint32_t (2 features). A warp's copies cover whole
// 128-byte rows, so the shared stores are conflict-free; no tile is stored transposed (ldmatrix.trans
// reads the transposes), which is what made the stores of the kernels before these 8-way conflicted.
template <typename W>
__device__ __forceinline__ void copy_tile(uint16_t* tile, const HeadRows& src, long long first) {
  constexpr int kFeatures = static_cast<int>(sizeof(W)) / 2;
  constexpr int kWordsARow = kHead / kFeatures;
  constexpr int kRowsAPass = kThreads / kWordsARow;  // rows the block's threads cover with one word each
  static_assert(kThreads % kWordsARow == 0 && kBlockRows % kRowsAPass == 0, "whole rows a pass");
  const int r0 = static_cast<int>(threadIdx.x) / kWordsARow, d = kFeatures * (static_cast<int>(threadIdx.x) % kWordsARow);
#pragma unroll
  for (int u = 0; u < kBlockRows / kRowsAPass; ++u) {
    const int r = r0 + u * kRowsAPass;
    const long long row = first + r;
    const bool valid = row < src.count;
    copy_async<W>(tile + r * kPitch + d, src.head + (valid ? row * src.position : 0) + d, valid);
  }
}

// Issues the copies of values[first, first + 64) into `tile` (zeros past count), threads 0-63: a tile's
// key padding or its queries' statistics.
__device__ __forceinline__ void copy_floats(float* tile, const float* values, long long count, long long first) {
  if (threadIdx.x < kKeys) {
    const long long i = first + threadIdx.x;
    copy_async<float>(tile + threadIdx.x, values + (i < count ? i : 0), i < count);
  }
}

// Whether column c of a key tile is a padded key (pad_tile: the tile's copy of the (B, Lk) key padding,
// null when the call has none).
__device__ __forceinline__ bool padded_key(const float* pad_tile, int c) { return pad_tile != nullptr && pad_tile[c] != 0.0f; }

// A key tile of the forward and dQ kernels: K and V rows [t0, t0 + 64) and their key padding.
template <typename W>
__device__ __forceinline__ void copy_key_tile(uint16_t* k_tile, uint16_t* v_tile, float* pad_tile, const HeadRows& keys,
                                              const HeadRows& values, const float* pad_row, long long t0) {
  copy_tile<W>(k_tile, keys, t0);
  copy_tile<W>(v_tile, values, t0);
  if (pad_row != nullptr) copy_floats(pad_tile, pad_row, keys.count, t0);
}

constexpr int kTile = kBlockRows * kPitch;  // bf16 elements of a (64, kPitch) tile

// The backward kernels' shared memory, 55.5 KB (dynamic: above the 48 KB a block gets without asking): the
// block's own 64 rows of two operands, read for their A fragments at each product (held in registers
// through the loop, they left both kernels short of registers: spills at 255), and the streamed tiles of
// two operands, two buffers deep, with a row of floats each.
struct BackwardShared {
  uint16_t own[2][kTile];          // dQ: Q and dO of the block's queries; dK/dV: K and V of its keys
  uint16_t streamed[2][2][kTile];  // [buffer][operand] dQ: K, V; dK/dV: Q, dO
  float floats[2][2][kKeys];       // [buffer][row] dQ: the keys' padding; dK/dV: the queries' lse and D
  float stats[kBlockRows][2];      // dQ: lse and D of the block's queries
};

__device__ __forceinline__ BackwardShared& backward_shared() {
  extern __shared__ __align__(16) unsigned char dynamic_shared[];
  return *reinterpret_cast<BackwardShared*>(dynamic_shared);
}

// The A fragments of this warp's 16 rows of `own` (16 x 64) times the transpose of the first 8 kTiles
// rows of `rows`, the fragments loaded for the product (product_with_rows).
template <int kTiles = 8>
__device__ __forceinline__ void product_of_rows(Acc acc[kTiles], const uint16_t* own, const uint16_t* rows, int warp,
                                                int lane) {
  uint32_t a[4][4];
  load_a_rows(a, own, warp * 16, lane);
  product_with_rows<kTiles>(acc, a, rows, lane);
}

// The head of each streaming loop: once every warp is done with the other buffer (the tile before),
// issue the next tile into it (when there is one, `issue_next`), then wait until this tile's copies (and
// all issued before them) have landed and every thread sees them; the next stays in flight.
template <typename IssueNext>
__device__ __forceinline__ void advance_tiles(bool more, IssueNext&& issue_next) {
  __syncthreads();
  if (more) issue_next();
  commit_copies();
  wait_copies<1>();
  __syncthreads();
}

// The backward kernels' first copies, one group: the block's own 64 rows of two operands from `first`,
// and the first streamed tile when there is one (`issue_first`).
template <typename W, typename IssueFirst>
__device__ __forceinline__ void start_backward_block(BackwardShared& sh, const HeadRows& a, const HeadRows& b,
                                                     long long first, bool any_tile, IssueFirst&& issue_first) {
  copy_tile<W>(sh.own[0], a, first);
  copy_tile<W>(sh.own[1], b, first);
  if (any_tile) issue_first();
  commit_copies();
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

// Whether the tile of queries [i0, i0 + 64) and keys [j0, j0 + 64) needs no mask: all of them inside
// the call, no key padding, and the pattern lets every query see every key (under a causal mask the
// tiles below the diagonal: 28 of the 36 a head at L 512).
__device__ __forceinline__ bool unmasked_tile(const AttentionShape& s, const float* pad, long long i0, long long j0) {
  return pad == nullptr && i0 + kBlockRows <= s.Lq && j0 + kKeys <= s.Lk &&
         s.pattern.sees_all(i0, i0 + kBlockRows - 1, j0, j0 + kKeys - 1);
}

// One key tile of the forward's online softmax, for a warp's 16 rows (rows[0] and rows[1]: the lane's
// two): the tile's scores S (unscaled) become the weights P Z in place (0 where the query does not see
// the key), the rows' running max m rises to the tile's (the quad's max), the lane's share l of the
// row sum and the output accumulators o are rescaled by exp(m_old - m_new). NaN scores stay NaN (the
// SIMT kernels' rule: a NaN reaches the row's output and lse). kMasked false: a tile that needs no mask
// (unmasked_tile), where the per-element checks are left out.
template <bool kMasked>
__device__ __forceinline__ void softmax_tile(Acc sc[8], Acc o[8], float m[2], float l[2], const AttentionShape& s,
                                             const AttentionDropout& drop, const float* pad_tile, long long b, long long h,
                                             const long long rows[2], long long t0, int t) {
  const float scale = static_cast<float>(s.scale);
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const long long i = rows[e / 2], j = t0 + n * 8 + 2 * t + (e % 2);
      const bool sees =
          !kMasked || (i < s.Lq && j < s.Lk && !padded_key(pad_tile, static_cast<int>(j - t0)) && s.pattern.sees(i, j));
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

// The key tiles stream through two buffers: the copies of tile n + 1 are issued (cp.async) before the
// products of tile n, so their latency hides behind them, and no thread holds words in registers on the way.
template <typename W>
__global__ void __launch_bounds__(kThreads) tc_forward_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                                              const float* pad, AttentionShape s, AttentionDropout drop,
                                                              uint16_t* out, float* lse) {
  drop.offset = PhiloxOffset{drop.offset.value()};
  __shared__ __align__(16) uint16_t qs[kBlockRows * kPitch], ks[2][kKeys * kPitch], vs[2][kKeys * kPitch];
  __shared__ float pad_tile[2][kKeys];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane % 4;
  const long long bh = blockIdx.x, b = bh / s.H, h = bh % s.H;
  const long long i0 = heavy_first(blockIdx.y) * kBlockRows;
  const HeadRows keys{k + s.k.at(0, b, h), s.k.position, s.Lk}, values{v + s.v.at(0, b, h), s.v.position, s.Lk};
  const float* pad_row = pad != nullptr ? pad + b * s.Lk : nullptr;
  long long begin, end;
  s.pattern.keys_seen_by(i0, min(i0 + kBlockRows, s.Lq) - 1, s.Lk, begin, end);
  const long long first_tile = begin - begin % kKeys;
  copy_tile<W>(qs, HeadRows{q + s.q.at(0, b, h), s.q.position, s.Lq}, i0);
  commit_copies();
  if (first_tile <= end) copy_key_tile<W>(ks[0], vs[0], pad_tile[0], keys, values, pad_row, first_tile);
  commit_copies();
  wait_copies<1>();  // the queries (the first key tile may still be on its way)
  __syncthreads();
  uint32_t qa[4][4];
  load_a_rows(qa, qs, warp * 16, lane);
  const long long rows[2] = {i0 + warp * 16 + lane / 4, i0 + warp * 16 + lane / 4 + 8};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  Acc o[8];
  clear(o);
  int buf = 0;
  for (long long t0 = first_tile; t0 <= end; t0 += kKeys, buf ^= 1) {
    advance_tiles(t0 + kKeys <= end, [&] {
      copy_key_tile<W>(ks[buf ^ 1], vs[buf ^ 1], pad_tile[buf ^ 1], keys, values, pad_row, t0 + kKeys);
    });
    Acc sc[8];
    product_with_rows(sc, qa, ks[buf], lane);
    if (unmasked_tile(s, pad, i0, t0))
      softmax_tile<false>(sc, o, m, l, s, drop, nullptr, b, h, rows, t0, t);
    else
      softmax_tile<true>(sc, o, m, l, s, drop, pad_row != nullptr ? pad_tile[buf] : nullptr, b, h, rows, t0, t);
    accumulate_product(o, sc, vs[buf], lane);
  }
  // (no copies in flight here: the last group committed, the loop's last or the empty first key tile's, is empty)
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

// One weight's P Z and dS = P (Z dP - D), P = exp(scale S - lse), where query i sees key j (else both 0).
// lse is -inf only for a query that sees no key, or whose scores are all -inf: 0, not NaN, either way.
struct WeightGradient {
  float pz, ds;
};
__device__ __forceinline__ WeightGradient weight_gradient(bool sees, float score, float dp, float lse, float d,
                                                          const AttentionShape& s, const AttentionDropout& drop,
                                                          long long b, long long h, long long i, long long j) {
  if (!sees || lse == -INFINITY) return {0.0f, 0.0f};
  const float p = __expf(static_cast<float>(s.scale) * score - lse);
  const float z = drop.factor<float>(s.row(b, h, i) * s.Lk + j);
  return {p * z, p * (z * dp - d)};
}

// The lse and D of a lane's two rows.
struct RowStatistics {
  float lse[2], d[2];
};

// A key tile's scores S (unscaled) of a warp's 16 rows become dS = P (Z dP - D) in place, P = exp(scale S
// - lse), 0 where the query does not see the key; kMasked false: a tile that needs no mask (unmasked_tile).
template <bool kMasked>
__device__ __forceinline__ void scores_to_ds(Acc sc[8], const Acc dp[8], const AttentionShape& s,
                                             const AttentionDropout& drop, const float* padding, long long b, long long h,
                                             const long long rows[2], const RowStatistics& stats, long long t0, int t) {
#pragma unroll
  for (int n = 0; n < 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e / 2, c = n * 8 + 2 * t + (e % 2);
      const long long i = rows[r], j = t0 + c;
      const bool sees = !kMasked || (i < s.Lq && j < s.Lk && !padded_key(padding, c) && s.pattern.sees(i, j));
      sc[n].c[e] = weight_gradient(sees, sc[n].c[e], dp[n].c[e], stats.lse[r], stats.d[r], s, drop, b, h, i, j).ds;
    }
}

// Backward (1): D_i and dq_i, 16 queries a warp; the key tiles stream through two buffers as the
// forward's, and dS K reads K's tile transposed (ldmatrix.trans) from where S = Q K^T read it.
template <typename W>
__global__ void __launch_bounds__(kThreads) tc_backward_dq_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                                                  const float* pad, AttentionShape s,
                                                                  AttentionDropout drop, const uint16_t* out,
                                                                  const uint16_t* grad_out, const float* lse,
                                                                  float* row_dot, uint16_t* gq) {
  drop.offset = PhiloxOffset{drop.offset.value()};
  BackwardShared& sh = backward_shared();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane % 4;
  const long long bh = blockIdx.x, b = bh / s.H, h = bh % s.H;
  const long long i0 = heavy_first(blockIdx.y) * kBlockRows;
  const HeadRows keys{k + s.k.at(0, b, h), s.k.position, s.Lk}, values{v + s.v.at(0, b, h), s.v.position, s.Lk};
  const float* pad_row = pad != nullptr ? pad + b * s.Lk : nullptr;
  const auto copy_keys = [&](int to, long long t0) {
    copy_key_tile<W>(sh.streamed[to][0], sh.streamed[to][1], sh.floats[to][0], keys, values, pad_row, t0);
  };
  long long begin, end;
  s.pattern.keys_seen_by(i0, min(i0 + kBlockRows, s.Lq) - 1, s.Lk, begin, end);
  const long long first_tile = begin - begin % kKeys;
  start_backward_block<W>(sh, HeadRows{q + s.q.at(0, b, h), s.q.position, s.Lq},
                          HeadRows{grad_out + s.o.at(0, b, h), s.o.position, s.Lq}, i0, first_tile <= end,
                          [&] { copy_keys(0, first_tile); });
  block_row_stats(sh.stats, s, out, grad_out, lse, row_dot, b, h, i0, warp, lane);
  __syncthreads();
  const int local[2] = {warp * 16 + lane / 4, warp * 16 + lane / 4 + 8};
  const long long rows[2] = {i0 + local[0], i0 + local[1]};
  const RowStatistics stats{{sh.stats[local[0]][0], sh.stats[local[1]][0]}, {sh.stats[local[0]][1], sh.stats[local[1]][1]}};
  Acc dq[8];
  clear(dq);
  const float scale = static_cast<float>(s.scale);
  int buf = 0;
  for (long long t0 = first_tile; t0 <= end; t0 += kKeys, buf ^= 1) {
    advance_tiles(t0 + kKeys <= end, [&] { copy_keys(buf ^ 1, t0 + kKeys); });
    const uint16_t *k_tile = sh.streamed[buf][0], *v_tile = sh.streamed[buf][1];
    const float* padding = pad_row != nullptr ? sh.floats[buf][0] : nullptr;
    Acc sc[8], dp[8];
    product_of_rows(sc, sh.own[0], k_tile, warp, lane);  // S = Q K^T
    product_of_rows(dp, sh.own[1], v_tile, warp, lane);  // dP = dO V^T
    if (unmasked_tile(s, pad, i0, t0))
      scores_to_ds<false>(sc, dp, s, drop, nullptr, b, h, rows, stats, t0, t);
    else
      scores_to_ds<true>(sc, dp, s, drop, padding, b, h, rows, stats, t0, t);
    accumulate_product(dq, sc, k_tile, lane);
  }
  wait_copies<0>();  // (a block without key tiles leaves none in flight at its exit)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (rows[r] >= s.Lq) continue;
#pragma unroll
    for (int n = 0; n < 8; ++n)
      *reinterpret_cast<uint32_t*>(gq + s.q_at(rows[r], b, h) + n * 8 + 2 * t) =
          pack_bf16x2(scale * dq[n].c[2 * r], scale * dq[n].c[2 * r + 1]);
  }
}

// 32 queries of a query tile: the first, and their lse and D (shared memory).
struct QueryTile {
  long long first;
  const float *lse, *d;
};

// S^T (unscaled) and dP^T of a warp's 16 keys and 32 queries become dS^T and (P Z)^T in place (0 where
// the query does not see the key); kMasked false: a tile that needs no mask (unmasked_tile).
template <bool kMasked>
__device__ __forceinline__ void transposed_scores_to_ds(Acc st[4], Acc dpt[4], const AttentionShape& s,
                                                        const AttentionDropout& drop, long long b, long long h,
                                                        const long long keys[2], const bool visible[2],
                                                        const QueryTile& queries, int t) {
#pragma unroll
  for (int n = 0; n < 4; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e / 2, c = n * 8 + 2 * t + (e % 2);
      const long long i = queries.first + c, j = keys[r];
      const bool sees = !kMasked || (visible[r] && i < s.Lq && s.pattern.sees(i, j));
      const WeightGradient w =
          weight_gradient(sees, st[n].c[e], dpt[n].c[e], queries.lse[c], queries.d[c], s, drop, b, h, i, j);
      dpt[n].c[e] = w.pz;
      st[n].c[e] = w.ds;
    }
}

// Backward (2): dk_j and dv_j, 16 keys a warp, over tiles of the queries that can see the block's keys,
// streamed through two buffers with their lse and D; (P Z)^T dO and dS^T Q read the dO and Q tiles
// transposed (ldmatrix.trans) from where S^T = K Q^T and dP^T = V dO^T read them.
template <typename W>
__global__ void __launch_bounds__(kThreads) tc_backward_dkv_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                                                   const float* pad, AttentionShape s,
                                                                   AttentionDropout drop, const uint16_t* grad_out,
                                                                   const float* lse, const float* row_dot, uint16_t* gk,
                                                                   uint16_t* gv) {
  drop.offset = PhiloxOffset{drop.offset.value()};
  BackwardShared& sh = backward_shared();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane % 4;
  const long long bh = blockIdx.x, b = bh / s.H, h = bh % s.H;
  const long long j0 = static_cast<long long>(blockIdx.y) * kBlockRows;
  const HeadRows queries{q + s.q.at(0, b, h), s.q.position, s.Lq},
      grads{grad_out + s.o.at(0, b, h), s.o.position, s.Lq};
  const float *lse_row = lse + s.row(b, h, 0), *dot_row = row_dot + s.row(b, h, 0);
  const auto copy_queries = [&](int to, long long t0) {
    copy_tile<W>(sh.streamed[to][0], queries, t0);
    copy_tile<W>(sh.streamed[to][1], grads, t0);
    copy_floats(sh.floats[to][0], lse_row, s.Lq, t0);
    copy_floats(sh.floats[to][1], dot_row, s.Lq, t0);
  };
  long long begin, end;  // the queries that can see the block's keys
  s.pattern.queries_seeing(j0, min(j0 + kBlockRows, s.Lk) - 1, s.Lq, begin, end);
  const long long first_tile = begin - begin % kKeys;
  start_backward_block<W>(sh, HeadRows{k + s.k.at(0, b, h), s.k.position, s.Lk},
                          HeadRows{v + s.v.at(0, b, h), s.v.position, s.Lk}, j0, first_tile <= end,
                          [&] { copy_queries(0, first_tile); });
  const long long keys[2] = {j0 + warp * 16 + lane / 4, j0 + warp * 16 + lane / 4 + 8};
  const bool visible[2] = {keys[0] < s.Lk && !s.key_padded(pad, b, keys[0]), keys[1] < s.Lk && !s.key_padded(pad, b, keys[1])};
  Acc dk[8], dv[8];
  clear(dk);
  clear(dv);
  const float scale = static_cast<float>(s.scale);
  int buf = 0;
  for (long long t0 = first_tile; t0 <= end; t0 += kKeys, buf ^= 1) {
    advance_tiles(t0 + kKeys <= end, [&] { copy_queries(buf ^ 1, t0 + kKeys); });
    const float *tile_lse = sh.floats[buf][0], *tile_d = sh.floats[buf][1];
    const bool whole = unmasked_tile(s, pad, t0, j0);
    // In two halves of 32 queries, so that S^T and dP^T of half a tile are live at a time (the whole
    // tile's left the kernel short of registers).
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const uint16_t *q_half = sh.streamed[buf][0] + half * 32 * kPitch, *go_half = sh.streamed[buf][1] + half * 32 * kPitch;
      Acc st[4], dpt[4];
      product_of_rows<4>(st, sh.own[0], q_half, warp, lane);    // S^T = K Q^T: rows keys, columns the half's queries
      product_of_rows<4>(dpt, sh.own[1], go_half, warp, lane);  // dP^T = V dO^T
      const QueryTile queries_here{t0 + half * 32, tile_lse + half * 32, tile_d + half * 32};
      if (whole)
        transposed_scores_to_ds<false>(st, dpt, s, drop, b, h, keys, visible, queries_here, t);
      else
        transposed_scores_to_ds<true>(st, dpt, s, drop, b, h, keys, visible, queries_here, t);
      accumulate_product<2>(dv, dpt, go_half, lane);
      accumulate_product<2>(dk, st, q_half, lane);
    }
  }
  wait_copies<0>();  // (a block without query tiles leaves none in flight at its exit)
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

bool tensor_cores_allowed() {
  static const bool switched_off = environment_says("SRU_ATTENTION_SIMT", "1");
  return !switched_off && g_tensor_cores_allowed.load();
}

bool strides_multiple_of(const HeadStrides& st, long long n) {
  return st.position % n == 0 && st.batch % n == 0 && st.head % n == 0;
}
bool aligned_to(const Tensor& t, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % bytes == 0; }

// Whether every row of 64 features the kernels load starts on a 16-byte boundary (the tensors' data and
// every stride a multiple of 8 elements), for copy_tile's 16-byte words; the calls that cannot are counted.
bool sixteen_byte_rows(const AttentionShape& s, std::initializer_list<const Tensor*> loaded) {
  bool wide = true;
  for (const HeadStrides* st : {&s.q, &s.k, &s.v, &s.o}) wide = wide && strides_multiple_of(*st, 8);
  for (const Tensor* t : loaded) wide = wide && aligned_to(*t, 16);
  if (!wide) g_narrow_calls.fetch_add(1);
  return wide;
}

// Whether the kernels can run on device `index`, asked once: built from code for 8.0 or later (a build
// whose PTX is for an older card would be compiled by the driver without the mma path, which traps), and
// the backward kernels allowed their 55.5 KB of dynamic shared memory (BackwardShared; every card of 8.0
// and later has 99 KB or more a block).
bool kernels_ready(int index) {
  constexpr int kDevices = 64;
  static std::once_flag once[kDevices];
  static bool ready[kDevices];
  if (index < 0 || index >= kDevices) return false;
  std::call_once(once[index], [index] {
    int before = 0;
    cudaGetDevice(&before);
    cudaSetDevice(index);
    cudaFuncAttributes attributes{};
    bool ok = cudaFuncGetAttributes(&attributes, tc_forward_kernel<uint4>) == cudaSuccess && attributes.ptxVersion >= 80;
    constexpr int kBytes = static_cast<int>(sizeof(BackwardShared));
    for (const void* kernel : {reinterpret_cast<const void*>(tc_backward_dq_kernel<uint4>),
                               reinterpret_cast<const void*>(tc_backward_dq_kernel<uint32_t>),
                               reinterpret_cast<const void*>(tc_backward_dkv_kernel<uint4>),
                               reinterpret_cast<const void*>(tc_backward_dkv_kernel<uint32_t>)})
      ok = ok && cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes) == cudaSuccess;
    ready[index] = ok;
    cudaGetLastError();
    cudaSetDevice(before);
  });
  return ready[index];
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
  if (capability_of(in.q.device().index) < 80 || !kernels_ready(in.q.device().index)) return false;
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
  // 16-byte words where every row allows them (copy_tile), else 4-byte ones.
  const bool wide = sixteen_byte_rows(s, {&in.q, &in.k, &in.v});
  auto* const kernel = wide ? tc_forward_kernel<uint4> : tc_forward_kernel<uint32_t>;
  kernel<<<tc_grid(s.B * s.H, s.Lq), kThreads, 0, stream_of(in.q)>>>(raw(in.q), raw(in.k), raw(in.v),
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
    dq_kernel<<<tc_grid(s.B * s.H, s.Lq), kThreads, sizeof(BackwardShared), stream>>>(
        raw(in.q), raw(in.k), raw(in.v), in.padding_data(), s, drop, raw(out), raw(grad_out), lse.data<float>(),
        row_dot.data<float>(), written(gq));
  if (s.Lk > 0)
    dkv_kernel<<<tc_grid(s.B * s.H, s.Lk), kThreads, sizeof(BackwardShared), stream>>>(
        raw(in.q), raw(in.k), raw(in.v), in.padding_data(), s, drop, raw(grad_out), lse.data<float>(),
        row_dot.data<float>(), written(gk), written(gv));
  SRU_CUDA_LAUNCH_CHECK("tensor-core attention backward kernels");
}

}  // namespace sru::cuda
