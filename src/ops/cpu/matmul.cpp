// CPU GEMM through CBLAS (OpenBLAS, OpenMP build): row-major, transpose flags passed straight through.
// Batched products loop over the batch; each product is cut into thread-count-independent tiles
// (ops/cpu/blas.h) spread over the threads. At matmul precision medium (train.precision bf16) float32
// operands are first rounded to bfloat16 values (ops/bf16_round.h), the twin of the CUDA GEMM's BF16
// operands: products of two bfloat16 values are exact in float32, so only the summation order differs.
// bf16 tensors (a, b and c all bf16): the operands widened to float32 (exact), the float32 product, c
// rounded once to bf16: the twin of cuBLAS's bf16 GEMM with FP32 sums and a bf16 C.

#include "core/parallel.h"
#include "ops/bf16_round.h"
#include "ops/cpu/blas.h"
#include "ops/matmul.h"

namespace sru::cpu {

namespace {

// The product over float32 / float64 storage; round_operands: both operands taken as bfloat16 values
// (float32 scratch copies of the spans the products read), the CPU twin of precision bf16's GEMMs.
void float_gemm(const Tensor& a, int64_t ra, int64_t ca, bool ta, const Tensor& b, int64_t rb, int64_t cb, bool tb,
                const Tensor& c, int64_t batch, double alpha, double beta, bool round_operands) {
  const int64_t M = ta ? ca : ra, K = ta ? ra : ca, N = tb ? rb : cb;
  adapt_threads();  // the thread count the tiles below are spread over
  Tensor a16, b16;
  if (round_operands && c.dtype() == DType::F32 && M > 0 && N > 0 && K > 0) {
    a16 = Tensor::empty({batch * ra * ca}, DType::F32);
    b16 = Tensor::empty({batch * rb * cb}, DType::F32);
    round_to_bf16_values(a.data<float>(), a16.data<float>(), a16.numel());
    round_to_bf16_values(b.data<float>(), b16.data<float>(), b16.numel());
  }
  SRU_DISPATCH_FLOATING(c.dtype(), "gemm", [&]<typename T>() {
    const T* pa = a16.defined() ? a16.data<T>() : a.data<T>();
    const T* pb = b16.defined() ? b16.data<T>() : b.data<T>();
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

}  // namespace

void gemm(const Tensor& a, int64_t ra, int64_t ca, bool ta, const Tensor& b, int64_t rb, int64_t cb, bool tb,
          const Tensor& c, int64_t batch, double alpha, double beta) {
  const int64_t M = ta ? ca : ra, K = ta ? ra : ca, N = tb ? rb : cb;
  SRU_CHECK((tb ? cb : rb) == K, "gemm: inner dimensions differ (", K, " vs ", (tb ? cb : rb), ")");
  if (M > 0 && N > 0 && K > 0) check_gemm_sizes(M, N, K, ca, cb, N, batch);
  if (c.dtype() == DType::BF16) {
    // bf16 storage: the operands widened (already bfloat16 values: no rounding pass), FP32 sums, C
    // rounded once.
    SRU_CHECK(a.dtype() == DType::BF16 && b.dtype() == DType::BF16, "gemm: bf16 C needs bf16 operands, got ",
              dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
    Tensor c32 = beta == 0 ? Tensor::empty(c.shape(), DType::F32) : c.to(DType::F32);
    float_gemm(a.to(DType::F32), ra, ca, ta, b.to(DType::F32), rb, cb, tb, c32, batch, alpha, beta, false);
    Tensor(c).copy_(c32.to(DType::BF16));
    return;
  }
  float_gemm(a, ra, ca, ta, b, rb, cb, tb, c, batch, alpha, beta, matmul_precision() == MatmulPrecision::Medium);
}

}  // namespace sru::cpu
