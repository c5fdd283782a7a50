// Row-major GEMM on OpenBLAS whose result does not depend on the thread count.
//
// c (M, N) = alpha op(a) op(b) + beta c, op(a) (M, K), op(b) (K, N); lda/ldb/ldc are row strides.
// OpenBLAS's own threading gives results that differ in the last bits between 1 and 2 threads for
// shapes as small as 64 x 256 x 32 (tested in tests/unit/test_ops_forward.cpp), and the thread count
// changes while a program runs (core/parallel.h: it follows the machine's load). So C is cut into
// tiles fixed by (M, N, K) alone — row blocks first, then column blocks, each with the whole K — and
// every tile is one single-threaded BLAS call; the tiles are spread over the OpenMP threads.
#pragma once

#include <cstdint>
#include <string>

namespace sru::cpu {

template <typename T>
void blas_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* a, int64_t lda, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc);

// OpenBLAS's kernels (its core name, e.g. "SkylakeX", "Haswell", "Zen"), chosen before the first GEMM:
// an OpenBLAS built for every processor (DYNAMIC_ARCH) picks its kernels by the processor's model when
// it loads, and one older than the processor (Debian 12's 0.3.21 on Intel family 6 model 207, a 5th
// generation Xeon) falls back to Prescott's SSE3 kernels: sgemm 4-5x slower. When OPENBLAS_CORETYPE
// is unset and that fallback happened on a processor with AVX-512 (F, CD, BW, DQ, VL) or AVX2 and FMA,
// the first call has OpenBLAS choose again with OPENBLAS_CORETYPE set to SkylakeX or Haswell for the
// moment (its exported gotoblas_dynamic_quit / _init, looked up weakly: other builds are left alone; the
// variable is removed again, so child processes decide for themselves). A user's OPENBLAS_CORETYPE is
// always kept. Every BLAS call must come after this (blas_gemm makes it first).
struct BlasKernels {
  std::string core;         // openblas_get_corename() after the choice
  std::string replaced;     // the fallback replaced ("Prescott"), empty when OpenBLAS's own choice stands
  bool switchable = false;  // the library can choose again (a DYNAMIC_ARCH build exporting the entry points)
};
const BlasKernels& blas_kernels();

// The tile grid blas_gemm uses for a shape (for tests and benchmarks).
struct GemmTiling {
  int64_t row_blocks = 1, col_blocks = 1, rows = 0, cols = 0;  // rows/cols: a block's size (the last may be smaller)
};
GemmTiling gemm_tiling(int64_t M, int64_t N, int64_t K);

}  // namespace sru::cpu
