// Float32 row primitives of the CPU softmax family (ops/cpu/softmax.cpp): exp by one fixed polynomial,
// a row's maximum, sums of shifted exps and of logits in double lanes. With AVX-512 sixteen floats at
// once, with AVX2 + FMA eight (chosen at run time, within the CPU kernels' ISA limit: ops/sru_recurrence.h
// limit_sru_kernel_isa); otherwise the same operations one element at a time in the same order, so every
// path gives the same bits (tests/unit/test_row_exp.cpp).
//
// exp(x): x clamped to [-87.33654, 88]; n = nearest integer to x log2(e); r = x - n ln2 (two FMAs,
// ln2 split in a high and a low part); exp(r) by its Taylor polynomial of degree 7 (|r| <= ln2 / 2:
// truncation 5e-9 relative) in Horner form (FMAs); times 2^n built in the exponent bits. Within 2 ulp
// of the exact value for x in [-87.33, 88]; x < -87.33654 gives 0 (the exact values are subnormal),
// x > 88 gives +inf (every caller's arguments are <= 0: x - max, x - logsumexp, log-probabilities),
// NaN gives NaN.
//
// Sums: element c goes to lane c mod 8 (a double per lane); the lanes are added in lane order at the
// end. A row's sum therefore depends on the row alone (not on threads), and on both paths the same.
#pragma once

#include <cstdint>

namespace sru::cpu::rows {

// The path that runs: "avx512" (sixteen lanes), "avx2" (AVX2 and FMA: eight lanes) or "scalar".
const char* isa();
// The same polynomial, one value (what every lane computes).
float exp(float x);
// The largest element (NaN elements are passed over: the sums below carry them); -inf for n == 0.
float max(const float* x, int64_t n);
// sum_c exp(x[c] - shift), each exp in float32, the sum in double lanes.
double sum_exp(const float* x, int64_t n, float shift);
// out[c] = exp(x[c] - shift) * scale (out may be x).
void exp_scaled(const float* x, int64_t n, float shift, float scale, float* out);
// out[c] = exp(x[c] - shift), returning their sum_exp (out may be x). With scale() after it, the softmax
// forward's exp_scaled(x, n, shift, 1 / sum_exp(...)) to the bit, each exp computed once.
double exp_and_sum(const float* x, int64_t n, float shift, float* out);
// x[c] *= scale.
void scale(float* x, int64_t n, float scale);
// sum_c x[c] and sum_c a[c] b[c] (each product in double), in double lanes.
double sum(const float* x, int64_t n);
double dot(const float* a, const float* b, int64_t n);
// sum_c (x[c] - mean)^2 in double (layer norm's variance), in double lanes.
double sum_squared_deviations(const float* x, int64_t n, double mean);
// Layer norm's backward sums of a row, in double lanes: with gh[c] = g[c] w[c] (the float product; g[c]
// when w is null) and xhat[c] = (x[c] - mean) rstd, sum_gh = sum_c gh[c], sum_gh_xhat = sum_c gh[c] xhat[c].
struct NormGradSums {
  double sum_gh = 0.0, sum_gh_xhat = 0.0;
};
NormGradSums norm_grad_sums(const float* g, const float* w, const float* x, int64_t n, double mean, double rstd);
// The sum (double lanes) and the number of the elements that are not -inf (label smoothing's kept classes).
struct KeptSum {
  double sum = 0.0;
  int64_t count = 0;
};
KeptSum sum_kept(const float* x, int64_t n);

}  // namespace sru::cpu::rows
