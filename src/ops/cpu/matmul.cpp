// CPU GEMM through CBLAS (OpenBLAS, OpenMP build): row-major, transpose flags passed straight through.
// Batched products loop over the batch; each product is cut into thread-count-independent tiles
// (ops/cpu/blas.h) spread over the threads.

#include "core/parallel.h"
#include "ops/cpu/blas.h"
#include "ops/matmul.h"

namespace sru::cpu {

void gemm(const Tensor& a, int64_t ra, int64_t ca, bool ta, const Tensor& b, int64_t rb, int64_t cb, bool tb,
          const Tensor& c, int64_t batch, double alpha, double beta) {
  const int64_t M = ta ? ca : ra, K = ta ? ra : ca, N = tb ? rb : cb;
  SRU_CHECK((tb ? cb : rb) == K, "gemm: inner dimensions differ (", K, " vs ", (tb ? cb : rb), ")");
  if (M > 0 && N > 0 && K > 0) check_gemm_sizes(M, N, K, ca, cb, N, batch);
  adapt_threads();  // the thread count the tiles below are spread over
  SRU_DISPATCH_FLOATING(c.dtype(), "gemm", [&]<typename T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = c.data<T>();
    auto product = [&](int64_t i) {
      const T* ai = pa + i * ra * ca;
      const T* bi = pb + i * rb * cb;
      T* ci = pc + i * M * N;
      if (M == 0 || N == 0) return;
      if (K == 0) {  // BLAS leaves C untouched for K = 0; the product is zero.
        for (int64_t j = 0; j < M * N; ++j) ci[j] = static_cast<T>(beta) * (beta == 0 ? T(0) : ci[j]);
        return;
      }
      blas_gemm<T>(ta, tb, M, N, K, static_cast<T>(alpha), ai, ca, bi, cb, static_cast<T>(beta), ci, N);
    };
    // Several products (bmm): spread over the threads, each on one thread (blas_gemm inside a parallel
    // region), when there is enough work to share; otherwise each product spreads its own tiles.
    const int threads = static_cast<int>(std::min<int64_t>(num_threads(), batch));
    if (threads > 1 && !omp_in_parallel() && batch * M * N * std::max<int64_t>(K, 1) >= (int64_t{1} << 18))
      parallel_for(0, batch, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) product(i);
      });
    else
      for (int64_t i = 0; i < batch; ++i) product(i);
  });
}

}  // namespace sru::cpu
