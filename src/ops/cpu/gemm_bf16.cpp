// Chooses and calls the bf16 GEMM kernels of ops/cpu/gemm_bf16.h: the AVX512-BF16 build
// (ops/cpu/gemm_bf16_avx512.cpp) on processors that have it, when the product is large enough.
#include "ops/cpu/gemm_bf16.h"

#include "core/error.h"

namespace sru::cpu {

#if defined(SRU_HAVE_AVX512BF16_KERNELS)
namespace avx512bf16 {
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc, const Bf16Epilogue& ep);
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const bf16* a, int64_t lda, const bf16* b,
          int64_t ldb, float beta, float* c, int64_t ldc, const Bf16Epilogue& ep);
}  // namespace avx512bf16
#endif

namespace {

bool forced_off = false;

// Multiply-adds below which rounding the operands and calling sgemm is as fast (packing and three
// parallel regions per K block cost a few microseconds): srubench ceilings, docs/results.md.
constexpr int64_t kBf16DotMinWork = int64_t{1} << 18;

}  // namespace

bool bf16_dot_kernels_available() {
#if defined(SRU_HAVE_AVX512BF16_KERNELS)
  static const bool supported = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  return supported && !forced_off;
#else
  return false;
#endif
}

bool force_bf16_dot_kernels_off(bool off) {
  const bool previous = forced_off;
  forced_off = off;
  return previous;
}

bool bf16_dot_gemm_pays(int64_t M, int64_t N, int64_t K) {
  return bf16_dot_kernels_available() && M * N * K >= kBf16DotMinWork;
}

template <typename In>
static void call_kernels(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const In* a, int64_t lda,
                         const In* b, int64_t ldb, float beta, float* c, int64_t ldc, const Bf16Epilogue& ep) {
  SRU_CHECK(bf16_dot_kernels_available(), "bf16_dot_gemm: this processor or build has no AVX512-BF16 kernels");
  SRU_CHECK(c != nullptr || (ep.out != nullptr && K <= kBf16DotKBlock),
            "bf16_dot_gemm: float32 c is needed (no bf16 out, or K over one block: its partial sums)");
#if defined(SRU_HAVE_AVX512BF16_KERNELS)
  avx512bf16::gemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc, ep);
#else
  (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)beta,
      (void)c, (void)ldc, (void)ep;
#endif
}

void bf16_dot_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda,
                   const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const Bf16Epilogue& ep) {
  call_kernels(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc, ep);
}
void bf16_dot_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const bf16* a, int64_t lda,
                   const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc, const Bf16Epilogue& ep) {
  call_kernels(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc, ep);
}

}  // namespace sru::cpu
