// cuBLAS GEMM for the matmul ops: c = alpha * op(a) @ op(b) + beta * c for row-major matrices a (ra, ca),
// b (rb, cb), c (M, N), `batch` of them back to back (CPU twin: ops/cpu/matmul.cpp, OpenBLAS).
// cuBLAS is column-major: a row-major (R, C) matrix is its column-major transpose, so the row-major
// product C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T, with B first.
// Float32 at the process's matmul precision (ops/matmul.h): highest (the default) is full FP32, so
// results match the CPU to float rounding; high / medium use TF32 / BF16 tensor cores. Double: FP64.
#include "ops/cuda/kernel_util.cuh"
#include "ops/matmul.h"

namespace sru::cuda {

void sgemm(cublasHandle_t handle, cublasOperation_t opa, cublasOperation_t opb, int m, int n, int k, float alpha,
           const float* a, int lda, long long stride_a, const float* b, int ldb, long long stride_b, float beta,
           float* c, int ldc, long long stride_c, int batch) {
  const MatmulPrecision precision = matmul_precision();
  if (precision == MatmulPrecision::Highest && batch == 1 && stride_a == 0 && stride_b == 0 && stride_c == 0) {
    CUBLAS_CHECK(cublasSgemm(handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc));  // the LSTM's steps
    return;
  }
  if (precision == MatmulPrecision::Highest) {
    CUBLAS_CHECK(cublasSgemmStridedBatched(handle, opa, opb, m, n, k, &alpha, a, lda, stride_a, b, ldb, stride_b, &beta,
                                           c, ldc, stride_c, batch));
    return;
  }
  const cublasComputeType_t compute =
      precision == MatmulPrecision::High ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F_FAST_16BF;
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, opa, opb, m, n, k, &alpha, a, CUDA_R_32F, lda, stride_a, b,
                                          CUDA_R_32F, ldb, stride_b, &beta, c, CUDA_R_32F, ldc, stride_c, batch,
                                          compute, CUBLAS_GEMM_DEFAULT));
}

void gemm(const Tensor& a, int64_t ra, int64_t ca, bool ta, const Tensor& b, int64_t rb, int64_t cb, bool tb,
          const Tensor& c, int64_t batch, double alpha, double beta) {
  const int64_t M = ta ? ca : ra, K = ta ? ra : ca, N = tb ? rb : cb;
  SRU_CHECK((tb ? cb : rb) == K, "gemm: inner dimensions differ (", K, " vs ", (tb ? cb : rb), ")");
  if (M == 0 || N == 0 || batch == 0) return;
  Tensor out = c;
  if (K == 0) {  // the product is zero: C = beta * C, without reading C when beta is 0
    if (beta == 0) out.zero_();
    else out.mul_(beta);
    return;
  }
  check_gemm_sizes(M, N, K, ca, cb, N, batch);
  cublasHandle_t handle = context(c.device().index).cublas;
  const cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  SRU_DISPATCH_FLOATING(c.dtype(), "gemm", [&]<typename T>() {
    const T al = static_cast<T>(alpha), be = static_cast<T>(beta);
    if constexpr (std::is_same_v<T, float>)
      sgemm(handle, opb, opa, N, M, K, al, b.data<T>(), cb, rb * cb, a.data<T>(), ca, ra * ca, be, c.data<T>(), N,
            M * N, batch);
    else
      CUBLAS_CHECK(cublasDgemmStridedBatched(handle, opb, opa, N, M, K, &al, b.data<T>(), cb, rb * cb, a.data<T>(), ca,
                                             ra * ca, &be, c.data<T>(), N, M * N, batch));
  });
}

}  // namespace sru::cuda
