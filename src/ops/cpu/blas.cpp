// Thread-count-independent GEMM tiles on single-threaded OpenBLAS calls (see blas.h).
#include "ops/cpu/blas.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <strings.h>

#include "core/parallel.h"

// OpenBLAS's dynamic-architecture entry points (exported by DYNAMIC_ARCH builds, absent from others:
// weak, so a build without them links and leaves the kernels as they are).
extern "C" {
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace sru::cpu {

namespace {

// The kernels to ask for on a processor OpenBLAS did not recognise: SkylakeX needs AVX-512 F, CD, BW,
// DQ and VL (what OpenBLAS's own test for it asks), Haswell AVX2 and FMA; null: none better than SSE3.
const char* better_core_than_prescott() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return nullptr;
}

BlasKernels choose_blas_kernels() {
  BlasKernels k;
  k.core = openblas_get_corename();
  k.switchable = gotoblas_dynamic_init != nullptr && gotoblas_dynamic_quit != nullptr;
  const char* better = better_core_than_prescott();
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr && strcasecmp(k.core.c_str(), "Prescott") == 0 && better != nullptr &&
      k.switchable) {
    // Before any GEMM has run: the kernel table is all that changes (its blocking parameters come with
    // it; OpenBLAS's buffers are sized for every core of the build). Between the two calls OpenBLAS has
    // no table: no BLAS call may run then (every one of ours comes through blas_gemm, after this).
    setenv("OPENBLAS_CORETYPE", better, 0);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");
    k.replaced = k.core;
    k.core = openblas_get_corename();
  }
  return k;
}

// Multiply-adds per tile (about 50 us of one core's arithmetic), so a tile's dispatch is small against
// it and small GEMMs stay one call.
// Chosen by srubench train-epoch of the quickstart SRU and LSTM at 1 and 2 threads (docs/results.md):
// smaller tiles cost up to 15% in per-call overhead, larger ones leave the LSTM's per-step GEMMs on one
// thread.
constexpr int64_t kTileWork = int64_t{1} << 20;
constexpr int64_t kMaxTiles = 32;  // enough for 16-32 cores; fixed, so results never depend on them
constexpr int64_t kMinRows = 128, kMinCols = 128;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void call_blas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, a, lda,
              b, ldb, beta, c, ldc);
}
void call_blas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* a, int64_t lda,
               const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, a, lda,
              b, ldb, beta, c, ldc);
}

}  // namespace

const BlasKernels& blas_kernels() {
  static const BlasKernels kernels = choose_blas_kernels();
  return kernels;
}

GemmTiling gemm_tiling(int64_t M, int64_t N, int64_t K) {
  GemmTiling t;
  const int64_t wanted = std::clamp<int64_t>(M * N * K / kTileWork, 1, kMaxTiles);
  t.row_blocks = std::clamp<int64_t>(std::min(wanted, M / kMinRows), 1, kMaxTiles);
  t.col_blocks = std::clamp<int64_t>(std::min(ceil_div(wanted, t.row_blocks), N / kMinCols), 1, kMaxTiles);
  t.rows = ceil_div(M, t.row_blocks);
  t.cols = ceil_div(ceil_div(N, t.col_blocks), 16) * 16;  // whole 16-column panels
  t.row_blocks = ceil_div(M, t.rows);
  t.col_blocks = ceil_div(N, t.cols);
  return t;
}

template <typename T>
void blas_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* a, int64_t lda, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  (void)blas_kernels();  // chosen once, before the first call (the tiles below may run on several threads)
  const GemmTiling t = gemm_tiling(M, N, K);
  const int64_t tiles = t.row_blocks * t.col_blocks;
  auto tile = [&](int64_t i) {
    const int64_t m0 = (i / t.col_blocks) * t.rows, n0 = (i % t.col_blocks) * t.cols;
    const int64_t m = std::min(t.rows, M - m0), n = std::min(t.cols, N - n0);
    const T* at = ta ? a + m0 : a + m0 * lda;  // op(a) rows m0..: columns of a when transposed
    const T* bt = tb ? b + n0 * ldb : b + n0;
    call_blas(ta, tb, m, n, K, alpha, at, lda, bt, ldb, beta, c + m0 * ldc + n0, ldc);
  };
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), tiles));
  if (threads > 1 && !omp_in_parallel()) {
    // Inside the region OpenBLAS sees omp_in_parallel() and runs each call on its own thread.
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t i = 0; i < tiles; ++i) tile(i);
    return;
  }
  // OpenBLAS splits a call over its own thread count (which its OpenMP build follows from
  // omp_get_max_threads()): keep both 1 (as set_num_threads does; a program that never called it, e.g.
  // a test, or one that loads another OpenBLAS build, gets it here).
  static const bool blas_single = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)blas_single;
  if (!omp_in_parallel() && omp_get_max_threads() != 1) omp_set_num_threads(1);
  for (int64_t i = 0; i < tiles; ++i) tile(i);
}

template void blas_gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                               int64_t, float, float*, int64_t);
template void blas_gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
                                int64_t, double, double*, int64_t);

}  // namespace sru::cpu
