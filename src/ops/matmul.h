// Matrix products with transpose flags, on BLAS (OpenBLAS sgemm/dgemm) with no copies.
//
// matmul(a, b, ta, tb) = op(a) @ op(b), op = transpose when the flag is set.
//   a: (..., M, K) when !ta — the leading dims fold into M, e.g. x (L, B, n) @ W (n, m) -> (L, B, m);
//      (K, M) when ta (2-d only). b: (K, N) or, when tb, (N, K). Result (..., M, N).
// bmm(a, b, ta, tb): batched, a (Bt, M, K) or (Bt, K, M), b (Bt, K, N) or (Bt, N, K) -> (Bt, M, N).
// Backward (C = op(A) op(B), G = dL/dC):
//   dA = G op(B)^T  (!ta)  or  op(B) G^T  (ta);   dB = op(A)^T G  (!tb)  or  G^T op(A)  (tb)
// — each again one GEMM with flags, so no transposed copy is ever made.
#pragma once

#include "core/tensor.h"

namespace sru {

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);
Tensor bmm(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// BLAS and cuBLAS take int sizes: both kernels refuse M, N, K, the leading dimensions (ca, cb, N) or
// the batch count over 2^31 - 1, naming which, instead of letting them wrap.
void check_gemm_sizes(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc, int64_t batch);

namespace cpu {
// c = alpha * op(a) @ op(b) + beta * c for row-major matrices a (ra, ca), b (rb, cb), c (M, N), `batch`
// of them stored back to back. beta = 0 ignores c's previous contents.
void gemm(const Tensor& a, int64_t ra, int64_t ca, bool ta, const Tensor& b, int64_t rb, int64_t cb, bool tb,
          const Tensor& c, int64_t batch, double alpha, double beta);
}  // namespace cpu
// The CUDA twins (ops/cuda/matmul.cu): same contracts, tensors on one CUDA device.
namespace cuda {
void gemm(const Tensor& a, int64_t ra, int64_t ca, bool ta, const Tensor& b, int64_t rb, int64_t cb, bool tb,
          const Tensor& c, int64_t batch, double alpha, double beta);
}  // namespace cuda

}  // namespace sru
