// The AVX512-BF16 kernels of ops/cpu/gemm_bf16.h, compiled for AVX-512F/BW/VL + BF16 inside a target
// region that follows the includes (so no inline function or template of a header gets an AVX-512
// body that the linker could keep for the whole program) and called only on processors that have them
// (ops/cpu/gemm_bf16.cpp checks).
//
// BLIS's scheme. K in blocks of kKc = 256 values, N in blocks of kNc = 2048 columns; per block, op(b)
// is packed into panels of kNr = 32 columns and op(a) into panels of kMr = 12 rows, each as 32-bit
// words holding a pair of bfloat16 values along k (k in the low half, k + 1 in the high half), the
// operand layout of vdpbf16ps:
//   b panel: word (p, j) = b(2p, j) | b(2p + 1, j) << 16, at p * 32 + j      (K/2 x 32 words)
//   a panel: word (p, i) = a(i, 2p) | a(i, 2p + 1) << 16, at p * 12 + i      (K/2 x 12 words)
// The micro-kernel holds a 12 x 32 tile of c in 24 zmm accumulators; per pair p it loads the b
// panel's two vectors of 16 words and broadcasts each row's a word: 24 vdpbf16ps, each lane
//   acc(i, j) += a(i, 2p + 1) b(2p + 1, j) + a(i, 2p) b(2p, j)     (exact products, FP32 adds).
// A b panel (128 pairs x 32 words = 16 KB) stays in L1 while a task runs it against up to 8 a panels.
// Packing rounds float32 values to bfloat16 with core/float16.h's rule (to nearest even, NaN ->
// 0x7FFF), 16 at a time; edges are padded with zeros (rows, columns, the odd k of the last pair).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "core/parallel.h"
#include "ops/cpu/gemm_bf16.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16,fma")
#endif

namespace sru::cpu::avx512bf16 {

namespace {

constexpr int kMr = 12, kNr = 32;
constexpr int64_t kKc = kBf16DotKBlock;
constexpr int64_t kNc = 2048;
constexpr int64_t kRowPanelsPerTask = 8;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A 64-byte aligned word buffer that only grows (one per thread that calls the GEMM).
class PackBuffer {
 public:
  PackBuffer() = default;
  PackBuffer(const PackBuffer&) = delete;
  PackBuffer& operator=(const PackBuffer&) = delete;
  ~PackBuffer() { std::free(words_); }
  uint32_t* words(int64_t n) {
    if (n > capacity_) {
      std::free(words_);
      const int64_t bytes = ceil_div(n * 4, 64) * 64;
      words_ = static_cast<uint32_t*>(std::aligned_alloc(64, static_cast<size_t>(bytes)));
      SRU_CHECK(words_ != nullptr, "bf16 GEMM: out of memory packing ", bytes, " bytes");
      capacity_ = n;
    }
    return words_;
  }

 private:
  uint32_t* words_ = nullptr;
  int64_t capacity_ = 0;
};

__mmask16 first_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : static_cast<__mmask16>((1u << n) - 1u);
}

// 16 float32 lanes rounded to bfloat16 (core/float16.h's rule: to nearest even, NaN -> 0x7FFF), the
// bits in each lane's high half (low halves: leftovers of the rounding, masked or shifted out by the callers).
inline __m512i rounded_to_high_halves(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lowest_kept = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lowest_kept));
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
  return _mm512_mask_mov_epi32(rounded, nan, _mm512_set1_epi32(0x7FFF0000));
}

// Up to 16 values as 32-bit lanes whose high halves hold their bfloat16 bits; lanes outside m are zero.
inline __m512i bf16_in_high_halves(const float* p, __mmask16 m) {
  return rounded_to_high_halves(_mm512_maskz_loadu_ps(m, p));
}
inline __m512i bf16_in_high_halves(const bf16* p, __mmask16 m) {
  return _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16);
}

// Packs the operand element(l, k) = src[l * lane_stride + k * k_stride], lanes [0, lanes) and
// k [0, kc), into a panel of W lanes (layout above); lanes past `lanes` and the k past kc are zero.
// Row-major operands have k_stride 1 (a, or b transposed) or lane_stride 1 (a transposed, or b).
template <int W, typename In>
void pack_panel(const In* src, int64_t lane_stride, int64_t k_stride, int lanes, int64_t kc, uint32_t* out) {
  const int64_t pairs = ceil_div(kc, 2);
  if (k_stride == 1) {
    // Pairs contiguous along each lane (a, or b transposed): 16 values (8 words) a load, narrowed to their high halves.
    alignas(32) uint32_t eight[8];
    for (int l = 0; l < lanes; ++l) {
      const In* row = src + l * lane_stride;
      for (int64_t p0 = 0; p0 < pairs; p0 += 8) {
        const __m512i v = bf16_in_high_halves(row + 2 * p0, first_lanes(kc - 2 * p0));
        _mm256_store_si256(reinterpret_cast<__m256i*>(eight), _mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16)));
        const int64_t n = std::min<int64_t>(8, pairs - p0);
        for (int64_t q = 0; q < n; ++q) out[(p0 + q) * W + l] = eight[q];
      }
    }
    for (int64_t p = 0; p < pairs; ++p)
      for (int l = lanes; l < W; ++l) out[p * W + l] = 0;
    return;
  }
  // Lanes contiguous (lane_stride 1: a transposed, b not): rows k and k + 1 loaded 16 lanes at a time
  // and interleaved into words.
  const __m512i high_half = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  for (int64_t p = 0; p < pairs; ++p) {
    const In* low_row = src + 2 * p * k_stride;
    const bool has_high = 2 * p + 1 < kc;
    for (int l0 = 0; l0 < W; l0 += 16) {
      const __mmask16 m = first_lanes(lanes - l0);
      const __m512i low = _mm512_srli_epi32(bf16_in_high_halves(low_row + l0, m), 16);
      const __m512i high = has_high ? _mm512_and_si512(bf16_in_high_halves(low_row + k_stride + l0, m), high_half)
                                    : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(out + p * W + l0, first_lanes(W - l0), _mm512_or_si512(low, high));
    }
  }
}

// 16 float32 lanes rounded to bfloat16 bits, as 16-bit lanes.
inline __m256i bf16_bits_of(__m512 v) { return _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded_to_high_halves(v), 16)); }

// A tile's share of the epilogue (gemm_bf16.h Bf16Epilogue): its columns' bias, its corner of out.
struct TileEpilogue {
  const float* bias = nullptr;
  bool relu = false;
  bf16* out = nullptr;
  int64_t ldo = 0;
};

// c's tile (rows x cols, at most 12 x 32) from an a panel and a b panel over `pairs` pairs of k:
// c = alpha acc + beta c on K's first block (c not read when beta is 0), c += alpha acc after it; on the
// last block the bias and the ReLU follow, and with ep.out the result goes to out in bf16 (the old
// value for beta read from out; c only holds the partial sums between blocks).
void micro_tile(int64_t pairs, const uint32_t* ap, const uint32_t* bp, float* c, int64_t ldc, int rows, int cols,
                float alpha, float beta, bool first_block, bool last_block, const TileEpilogue& ep) {
  __m512 acc[kMr][2];
#pragma GCC unroll 12
  for (int i = 0; i < kMr; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(bp);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(bp + 16);
#pragma GCC unroll 12
    for (int i = 0; i < kMr; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[i]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
    ap += kMr;
    bp += kNr;
  }
  const __mmask16 m0 = first_lanes(cols), m1 = first_lanes(cols - 16);
  const __m512 alpha_v = _mm512_set1_ps(alpha), beta_v = _mm512_set1_ps(beta);
  const bool read_c = !first_block || beta != 0.0f;
  const bool old_in_out = first_block && ep.out != nullptr;  // beta's old value is out's (bf16)
  const __m512 c_factor = first_block ? beta_v : _mm512_set1_ps(1.0f);
  const bool finish = last_block && (ep.bias != nullptr || ep.relu);
  const __m512 bias0 = ep.bias ? _mm512_maskz_loadu_ps(m0, ep.bias) : _mm512_setzero_ps();
  const __m512 bias1 = ep.bias ? _mm512_maskz_loadu_ps(m1, ep.bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
  for (int i = 0; i < kMr; ++i) {
    if (i >= rows) break;
    float* row = c != nullptr ? c + i * ldc : nullptr;
    __m512 v0 = _mm512_mul_ps(acc[i][0], alpha_v), v1 = _mm512_mul_ps(acc[i][1], alpha_v);
    if (read_c) {
      __m512 old0, old1;
      if (old_in_out) {
        const bf16* o = ep.out + i * ep.ldo;
        old0 = _mm512_castsi512_ps(bf16_in_high_halves(o, m0));  // widening bf16 is exact
        old1 = _mm512_castsi512_ps(bf16_in_high_halves(o + 16, m1));
      } else {
        old0 = _mm512_maskz_loadu_ps(m0, row);
        old1 = _mm512_maskz_loadu_ps(m1, row + 16);
      }
      v0 = _mm512_add_ps(v0, _mm512_mul_ps(c_factor, old0));
      v1 = _mm512_add_ps(v1, _mm512_mul_ps(c_factor, old1));
    }
    if (finish) {
      // (v > 0 ? v : 0, as relu: maxps returns its second operand, 0, for a NaN first one)
      v0 = _mm512_add_ps(v0, bias0);
      v1 = _mm512_add_ps(v1, bias1);
      if (ep.relu) {
        v0 = _mm512_max_ps(v0, _mm512_setzero_ps());
        v1 = _mm512_max_ps(v1, _mm512_setzero_ps());
      }
    }
    if (last_block && ep.out != nullptr) {
      bf16* o = ep.out + i * ep.ldo;
      _mm256_mask_storeu_epi16(o, m0, bf16_bits_of(v0));
      _mm256_mask_storeu_epi16(o + 16, m1, bf16_bits_of(v1));
      continue;
    }
    _mm512_mask_storeu_ps(row, m0, v0);
    _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

// fn(i) for i in [0, n), spread over `threads` threads in contiguous chunks.
template <typename F>
void run_spread(int64_t n, int threads, const F& fn) {
  const int t = static_cast<int>(std::min<int64_t>(threads, n));
  if (t <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
#pragma omp parallel for num_threads(t) schedule(static)
  for (int64_t i = 0; i < n; ++i) fn(i);
}

template <typename In>
void gemm_impl(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const In* a, int64_t lda, const In* b,
               int64_t ldb, float beta, float* c, int64_t ldc, const Bf16Epilogue& ep) {
  if (M <= 0 || N <= 0 || K <= 0) return;  // the caller handles K = 0 (c = beta c)
  const int threads = omp_in_parallel() ? 1 : num_threads();
  // op(a)(i, k) and op(b)(k, j) as element(lane, k) of pack_panel.
  const int64_t a_lane_stride = ta ? 1 : lda, a_k_stride = ta ? lda : 1;
  const int64_t b_lane_stride = tb ? ldb : 1, b_k_stride = tb ? 1 : ldb;
  const int64_t row_panels = ceil_div(M, kMr), row_groups = ceil_div(row_panels, kRowPanelsPerTask);
  thread_local PackBuffer a_buffer, b_buffer;
  for (int64_t k0 = 0; k0 < K; k0 += kKc) {
    const int64_t kc = std::min(kKc, K - k0), pairs = ceil_div(kc, 2);
    uint32_t* a_pack = a_buffer.words(row_panels * kMr * pairs);
    run_spread(row_panels, threads, [&](int64_t r) {
      pack_panel<kMr>(a + r * kMr * a_lane_stride + k0 * a_k_stride, a_lane_stride, a_k_stride,
                      static_cast<int>(std::min<int64_t>(kMr, M - r * kMr)), kc, a_pack + r * kMr * pairs);
    });
    for (int64_t n0 = 0; n0 < N; n0 += kNc) {
      const int64_t nc = std::min(kNc, N - n0), col_panels = ceil_div(nc, kNr);
      uint32_t* b_pack = b_buffer.words(col_panels * kNr * pairs);
      run_spread(col_panels, threads, [&](int64_t q) {
        pack_panel<kNr>(b + (n0 + q * kNr) * b_lane_stride + k0 * b_k_stride, b_lane_stride, b_k_stride,
                        static_cast<int>(std::min<int64_t>(kNr, nc - q * kNr)), kc, b_pack + q * kNr * pairs);
      });
      run_spread(col_panels * row_groups, threads, [&](int64_t task) {
        const int64_t q = task / row_groups, g = task % row_groups;
        const int cols = static_cast<int>(std::min<int64_t>(kNr, nc - q * kNr));
        const int64_t r_end = std::min(row_panels, (g + 1) * kRowPanelsPerTask);
        for (int64_t r = g * kRowPanelsPerTask; r < r_end; ++r) {
          const int64_t col = n0 + q * kNr;
          const TileEpilogue te{ep.bias ? ep.bias + col : nullptr, ep.relu, ep.out ? ep.out + r * kMr * ep.ldo + col : nullptr,
                                ep.ldo};
          micro_tile(pairs, a_pack + r * kMr * pairs, b_pack + q * kNr * pairs, c ? c + r * kMr * ldc + col : nullptr, ldc,
                     static_cast<int>(std::min<int64_t>(kMr, M - r * kMr)), cols, alpha, beta, k0 == 0, k0 + kc == K, te);
        }
      });
    }
  }
}

}  // namespace

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc, const Bf16Epilogue& ep) {
  gemm_impl(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc, ep);
}
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const bf16* a, int64_t lda, const bf16* b,
          int64_t ldb, float beta, float* c, int64_t ldc, const Bf16Epilogue& ep) {
  gemm_impl(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc, ep);
}

}  // namespace sru::cpu::avx512bf16

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
