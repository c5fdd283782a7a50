// Float32 row primitives of the CPU softmax family: the exp polynomial, row max, sums in double lanes
// (contracts and accuracy: row_exp.h). The AVX2 + FMA and AVX-512 functions carry target attributes
// (the file is compiled for baseline x86-64, with -ffp-contract=off so that no product and sum fuse)
// and run when the processor has them and the CPU kernels' ISA limit allows (ops/sru_recurrence.h
// limit_sru_kernel_isa, srubench --cpu-kernels); the scalar twins perform the same operations in the
// same order, lane by lane. The AVX-512 functions take sixteen floats a step where the AVX2 ones take
// eight, and put elements c and c + 8 into double lane c mod 8 one after the other, as two AVX2 steps
// would: the same bits on every path.
#include "ops/cpu/row_exp.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "ops/sru_recurrence.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define SRU_ROW_EXP_AVX2 1
#endif

namespace sru::cpu::rows {

namespace {

constexpr int kLanes = 8;
constexpr float kLow = -87.33654f;  // below: exp is subnormal, returned as 0
constexpr float kHigh = 88.0f;      // above: +inf (n would reach 128)
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;     // ln 2 = kLn2Hi + kLn2Lo, kLn2Hi with few bits so n kLn2Hi is exact
constexpr float kLn2Lo = -2.12194440e-4f;
// 1/k! for k = 0..7: exp(r)'s Taylor polynomial.
constexpr float kTaylor[8] = {1.0f, 1.0f, 0.5f, 1.0f / 6, 1.0f / 24, 1.0f / 120, 1.0f / 720, 1.0f / 5040};

float exp_scalar(float x) {
  if (std::isnan(x)) return x;
  if (x < kLow) return 0.0f;
  if (x > kHigh) return std::numeric_limits<float>::infinity();
  const float n = std::nearbyint(x * kLog2e);  // ties to even, as _MM_FROUND_TO_NEAREST_INT
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float p = kTaylor[7];
  for (int k = 6; k >= 0; --k) p = std::fma(p, r, kTaylor[k]);
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n, n in [-126, 127]
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

// The largest of a vector's n lanes (none NaN: the vector maxima keep NaN out).
float largest(const float* lanes, int n) {
  float best = lanes[0];
  for (int l = 1; l < n; ++l) best = lanes[l] > best ? lanes[l] : best;
  return best;
}

double add_lanes(const double* lanes) {
  double s = 0.0;
  for (int l = 0; l < kLanes; ++l) s += lanes[l];
  return s;
}

#if SRU_ROW_EXP_AVX2
#define SRU_AVX2_FMA __attribute__((target("avx2,fma")))

bool have_avx2_fma() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return supported;
}
#endif

// Which vector functions run: the widest the processor has within the CPU kernels' ISA limit (an
// AVX-512 processor has FMA; AVX2 needs FMA beside it here).
enum class Path { Scalar, Avx2, Avx512 };
Path path() {
#if SRU_ROW_EXP_AVX2
  switch (sru_kernel_isa_in_use()) {
    case SruKernelIsa::Avx512: return Path::Avx512;
    case SruKernelIsa::Avx2: return have_avx2_fma() ? Path::Avx2 : Path::Scalar;
    case SruKernelIsa::Baseline: break;
  }
#endif
  return Path::Scalar;
}

#if SRU_ROW_EXP_AVX2

// exp_scalar on eight lanes: the clamps pass NaN through (max/min return their second operand when
// either is NaN), whose polynomial is NaN; the range tests are false for NaN.
SRU_AVX2_FMA inline __m256 exp8(__m256 x) {
  const __m256 low = _mm256_set1_ps(kLow), high = _mm256_set1_ps(kHigh);
  const __m256 xc = _mm256_min_ps(high, _mm256_max_ps(low, x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), xc);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kTaylor[7]);
  for (int k = 6; k >= 0; --k) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kTaylor[k]));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  e = _mm256_andnot_ps(_mm256_cmp_ps(x, low, _CMP_LT_OQ), e);
  return _mm256_blendv_ps(e, _mm256_set1_ps(std::numeric_limits<float>::infinity()), _mm256_cmp_ps(x, high, _CMP_GT_OQ));
}

SRU_AVX2_FMA inline void add_to_lanes(__m256 v, __m256d& lo, __m256d& hi) {
  lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

SRU_AVX2_FMA float max_avx2(const float* x, int64_t n, int64_t& done) {
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) m = _mm256_max_ps(_mm256_loadu_ps(x + c), m);  // NaN: keeps m
  alignas(32) float lanes[kLanes];
  _mm256_store_ps(lanes, m);
  done = c;
  return largest(lanes, kLanes);
}

// sum_exp's eight lanes; kStore: also out[c] = the exp (exp_and_sum).
template <bool kStore>
SRU_AVX2_FMA int64_t sum_exp_avx2(const float* x, int64_t n, float shift, float* out, double* lanes) {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  const __m256 s = _mm256_set1_ps(shift);
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + c), s));
    if constexpr (kStore) _mm256_storeu_ps(out + c, e);
    add_to_lanes(e, lo, hi);
  }
  _mm256_storeu_pd(lanes, lo);
  _mm256_storeu_pd(lanes + 4, hi);
  return c;
}

SRU_AVX2_FMA int64_t exp_scaled_avx2(const float* x, int64_t n, float shift, float scale, float* out) {
  const __m256 s = _mm256_set1_ps(shift), k = _mm256_set1_ps(scale);
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    _mm256_storeu_ps(out + c, _mm256_mul_ps(exp8(_mm256_sub_ps(_mm256_loadu_ps(x + c), s)), k));
  return c;
}

SRU_AVX2_FMA int64_t sum_kept_avx2(const float* x, int64_t n, double* lanes, int64_t& count) {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  const __m256 minus_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t c = 0, kept = 0;
  for (; c + kLanes <= n; c += kLanes) {
    const __m256 v = _mm256_loadu_ps(x + c);
    const __m256 keep = _mm256_cmp_ps(v, minus_inf, _CMP_NEQ_UQ);  // NaN is kept, as smoothing_keeps
    add_to_lanes(_mm256_and_ps(keep, v), lo, hi);                  // a dropped lane adds +0
    kept += __builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(keep)));
  }
  _mm256_storeu_pd(lanes, lo);
  _mm256_storeu_pd(lanes + 4, hi);
  count = kept;
  return c;
}

// ---- AVX-512: sixteen floats a step, then at most one eight-float step as above ----
#define SRU_AVX512 __attribute__((target("avx512f,avx2,fma")))
constexpr int kWide = 16;

// exp8 on sixteen lanes, the same operations (the range tests as masks).
SRU_AVX512 inline __m512 exp16(__m512 x) {
  const __m512 low = _mm512_set1_ps(kLow), high = _mm512_set1_ps(kHigh);
  const __m512 xc = _mm512_min_ps(high, _mm512_max_ps(low, x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), xc);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kTaylor[7]);
  for (int k = 6; k >= 0; --k) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kTaylor[k]));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  // Zero below the range (NaN kept: "not less" holds for it), +inf above it.
  const __m512 e = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, low, _CMP_NLT_UQ), _mm512_mul_ps(p, _mm512_castsi512_ps(bits)));
  const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  return _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, high, _CMP_GT_OQ), inf);
}

// Eight floats widened into the eight double lanes; sixteen: the first eight, then the next eight.
SRU_AVX512 inline __m512d add_to_lanes(__m512d lanes, __m256 v) { return _mm512_add_pd(lanes, _mm512_cvtps_pd(v)); }
SRU_AVX512 inline __m512d add16_to_lanes(__m512d lanes, __m512 v) {
  lanes = add_to_lanes(lanes, _mm512_castps512_ps256(v));
  return add_to_lanes(lanes, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

SRU_AVX512 float max_avx512(const float* x, int64_t n, int64_t& done) {
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t c = 0;
  for (; c + kWide <= n; c += kWide) m = _mm512_max_ps(_mm512_loadu_ps(x + c), m);  // NaN: keeps m
  alignas(64) float lanes[kWide];
  _mm512_store_ps(lanes, m);
  float best = largest(lanes, kWide);
  if (c + kLanes <= n) {
    int64_t rest = 0;
    const float tail = max_avx2(x + c, kLanes, rest);
    best = tail > best ? tail : best;
    c += kLanes;
  }
  done = c;
  return best;
}

template <bool kStore>
SRU_AVX512 int64_t sum_exp_avx512(const float* x, int64_t n, float shift, float* out, double* lanes) {
  __m512d sums = _mm512_setzero_pd();
  const __m512 s = _mm512_set1_ps(shift);
  int64_t c = 0;
  for (; c + kWide <= n; c += kWide) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + c), s));
    if constexpr (kStore) _mm512_storeu_ps(out + c, e);
    sums = add16_to_lanes(sums, e);
  }
  if (c + kLanes <= n) {  // the last eight by the AVX2 step: its lanes start at zero, so adding them adds each exp
    alignas(64) double tail[kLanes];
    c += sum_exp_avx2<kStore>(x + c, kLanes, shift, kStore ? out + c : out, tail);
    sums = _mm512_add_pd(sums, _mm512_load_pd(tail));
  }
  _mm512_storeu_pd(lanes, sums);
  return c;
}

SRU_AVX512 int64_t exp_scaled_avx512(const float* x, int64_t n, float shift, float scale, float* out) {
  const __m512 s = _mm512_set1_ps(shift), k = _mm512_set1_ps(scale);
  int64_t c = 0;
  for (; c + kWide <= n; c += kWide)
    _mm512_storeu_ps(out + c, _mm512_mul_ps(exp16(_mm512_sub_ps(_mm512_loadu_ps(x + c), s)), k));
  if (c + kLanes <= n) c += exp_scaled_avx2(x + c, kLanes, shift, scale, out + c);
  return c;
}

SRU_AVX512 int64_t sum_kept_avx512(const float* x, int64_t n, double* lanes, int64_t& count) {
  __m512d sums = _mm512_setzero_pd();
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t c = 0, kept = 0;
  for (; c + kWide <= n; c += kWide) {
    const __m512 v = _mm512_loadu_ps(x + c);
    const __mmask16 keep = _mm512_cmp_ps_mask(v, minus_inf, _CMP_NEQ_UQ);  // NaN is kept, as smoothing_keeps
    sums = add16_to_lanes(sums, _mm512_maskz_mov_ps(keep, v));              // a dropped lane adds +0
    kept += __builtin_popcount(static_cast<unsigned>(keep));
  }
  if (c + kLanes <= n) {  // the last eight by the AVX2 step, as in sum_exp_avx512
    alignas(64) double tail[kLanes];
    int64_t tail_kept = 0;
    c += sum_kept_avx2(x + c, kLanes, tail, tail_kept);
    sums = _mm512_add_pd(sums, _mm512_load_pd(tail));
    kept += tail_kept;
  }
  _mm512_storeu_pd(lanes, sums);
  count = kept;
  return c;
}

// The double-lane sums of layer norm and the dot product: eight floats widened a step, each lane's
// terms computed in double as the scalar loops compute them (no fused multiply-add: -ffp-contract=off).
SRU_AVX512 inline __m512d widened(const float* x) { return _mm512_cvtps_pd(_mm256_loadu_ps(x)); }

SRU_AVX512 int64_t sum_avx512(const float* x, int64_t n, double* lanes) {
  __m512d sums = _mm512_setzero_pd();
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) sums = _mm512_add_pd(sums, widened(x + c));
  _mm512_storeu_pd(lanes, sums);
  return c;
}

SRU_AVX512 int64_t sum_squared_deviations_avx512(const float* x, int64_t n, double mean, double* lanes) {
  __m512d sums = _mm512_setzero_pd();
  const __m512d m = _mm512_set1_pd(mean);
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    const __m512d d = _mm512_sub_pd(widened(x + c), m);
    sums = _mm512_add_pd(sums, _mm512_mul_pd(d, d));
  }
  _mm512_storeu_pd(lanes, sums);
  return c;
}

SRU_AVX512 int64_t dot_avx512(const float* a, const float* b, int64_t n, double* lanes) {
  __m512d sums = _mm512_setzero_pd();
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) sums = _mm512_add_pd(sums, _mm512_mul_pd(widened(a + c), widened(b + c)));
  _mm512_storeu_pd(lanes, sums);
  return c;
}

SRU_AVX512 int64_t norm_grad_sums_avx512(const float* g, const float* w, const float* x, int64_t n, double mean,
                                         double rstd, double* gh_lanes, double* ghx_lanes) {
  __m512d gh_sums = _mm512_setzero_pd(), ghx_sums = _mm512_setzero_pd();
  const __m512d m = _mm512_set1_pd(mean), r = _mm512_set1_pd(rstd);
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    const __m256 g8 = _mm256_loadu_ps(g + c);
    const __m512d gh = _mm512_cvtps_pd(w ? _mm256_mul_ps(g8, _mm256_loadu_ps(w + c)) : g8);  // the float product
    gh_sums = _mm512_add_pd(gh_sums, gh);
    ghx_sums = _mm512_add_pd(ghx_sums, _mm512_mul_pd(gh, _mm512_mul_pd(_mm512_sub_pd(widened(x + c), m), r)));
  }
  _mm512_storeu_pd(gh_lanes, gh_sums);
  _mm512_storeu_pd(ghx_lanes, ghx_sums);
  return c;
}
#endif

// sum_c exp(x[c] - shift) in the lanes; kStore: also out[c] = the exp.
template <bool kStore>
double sum_exp_rows(const float* x, int64_t n, float shift, float* out) {
  double lanes[kLanes] = {};
  int64_t c = 0;
#if SRU_ROW_EXP_AVX2
  const Path vectors = path();
  if (vectors == Path::Avx512) c = sum_exp_avx512<kStore>(x, n, shift, out, lanes);
  if (vectors == Path::Avx2) c = sum_exp_avx2<kStore>(x, n, shift, out, lanes);
#endif
  for (; c < n; ++c) {
    const float e = exp_scalar(x[c] - shift);
    if constexpr (kStore) out[c] = e;
    lanes[c % kLanes] += static_cast<double>(e);
  }
  return add_lanes(lanes);
}

}  // namespace

const char* isa() {
  switch (path()) {
    case Path::Avx512: return "avx512";
    case Path::Avx2: return "avx2";
    case Path::Scalar: break;
  }
  return "scalar";
}

float exp(float x) { return exp_scalar(x); }

float max(const float* x, int64_t n) {
  float best = -std::numeric_limits<float>::infinity();
  int64_t c = 0;
#if SRU_ROW_EXP_AVX2
  const Path vectors = path();
  if (vectors == Path::Avx512) best = max_avx512(x, n, c);
  if (vectors == Path::Avx2) best = max_avx2(x, n, c);
#endif
  for (; c < n; ++c) best = x[c] > best ? x[c] : best;
  return best;
}

double sum_exp(const float* x, int64_t n, float shift) { return sum_exp_rows<false>(x, n, shift, nullptr); }

void exp_scaled(const float* x, int64_t n, float shift, float scale, float* out) {
  int64_t c = 0;
#if SRU_ROW_EXP_AVX2
  const Path vectors = path();
  if (vectors == Path::Avx512) c = exp_scaled_avx512(x, n, shift, scale, out);
  if (vectors == Path::Avx2) c = exp_scaled_avx2(x, n, shift, scale, out);
#endif
  for (; c < n; ++c) out[c] = exp_scalar(x[c] - shift) * scale;
}

double exp_and_sum(const float* x, int64_t n, float shift, float* out) { return sum_exp_rows<true>(x, n, shift, out); }

void scale(float* x, int64_t n, float scale) {
  for (int64_t c = 0; c < n; ++c) x[c] *= scale;  // (the compiler vectorises it: no order to keep)
}

double sum(const float* x, int64_t n) {
  double lanes[kLanes] = {};
  int64_t c = 0;
#if SRU_ROW_EXP_AVX2
  if (path() == Path::Avx512) c = sum_avx512(x, n, lanes);
#endif
  for (; c + kLanes <= n; c += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += static_cast<double>(x[c + l]);
  for (; c < n; ++c) lanes[c % kLanes] += static_cast<double>(x[c]);
  return add_lanes(lanes);
}

double sum_squared_deviations(const float* x, int64_t n, double mean) {
  double lanes[kLanes] = {};
  int64_t c = 0;
#if SRU_ROW_EXP_AVX2
  if (path() == Path::Avx512) c = sum_squared_deviations_avx512(x, n, mean, lanes);
#endif
  for (; c + kLanes <= n; c += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const double d = static_cast<double>(x[c + l]) - mean;
      lanes[l] += d * d;
    }
  for (; c < n; ++c) {
    const double d = static_cast<double>(x[c]) - mean;
    lanes[c % kLanes] += d * d;
  }
  return add_lanes(lanes);
}

NormGradSums norm_grad_sums(const float* g, const float* w, const float* x, int64_t n, double mean, double rstd) {
  double gh_lanes[kLanes] = {}, ghx_lanes[kLanes] = {};
  const auto add = [&](int64_t c, int l) {
    const double gh = w ? static_cast<double>(g[c] * w[c]) : static_cast<double>(g[c]);
    gh_lanes[l] += gh;
    ghx_lanes[l] += gh * ((static_cast<double>(x[c]) - mean) * rstd);
  };
  int64_t c = 0;
#if SRU_ROW_EXP_AVX2
  if (path() == Path::Avx512) c = norm_grad_sums_avx512(g, w, x, n, mean, rstd, gh_lanes, ghx_lanes);
#endif
  for (; c + kLanes <= n; c += kLanes)
    for (int l = 0; l < kLanes; ++l) add(c + l, l);
  for (; c < n; ++c) add(c, static_cast<int>(c % kLanes));
  return {add_lanes(gh_lanes), add_lanes(ghx_lanes)};
}

double dot(const float* a, const float* b, int64_t n) {
  double lanes[kLanes] = {};
  int64_t c = 0;
#if SRU_ROW_EXP_AVX2
  if (path() == Path::Avx512) c = dot_avx512(a, b, n, lanes);
#endif
  for (; c + kLanes <= n; c += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += static_cast<double>(a[c + l]) * static_cast<double>(b[c + l]);
  for (; c < n; ++c) lanes[c % kLanes] += static_cast<double>(a[c]) * static_cast<double>(b[c]);
  return add_lanes(lanes);
}

KeptSum sum_kept(const float* x, int64_t n) {
  double lanes[kLanes] = {};
  KeptSum out;
  int64_t c = 0;
#if SRU_ROW_EXP_AVX2
  const Path vectors = path();
  if (vectors == Path::Avx512) c = sum_kept_avx512(x, n, lanes, out.count);
  if (vectors == Path::Avx2) c = sum_kept_avx2(x, n, lanes, out.count);
#endif
  for (; c < n; ++c)
    if (x[c] != -std::numeric_limits<float>::infinity()) {
      lanes[c % kLanes] += static_cast<double>(x[c]);
      ++out.count;
    }
  out.sum = add_lanes(lanes);
  return out;
}

}  // namespace sru::cpu::rows
