// A row-major GEMM with bfloat16 operands on processors with AVX512-BF16 (vdpbf16ps), the CPU's fast
// path for precision bf16 (train.precision: bf16) where it beats rounding the operands and calling
// sgemm (docs/results.md "bf16 GEMMs on the CPU").
//
//   c (M, N) = alpha op(a) op(b) + beta c,   op(a) (M, K), op(b) (K, N); lda/ldb/ldc row strides.
//
// a and b are float32 (each value rounded to bfloat16 while packed, to nearest even exactly as
// core/float16.h rounds) or bf16 storage (taken as they are); c is float32. Products of two bfloat16
// values are exact in float32, and the sums are FP32, as in the sgemm twin (ops/cpu/matmul.cpp); two
// things differ: the order of the sums (vdpbf16ps adds the pair k+1, k into its lane, K in blocks of
// 256), and subnormal operands and partial sums flushed to zero (the instruction's DAZ / FTZ), so the
// two paths agree to the FP32 summation bound, not to the bit. The result does not depend on the
// thread count (each element of c is summed by one thread in a fixed order).
#pragma once

#include <cstdint>

#include "core/float16.h"

namespace sru::cpu {

// Whether this build has the kernels and this processor runs them (AVX512F, AVX512BW, AVX512VL and
// AVX512-BF16), and they are not switched off by force_bf16_dot_kernels_off.
bool bf16_dot_kernels_available();
// Switches the kernels off (tests of the other path, benchmarks of both); returns the previous setting.
bool force_bf16_dot_kernels_off(bool off);

// Whether precision bf16's GEMMs of this size take the bf16 kernels: where they are available and the
// product is large enough that they win (measured, kBf16DotMinWork in ops/cpu/gemm_bf16.cpp).
bool bf16_dot_gemm_pays(int64_t M, int64_t N, int64_t K);

// K values a block of the kernels: c holds partial sums between blocks.
inline constexpr int64_t kBf16DotKBlock = 256;

// What the product's last K block does besides storing float32 c: each element v = alpha acc + beta
// old, then + bias[j] (bias: N values, or null), then max(0, v) with relu (relu's v > 0 ? v : 0, NaN to
// 0); with out set, v is rounded to bfloat16 (core/float16.h's rule) into out (M x N at row stride ldo)
// instead, beta's old value is read from out, and c is only the float32 scratch of the partial sums
// between K blocks: null is allowed when K <= kBf16DotKBlock. The same values as the float32 product
// followed by the bias, the clamp and the rounding as separate passes (no pass over c left to do).
struct Bf16Epilogue {
  const float* bias = nullptr;
  bool relu = false;
  bf16* out = nullptr;
  int64_t ldo = 0;
};

// The product (see above). Requires bf16_dot_kernels_available(). Called inside a parallel region it
// runs on the calling thread alone.
void bf16_dot_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda,
                   const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const Bf16Epilogue& epilogue = {});
void bf16_dot_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const bf16* a, int64_t lda,
                   const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc, const Bf16Epilogue& epilogue = {});

}  // namespace sru::cpu
