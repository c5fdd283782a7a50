// CPU GEMM through CBLAS (OpenBLAS, OpenMP build): row-major, transpose flags passed straight through.
// Batched products loop over the batch; OpenBLAS parallelises each product internally.
#include <cblas.h>

#include "core/parallel.h"
#include "ops/matmul.h"

namespace sru::cpu {

void gemm(const Tensor& a, int64_t ra, int64_t ca, bool ta, const Tensor& b, int64_t rb, int64_t cb, bool tb,
          const Tensor& c, int64_t batch, double alpha, double beta) {
  const int64_t M = ta ? ca : ra, K = ta ? ra : ca, N = tb ? rb : cb;
  SRU_CHECK((tb ? cb : rb) == K, "gemm: inner dimensions differ (", K, " vs ", (tb ? cb : rb), ")");
  if (M > 0 && N > 0 && K > 0) check_gemm_sizes(M, N, K, ca, cb, N, batch);
  adapt_threads();  // OpenBLAS splits each product over omp_get_max_threads() threads
  const CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans, opb = tb ? CblasTrans : CblasNoTrans;
  SRU_DISPATCH_FLOATING(c.dtype(), "gemm", [&]<typename T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = c.data<T>();
    for (int64_t i = 0; i < batch; ++i) {
      const T* ai = pa + i * ra * ca;
      const T* bi = pb + i * rb * cb;
      T* ci = pc + i * M * N;
      if (M == 0 || N == 0) continue;
      if (K == 0) {  // BLAS leaves C untouched for K = 0; the product is zero.
        for (int64_t j = 0; j < M * N; ++j) ci[j] = static_cast<T>(beta) * (beta == 0 ? T(0) : ci[j]);
        continue;
      }
      if constexpr (std::is_same_v<T, float>)
        cblas_sgemm(CblasRowMajor, opa, opb, M, N, K, static_cast<float>(alpha), ai, ca, bi, cb,
                    static_cast<float>(beta), ci, N);
      else
        cblas_dgemm(CblasRowMajor, opa, opb, M, N, K, alpha, ai, ca, bi, cb, beta, ci, N);
    }
  });
}

}  // namespace sru::cpu
