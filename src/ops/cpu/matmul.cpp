// CPU GEMM through CBLAS (OpenBLAS, OpenMP build): row-major, transpose flags passed straight through.
// Batched products loop over the batch; each product is cut into thread-count-independent tiles
// (ops/cpu/blas.h) spread over the threads. At matmul precision medium (train.precision bf16) float32
// operands are taken as bfloat16 values, the twin of the CUDA GEMM's BF16 operands: on processors with
// AVX512-BF16, products large enough to pay go to the bf16 kernels (ops/cpu/gemm_bf16.h: rounded
// while packed, vdpbf16ps), the others are rounded into float32 copies (ops/bf16_round.h) for sgemm.
// Products of two bfloat16 values are exact in float32, so only the summation order differs (and the
// kernels' flush of subnormals).
// bf16 tensors (a, b and c all bf16): the bf16 kernels where they pay, else the operands widened to
// float32 (exact) and the float32 product; c rounded once to bf16: the twin of cuBLAS's bf16 GEMM with
// FP32 sums and a bf16 C.

#include "core/parallel.h"
#include "ops/bf16_round.h"
#include "ops/cpu/blas.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"

namespace sru::cpu {

namespace {

// product(i) for each of `batch` products: spread over the threads, each on one thread (the GEMM
// inside a parallel region), when there is enough work to share; otherwise each product spreads its
// own tiles.
template <typename F>
void for_each_product(int64_t batch, int64_t M, int64_t N, int64_t K, const F& product) {
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), batch));
  if (threads > 1 && !omp_in_parallel() && batch * M * N * std::max<int64_t>(K, 1) >= (int64_t{1} << 18))
    parallel_for(0, batch, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) product(i);
    });
  else
    for (int64_t i = 0; i < batch; ++i) product(i);
}

// The products on the bf16 kernels (In: float32 values rounded while packed, or bf16 storage), c float32.
template <typename In>
void bf16_dot_products(const In* a, const GemmMatrix& ma, bool ta, const In* b, const GemmMatrix& mb, bool tb,
                       float* c, const GemmMatrix& mc, int64_t batch, double alpha, double beta) {
  const GemmDims dims = gemm_dims(ma, ta, mb, tb, mc);  // (not a structured binding: lambdas capture it)
  const int64_t M = dims.M, N = dims.N, K = dims.K;
  adapt_threads();
  for_each_product(batch, M, N, K, [&](int64_t i) {
    bf16_dot_gemm(ta, tb, M, N, K, static_cast<float>(alpha), a + i * ma.stride, ma.ld, b + i * mb.stride, mb.ld,
                  static_cast<float>(beta), c + i * mc.stride, mc.ld);
  });
}

// bf16 a, b and c on the bf16 kernels, c written in bf16 by their last K block (the old c for beta read
// from it; bias / relu: linear's epilogue, batch 1): no float32 pass over c. A float32 scratch laid out
// as c holds the partial sums only when K spans several blocks.
void bf16_dot_products_into_bf16(const bf16* a, const GemmMatrix& ma, bool ta, const bf16* b, const GemmMatrix& mb,
                                 bool tb, bf16* c, const GemmMatrix& mc, int64_t batch, double alpha, double beta,
                                 const float* bias = nullptr, bool relu = false) {
  const GemmDims dims = gemm_dims(ma, ta, mb, tb, mc);
  const int64_t M = dims.M, N = dims.N, K = dims.K;
  SRU_CHECK(batch == 1 || (bias == nullptr && !relu), "bf16 GEMM: a bias or ReLU epilogue takes one product");
  const Tensor partials = K > kBf16DotKBlock ? Tensor::empty({mc.span(batch)}, DType::F32) : Tensor();
  float* scratch = partials.defined() ? partials.data<float>() : nullptr;
  adapt_threads();
  for_each_product(batch, M, N, K, [&](int64_t i) {
    const Bf16Epilogue ep{bias, relu, c + i * mc.stride, mc.ld};
    bf16_dot_gemm(ta, tb, M, N, K, static_cast<float>(alpha), a + i * ma.stride, ma.ld, b + i * mb.stride, mb.ld,
                  static_cast<float>(beta), scratch ? scratch + i * mc.stride : nullptr, mc.ld, ep);
  });
}

// The product over float32 / float64 storage; round_operands: both operands taken as bfloat16 values
// (float32 scratch copies of the spans the products read, same layout), the CPU twin of precision
// bf16's GEMMs.
void float_gemm(const Tensor& a, const GemmMatrix& ma, bool ta, const Tensor& b, const GemmMatrix& mb, bool tb,
                const Tensor& c, const GemmMatrix& mc, int64_t batch, double alpha, double beta, bool round_operands) {
  const int64_t M = mc.rows, K = ta ? ma.rows : ma.cols, N = mc.cols;
  if (round_operands && c.dtype() == DType::F32 && M > 0 && N > 0 && K > 0 && bf16_dot_gemm_pays(M, N, K)) {
    bf16_dot_products(a.data<float>(), ma, ta, b.data<float>(), mb, tb, c.data<float>(), mc, batch, alpha, beta);
    return;
  }
  adapt_threads();  // the thread count the tiles below are spread over
  Tensor a16, b16;
  if (round_operands && c.dtype() == DType::F32 && M > 0 && N > 0 && K > 0) {
    a16 = Tensor::empty({ma.span(batch)}, DType::F32);
    b16 = Tensor::empty({mb.span(batch)}, DType::F32);
    round_to_bf16_values(a.data<float>(), a16.data<float>(), a16.numel());
    round_to_bf16_values(b.data<float>(), b16.data<float>(), b16.numel());
  }
  SRU_DISPATCH_FLOATING(c.dtype(), "gemm", [&]<typename T>() {
    const T* pa = a16.defined() ? a16.data<T>() : a.data<T>();
    const T* pb = b16.defined() ? b16.data<T>() : b.data<T>();
    T* pc = c.data<T>();
    auto product = [&](int64_t i) {
      const T* ai = pa + i * ma.stride;
      const T* bi = pb + i * mb.stride;
      T* ci = pc + i * mc.stride;
      if (M == 0 || N == 0) return;
      if (K == 0) {  // BLAS leaves C untouched for K = 0; the product is zero.
        for (int64_t r = 0; r < M; ++r)
          for (int64_t j = 0; j < N; ++j) {
            T& x = ci[r * mc.ld + j];
            x = static_cast<T>(beta) * (beta == 0 ? T(0) : x);
          }
        return;
      }
      blas_gemm<T>(ta, tb, M, N, K, static_cast<T>(alpha), ai, ma.ld, bi, mb.ld, static_cast<T>(beta), ci, mc.ld);
    };
    for_each_product(batch, M, N, K, product);
  });
}

}  // namespace

void linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                    LinearActivation activation) {
  const int64_t M = x.size(0), K = x.size(1), N = weight.size(0);
  const GemmMatrix mx = GemmMatrix::packed(M, K), mw = GemmMatrix::packed(N, K), my = GemmMatrix::packed(M, N);
  // The product, then the bias added to each row in y's compute type: float32 y + b rounded once, as
  // the add after matmul did; bf16 the float32 sum plus the widened bias, rounded once (the epilogue's
  // order on the GPU). The ReLU clamps the sum (relu's x > 0 ? x : 0: NaN becomes 0).
  const bool bf16 = y.dtype() == DType::BF16;
  if (bf16 && M > 0 && N > 0 && K > 0 && bf16_dot_gemm_pays(M, N, K)) {
    // The bias, the clamp and the rounding in the kernels' last K block, in this order: the same bits.
    const Tensor b32 = bias.to(DType::F32);
    bf16_dot_products_into_bf16(x.data<sru::bf16>(), mx, false, weight.data<sru::bf16>(), mw, true, y.data<sru::bf16>(),
                                my, 1, 1.0, 0.0, b32.data<float>(), activation == LinearActivation::Relu);
    return;
  }
  const Tensor out = bf16 ? Tensor::empty({M, N}, DType::F32) : y;
  float_gemm(bf16 ? x.to(DType::F32) : x, mx, false, bf16 ? weight.to(DType::F32) : weight, mw, true, out, my, 1, 1.0,
             0.0, !bf16 && matmul_precision() == MatmulPrecision::Medium);
  const Tensor b = bf16 ? bias.to(DType::F32) : bias;
  SRU_DISPATCH_FLOATING(out.dtype(), "linear", [&]<typename T>() {
    T* rows = out.data<T>();
    const T* add = b.data<T>();
    parallel_for(0, M, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(N, 1)), [&](int64_t lo, int64_t hi) {
      if (activation == LinearActivation::Relu) {
        for (int64_t r = lo; r < hi; ++r)
          for (int64_t j = 0; j < N; ++j) {
            const T v = rows[r * N + j] + add[j];
            rows[r * N + j] = v > T(0) ? v : T(0);
          }
        return;
      }
      for (int64_t r = lo; r < hi; ++r)
        for (int64_t j = 0; j < N; ++j) rows[r * N + j] += add[j];
    });
  });
  if (bf16) Tensor(y).copy_(out);
}

void gemm(const Tensor& a, const GemmMatrix& ma, bool ta, const Tensor& b, const GemmMatrix& mb, bool tb,
          const Tensor& c, const GemmMatrix& mc, int64_t batch, double alpha, double beta) {
  const auto [M, N, K] = gemm_dims(ma, ta, mb, tb, mc);
  if (M > 0 && N > 0 && K > 0) check_gemm_sizes(M, N, K, ma.ld, mb.ld, mc.ld, batch);
  if (c.dtype() == DType::BF16) {
    // bf16 storage: the operands widened (already bfloat16 values: no rounding pass), FP32 sums, C
    // rounded once (C's elements outside its matrices come back as they were: widening is exact).
    SRU_CHECK(a.dtype() == DType::BF16 && b.dtype() == DType::BF16, "gemm: bf16 C needs bf16 operands, got ",
              dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
    if (M > 0 && N > 0 && K > 0 && bf16_dot_gemm_pays(M, N, K)) {
      bf16_dot_products_into_bf16(a.data<bf16>(), ma, ta, b.data<bf16>(), mb, tb, c.data<bf16>(), mc, batch, alpha, beta);
      return;
    }
    const bool c_packed = mc.ld == mc.cols && mc.stride == mc.rows * mc.cols;
    Tensor c32 = beta == 0 && c_packed ? Tensor::empty(c.shape(), DType::F32) : c.to(DType::F32);
    float_gemm(a.to(DType::F32), ma, ta, b.to(DType::F32), mb, tb, c32, mc, batch, alpha, beta, false);
    Tensor(c).copy_(c32);
    return;
  }
  float_gemm(a, ma, ta, b, mb, tb, c, mc, batch, alpha, beta, matmul_precision() == MatmulPrecision::Medium);
}

// The GEMM and the column sums the matmul and the add's backward ran before: the same kernels, the
// same bits.
void linear_parameter_gradients(const Tensor& dy, const Tensor& x, const Tensor& weight_grad, bool accumulate_weight,
                                const Tensor& bias_grad) {
  const int64_t M = dy.size(0), N = dy.size(1), K = x.size(1);
  gemm(dy, GemmMatrix::packed(M, N), true, x, GemmMatrix::packed(M, K), false, weight_grad, GemmMatrix::packed(N, K), 1,
       1.0, accumulate_weight ? 1.0 : 0.0);
  sum_rows(dy, bias_grad);
}

}  // namespace sru::cpu
