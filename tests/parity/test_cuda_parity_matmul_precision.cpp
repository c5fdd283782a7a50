// The matmul precision settings on a GPU (ops/matmul.h, train.matmul_precision): float32 GEMMs at
// highest, high (TF32) and medium (BF16) against the exact product of the same float inputs, each
// within its own error bound, and on cards with tensor cores for float32 (compute capability 8.0 and
// later) measurably coarser than FP32 — so a setting that did not reach cuBLAS fails. The cuDNN LSTM
// and the fused LSTM recurrence at high stay near their CPU twins. Skips without a CUDA device.
//
// Bound per element of C = A B (K terms): inputs rounded to p mantissa bits have relative error at most
// u = 2^-p (truncation; 2^-(p+1) when rounded to nearest), so each product is off by at most
// (2u + u^2) |a||b|, and the FP32 sum adds at most K 2^-24 sum |a||b|:
//   |C - C_exact| <= (2u + u^2 + K 2^-24) (|A| |B|).   TF32: p = 10, BF16: p = 7, FP32: p = 23.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "cuda_parity.h"
#include "nn/lstm.h"
#include "ops/lstm_recurrence.h"
#include "ops/matmul.h"

using namespace sru;
using namespace sru::testing;

namespace {

// Sets the process's matmul precision for one scope, then puts back the one before.
class PrecisionScope {
 public:
  explicit PrecisionScope(MatmulPrecision p) : before_(matmul_precision()) { set_matmul_precision(p); }
  ~PrecisionScope() { set_matmul_precision(before_); }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  MatmulPrecision before_;
};

struct ErrorStats {
  double worst_of_bound = 0;   // max |err| / bound: must be <= 1
  double worst_relative = 0;   // max |err| / (|A||B|): how coarse the products were
  double mean_relative = 0;
};

// C = A (M, K) B (K, N) on the GPU at `precision` against the float64 product of the same inputs.
ErrorStats gemm_errors(MatmulPrecision precision, int mantissa_bits, const Tensor& a, const Tensor& b) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  Tensor c;
  {
    const PrecisionScope scope(precision);
    c = matmul(a.to(kCuda), b.to(kCuda)).to(Device::cpu());
  }
  const std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>(), cv = c.to_vector<float>();
  const double u = std::ldexp(1.0, -mantissa_bits);
  const double factor = 2 * u + u * u + static_cast<double>(K) * std::ldexp(1.0, -24);
  ErrorStats s;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double exact = 0, magnitude = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(av[i * K + k]) * static_cast<double>(bv[k * N + j]);
        exact += p;
        magnitude += std::fabs(p);
      }
      const double err = std::fabs(static_cast<double>(cv[i * N + j]) - exact);
      s.worst_of_bound = std::max(s.worst_of_bound, err / (factor * magnitude));
      s.worst_relative = std::max(s.worst_relative, err / magnitude);
      s.mean_relative += err / magnitude / static_cast<double>(M * N);
    }
  return s;
}

}  // namespace

TEST(CudaParity, MatmulPrecisionTf32AndBf16WithinTheirBounds) {
  SKIP_WITHOUT_CUDA();
  // Large enough that cuBLAS picks tensor-core kernels when allowed (small products may run on SIMT).
  const Tensor a = rand_leaf({256, 512}, 90).detach(), b = rand_leaf({512, 256}, 91).detach();
  const ErrorStats highest = gemm_errors(MatmulPrecision::Highest, 23, a, b);
  const ErrorStats high = gemm_errors(MatmulPrecision::High, 10, a, b);
  const ErrorStats medium = gemm_errors(MatmulPrecision::Medium, 7, a, b);
  EXPECT_LE(highest.worst_of_bound, 1.0);
  EXPECT_LE(high.worst_of_bound, 1.0);
  EXPECT_LE(medium.worst_of_bound, 1.0);
  EXPECT_LT(highest.worst_relative, 1e-6) << "highest must be FP32";
  EXPECT_EQ(matmul_precision(), MatmulPrecision::Highest) << "the scope put the default back";
  if (cuda::compute_capability(0) < 80) GTEST_SKIP() << "no float32 tensor cores before compute capability 8.0";
  const char* tf32_override = std::getenv("NVIDIA_TF32_OVERRIDE");
  if (tf32_override && std::string(tf32_override) == "0") GTEST_SKIP() << "NVIDIA_TF32_OVERRIDE=0 disables TF32";
  // With K = 512 random products, TF32's rounding leaves ~2e-5 of sum |a||b| (worst of 65536 ~1e-4) and
  // FP32's ~3e-8; BF16's 3-8x TF32's (8 with both rounded alike, ~3 if TF32 truncates and BF16 rounds).
  EXPECT_GT(high.worst_relative, 1e-6) << "high ran without TF32 tensor cores";
  EXPECT_GT(medium.mean_relative, 2 * high.mean_relative) << "medium ran without BF16 inputs";
}

// Batched products (attention) and transposed operands take the same path.
TEST(CudaParity, MatmulPrecisionHighBatchedAndTransposed) {
  SKIP_WITHOUT_CUDA();
  const PrecisionScope scope(MatmulPrecision::High);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Tensor ba = rand_leaf(ta ? Shape{3, 96, 7} : Shape{3, 7, 96}, 92);
      const Tensor bb = rand_leaf(tb ? Shape{3, 5, 96} : Shape{3, 96, 5}, 93);
      // |err| <= (2^-9 + 96 2^-24) sum |a||b| <= ~0.002 * 96: 2e-2 absolute and relative covers it.
      expect_parity(one([=](const Inputs& x) { return bmm(x[0], x[1], ta, tb); }), {ba, bb}, 2e-2);
    }
}

// The LSTMs at high: cuDNN may use TF32 and the fused recurrence's per-step GEMMs do; both stay near
// the CPU's FP32 (errors compound over the steps, hence the loose tolerance).
TEST(CudaParity, LstmsAtMatmulPrecisionHigh) {
  SKIP_WITHOUT_CUDA();
  const PrecisionScope scope(MatmulPrecision::High);
  nn::LSTMOptions o;
  o.input_size = 16;
  o.hidden_size = 24;
  o.num_layers = 2;
  Generator g_cpu(7), g_gpu(7);
  nn::LSTM cpu(o, g_cpu), gpu(o, g_gpu);
  gpu.to(kCuda);
  const int64_t L = 9, B = 4;
  const Tensor x = rand_leaf({L, B, 16}, 94);
  expect_parity(
      [&](const Inputs& v) {
        const nn::LSTM& m = v[0].device().is_cuda() ? gpu : cpu;
        return std::vector<Tensor>{m.forward(v[0], Tensor(), Tensor(), Tensor()).output};
      },
      {x}, 2e-2);
  const int64_t H = 37;
  expect_parity(
      [&](const Inputs& v) {
        const LstmRecurrenceResult r = lstm_recurrence(v[0], v[1], Tensor(), Tensor(), Tensor(), Tensor(), false);
        return std::vector<Tensor>{r.output, r.c};
      },
      {rand_leaf({L, B, 4 * H}, 95, DType::F32, -2, 2), rand_leaf({4 * H, H}, 96, DType::F32, -0.5, 0.5)}, 2e-2);
}
