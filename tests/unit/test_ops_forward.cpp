// Forward values of every op against hand-computed results or an independent composition, plus the
// shape and argument errors users hit first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <tuple>

#include "autograd/engine.h"
#include "core/float16.h"
#include "core/kernel_count.h"
#include "core/parallel.h"
#include "core/philox.h"
#include "ops/cpu/blas.h"
#include "ops/bf16_round.h"
#include "ops/attention.h"
#include "ops/ops.h"
#include "testing.h"

using namespace sru;
using sru::testing::error_of;
using sru::testing::f32;
using sru::testing::f64;
using sru::testing::i64;
using sru::testing::tensors_near;
using sru::testing::values_near;

TEST(Binary, SameShape) {
  Tensor a = f32({1, 2, 3, 4}, {2, 2}), b = f32({4, 3, 2, 1}, {2, 2});
  EXPECT_TRUE(values_near(a + b, {2, 2}, {5, 5, 5, 5}));
  EXPECT_TRUE(values_near(a - b, {2, 2}, {-3, -1, 1, 3}));
  EXPECT_TRUE(values_near(a * b, {2, 2}, {4, 6, 6, 4}));
  EXPECT_TRUE(values_near(a / b, {2, 2}, {0.25, 2.0 / 3, 1.5, 4}));
}

TEST(Binary, BroadcastsTrailingDimsEitherSide) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3}), bias = f32({10, 20, 30}, {3});
  EXPECT_TRUE(values_near(x + bias, {2, 3}, {11, 22, 33, 14, 25, 36}));
  EXPECT_TRUE(values_near(bias - x, {2, 3}, {9, 18, 27, 6, 15, 24}));
  EXPECT_TRUE(values_near(x * f32({2}, {}), {2, 3}, {2, 4, 6, 8, 10, 12}));
  // (L, B, d) * (B, d): a variational mask shared across time.
  Tensor seq = Tensor::ones({3, 2, 2}), mask = f32({0, 1, 2, 3}, {2, 2});
  EXPECT_TRUE(values_near(seq * mask, {3, 2, 2}, {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));
}

TEST(Binary, LargeBroadcastMatchesScalarLoop) {
  const int64_t rows = 3000, cols = 33;  // above the parallel grain
  Tensor x = Tensor::uniform({rows, cols}, -1, 1), b = Tensor::uniform({cols}, -1, 1);
  Tensor y = x * b;
  const float *px = x.data<float>(), *pb = b.data<float>(), *py = y.data<float>();
  for (int64_t i = 0; i < rows * cols; i += 97) ASSERT_FLOAT_EQ(py[i], px[i] * pb[i % cols]);
}

TEST(Binary, IncompatibleShapesAndDtypesAreErrors) {
  EXPECT_NE(error_of([] { Tensor::zeros({2, 3}) + Tensor::zeros({2}); }).find("cannot broadcast"), std::string::npos);
  EXPECT_NE(error_of([] { Tensor::zeros({2}) + Tensor::zeros({2}, DType::F64); }).find("dtypes f32 and f64 differ"),
            std::string::npos);
  EXPECT_NE(error_of([] { Tensor::arange(2) + Tensor::arange(2); }).find("expected a floating tensor"),
            std::string::npos);
}

TEST(Scalar, Ops) {
  Tensor x = f64({1, 2, 4}, {3});
  EXPECT_TRUE(values_near(x + 1.0, {3}, {2, 3, 5}));
  EXPECT_TRUE(values_near(x - 1.0, {3}, {0, 1, 3}));
  EXPECT_TRUE(values_near(1.0 - x, {3}, {0, -1, -3}));
  EXPECT_TRUE(values_near(x * 3.0, {3}, {3, 6, 12}));
  EXPECT_TRUE(values_near(x / 2.0, {3}, {0.5, 1, 2}));
  EXPECT_TRUE(values_near(8.0 / x, {3}, {8, 4, 2}));
  EXPECT_TRUE(values_near(pow_scalar(x, 0.5), {3}, {1, std::sqrt(2.0), 2}));
  EXPECT_TRUE(values_near(-x, {3}, {-1, -2, -4}));
}

TEST(Unary, Activations) {
  Tensor x = f64({-2, 0, 0.5}, {3});
  EXPECT_TRUE(values_near(exp(x), {3}, {std::exp(-2.0), 1, std::exp(0.5)}, 1e-12));
  EXPECT_TRUE(values_near(log(f64({1, std::exp(2.0)}, {2})), {2}, {0, 2}, 1e-12));
  EXPECT_TRUE(values_near(tanh(x), {3}, {std::tanh(-2.0), 0, std::tanh(0.5)}, 1e-12));
  EXPECT_TRUE(values_near(sigmoid(x), {3}, {1 / (1 + std::exp(2.0)), 0.5, 1 / (1 + std::exp(-0.5))}, 1e-12));
  EXPECT_TRUE(values_near(relu(x), {3}, {0, 0, 0.5}));
}

TEST(Unary, SigmoidIsStableAtExtremes) {
  const auto y = sigmoid(f32({-1000, 1000}, {2})).to_vector<double>();
  EXPECT_EQ(y[0], 0.0);
  EXPECT_EQ(y[1], 1.0);
}

TEST(Matmul, PlainAndTransposedMatchHandResult) {
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3});         // (2, 3)
  Tensor b = f32({1, 0, 0, 1, 1, 1}, {3, 2});         // (3, 2)
  EXPECT_TRUE(values_near(matmul(a, b), {2, 2}, {4, 5, 10, 11}));
  Tensor at = f32({1, 4, 2, 5, 3, 6}, {3, 2});        // a^T stored
  Tensor bt = f32({1, 0, 1, 0, 1, 1}, {2, 3});        // b^T stored
  EXPECT_TRUE(values_near(matmul(at, b, true, false), {2, 2}, {4, 5, 10, 11}));
  EXPECT_TRUE(values_near(matmul(a, bt, false, true), {2, 2}, {4, 5, 10, 11}));
  EXPECT_TRUE(values_near(matmul(at, bt, true, true), {2, 2}, {4, 5, 10, 11}));
}

TEST(Matmul, LeadingDimsFoldIntoRows) {
  Tensor x = Tensor::uniform({4, 3, 5}, -1, 1, DType::F64), w = Tensor::uniform({5, 2}, -1, 1, DType::F64);
  Tensor y = matmul(x, w);
  EXPECT_EQ(y.shape(), (Shape{4, 3, 2}));
  Tensor flat = matmul(x.view({12, 5}), w);
  EXPECT_TRUE(values_near(y, {4, 3, 2}, flat.to_vector<double>(), 1e-14));
}

// An empty inner dimension (K = 0) gives a zero product of the full output shape, and gradients of
// the inputs' (empty) shapes: found on the GPU's hardening test, where the CPU twin failed first.
TEST(Matmul, EmptyInnerDimensionGivesZerosOfTheOutputShape) {
  for (const bool ta : {false, true}) {
    Tensor a = (ta ? Tensor::uniform({0, 4}, -1, 1, DType::F64) : Tensor::uniform({4, 0}, -1, 1, DType::F64))
                   .set_requires_grad(true);
    Tensor b = Tensor::uniform({0, 3}, -1, 1, DType::F64).set_requires_grad(true);
    Tensor c = matmul(a, b, ta, false);
    EXPECT_TRUE(values_near(c, {4, 3}, std::vector<double>(12, 0.0)));
    autograd::backward(sum(c));
    EXPECT_EQ(a.grad().shape(), a.shape());
    EXPECT_EQ(b.grad().shape(), b.shape());
  }
  Tensor x = Tensor::uniform({2, 3, 0}, -1, 1, DType::F64), w = Tensor::uniform({0, 5}, -1, 1, DType::F64);
  EXPECT_TRUE(values_near(matmul(x, w), {2, 3, 5}, std::vector<double>(30, 0.0)));
}

TEST(Matmul, BatchedEqualsPerItem) {
  Tensor a = Tensor::uniform({3, 2, 4}, -1, 1, DType::F64), b = Tensor::uniform({3, 5, 4}, -1, 1, DType::F64);
  Tensor c = bmm(a, b, false, true);
  EXPECT_EQ(c.shape(), (Shape{3, 2, 5}));
  for (int64_t i = 0; i < 3; ++i) {
    Tensor ci = matmul(a.narrow0(i, 1).view({2, 4}), b.narrow0(i, 1).view({5, 4}), false, true);
    EXPECT_TRUE(values_near(c.narrow0(i, 1).view({2, 5}), {2, 5}, ci.to_vector<double>(), 1e-14));
  }
}

// train.precision on the CPU: fp32 and tf32 (no TF32 here) give the FP32 product bit for bit; bf16
// rounds both operands to bfloat16 first, as the CUDA GEMM does, in matmul, bmm and their backward
// products: the result is the exact product of the rounded operands up to FP32 summation.
TEST(Matmul, CpuPrecisionBf16RoundsBothOperandsOfEveryProduct) {
  struct RestorePrecision {
    ~RestorePrecision() { set_matmul_precision(MatmulPrecision::Highest); }
  } restore;
  const int64_t M = 17, K = 64, N = 9;
  const Tensor a = Tensor::uniform({M, K}, -1, 1, DType::F32), b = Tensor::uniform({K, N}, -1, 1, DType::F32);
  const std::vector<float> fp32 = matmul(a, b).to_vector<float>();
  for (const char* name : {"tf32", "fp32"}) {
    set_matmul_precision(parse_precision(name, "test"));
    EXPECT_EQ(precision_name(matmul_precision()), name);
    EXPECT_EQ(matmul(a, b).to_vector<float>(), fp32) << name;
  }
  // The float64 product of the operands as given (round = false) or rounded to bfloat16 (round = true).
  const auto product64 = [&](const std::vector<float>& x, const std::vector<float>& y, int64_t m, int64_t k, int64_t n,
                             bool round) {
    std::vector<double> out(static_cast<size_t>(m * n), 0.0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t l = 0; l < k; ++l) {
          const float xv = x[static_cast<size_t>(i * k + l)], yv = y[static_cast<size_t>(l * n + j)];
          out[static_cast<size_t>(i * n + j)] += round ? double(round_to_bf16(xv)) * double(round_to_bf16(yv))
                                                       : double(xv) * double(yv);
        }
    return out;
  };
  const auto absolute = [](std::vector<float> v) {
    for (float& x : v) x = std::abs(x);
    return v;
  };
  // An FP32 sum of n exact products is within gamma_n sum |terms| of the true sum, gamma_n ~ n 2^-24,
  // whatever order the BLAS kernel adds them in.
  const auto gamma = [](int64_t n) { return static_cast<double>(n) * std::ldexp(1.0, -24) * 1.01; };
  const auto av = a.to_vector<float>(), bv = b.to_vector<float>();
  const std::vector<double> exact = product64(av, bv, M, K, N, false), rounded = product64(av, bv, M, K, N, true);
  const std::vector<double> magnitude = product64(absolute(av), absolute(bv), M, K, N, true);
  set_matmul_precision(parse_precision("bf16", "test"));
  const std::vector<float> bf16 = matmul(a, b).to_vector<float>();
  double worst_to_rounded = 0, worst_to_exact = 0;
  for (size_t i = 0; i < bf16.size(); ++i) {
    EXPECT_LE(std::abs(bf16[i] - rounded[i]), gamma(K) * magnitude[i])
        << "bf16 is the product of the rounded operands, summed in FP32 (element " << i << ")";
    worst_to_rounded = std::max(worst_to_rounded, std::abs(bf16[i] - rounded[i]));
    worst_to_exact = std::max(worst_to_exact, std::abs(bf16[i] - exact[i]));
  }
  EXPECT_GT(worst_to_exact, 10 * worst_to_rounded) << "bf16 rounded its operands";
  // bmm, and the backward products: dA = G B^T with G and B rounded, dB = A^T G likewise.
  const Tensor a3 = a.view({1, M, K}), b3 = b.view({1, K, N});
  EXPECT_EQ(bmm(a3, b3).to_vector<float>(), bf16);
  Tensor x = a.clone(), w = b.clone();
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  const Tensor g = Tensor::uniform({M, N}, -1, 1, DType::F32);
  autograd::backward(matmul(x, w), g);
  std::vector<float> bt(static_cast<size_t>(N * K)), at(static_cast<size_t>(K * M));
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = 0; j < N; ++j) bt[static_cast<size_t>(j * K + i)] = bv[static_cast<size_t>(i * N + j)];
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < K; ++j) at[static_cast<size_t>(j * M + i)] = av[static_cast<size_t>(i * K + j)];
  const auto gv = g.to_vector<float>();
  const std::vector<double> ga = product64(gv, bt, M, N, K, true), gb = product64(at, gv, K, M, N, true);
  const std::vector<double> ga_magnitude = product64(absolute(gv), absolute(bt), M, N, K, true);
  const std::vector<double> gb_magnitude = product64(absolute(at), absolute(gv), K, M, N, true);
  const auto xg = x.grad().to_vector<float>(), wg = w.grad().to_vector<float>();
  for (size_t i = 0; i < ga.size(); ++i) ASSERT_NEAR(xg[i], ga[i], gamma(N) * ga_magnitude[i]) << "dA at " << i;
  for (size_t i = 0; i < gb.size(); ++i) ASSERT_NEAR(wg[i], gb[i], gamma(M) * gb_magnitude[i]) << "dB at " << i;
  // Double products stay exact at every setting.
  const Tensor a64 = a.to(DType::F64), b64 = b.to(DType::F64);
  const auto p64 = matmul(a64, b64).to_vector<double>();
  for (size_t i = 0; i < p64.size(); ++i) ASSERT_NEAR(p64[i], exact[i], 1e-12);
}

TEST(Matmul, PrecisionNamesAndRefusals) {
  EXPECT_EQ(precision_names(), (std::vector<std::string>{"fp32", "tf32", "bf16"}));
  EXPECT_EQ(parse_precision("bf16", "x"), MatmulPrecision::Medium);
  const std::string int8 = error_of([] { parse_precision("int8", "train.precision"); });
  EXPECT_NE(int8.find("train.precision: 'int8' is not a precision: fp32, tf32 or bf16"), std::string::npos) << int8;
  const std::string fp16 = error_of([] { parse_precision("fp16", "--precision"); });
  EXPECT_NE(fp16.find("--precision: 'fp16' is not a precision: fp32, tf32 or bf16"), std::string::npos) << fp16;
}

// What each precision hands cuBLAS (ops/cuda/matmul.cu follows cuda_float32_gemm): medium must round
// the operands to bfloat16 itself. Asking cuBLAS for CUBLAS_COMPUTE_32F_FAST_16BF over float32 operands
// (the first version) only allowed BF16, and on an H200 it returned TF32's result bit for bit.
TEST(Matmul, CudaPlanOfEachPrecision) {
  const CudaFloat32Gemm highest = cuda_float32_gemm(MatmulPrecision::Highest);
  const CudaFloat32Gemm high = cuda_float32_gemm(MatmulPrecision::High);
  const CudaFloat32Gemm medium = cuda_float32_gemm(MatmulPrecision::Medium);
  EXPECT_FALSE(highest.bf16_operands || highest.tf32_tensor_cores);
  EXPECT_TRUE(high.tf32_tensor_cores && !high.bf16_operands);
  EXPECT_TRUE(medium.bf16_operands && !medium.tf32_tensor_cores) << "medium must hand cuBLAS bfloat16 operands";
}

// float32 -> bfloat16 rounding (core/float16.h), the CPU twin of the GPU's cvt.rn.bf16: nearest, ties to
// even, overflow to infinity, NaN kept NaN; and the array loop (ops/bf16_round.h) is the scalar rule.
TEST(Bf16, RoundsToNearestEvenWithOverflowAndNan) {
  auto bits = [](uint32_t u) { return bf16_bits_from_float(float_from_bits(u)); };
  EXPECT_EQ(bits(0x3F800000u), 0x3F80);  // 1.0 exact
  EXPECT_EQ(bits(0x3F807FFFu), 0x3F80);  // just under half an ulp: down
  EXPECT_EQ(bits(0x3F808000u), 0x3F80);  // tie, kept part even: stays
  EXPECT_EQ(bits(0x3F818000u), 0x3F82);  // tie, kept part odd: up to even
  EXPECT_EQ(bits(0x3F808001u), 0x3F81);  // just over half: up
  EXPECT_EQ(bits(0xBF818000u), 0xBF82);  // negative ties alike
  EXPECT_EQ(bits(0x7F7FFFFFu), 0x7F80);  // largest float rounds past the largest bfloat16: +inf
  EXPECT_EQ(bits(0xFF7FFFFFu), 0xFF80);
  EXPECT_EQ(bits(0x7F800000u), 0x7F80);  // infinities stay
  EXPECT_EQ(bits(0x00018000u), 0x0002);  // subnormal tie, odd: up
  EXPECT_EQ(bits(0x80000000u), 0x8000);  // -0 keeps its sign
  EXPECT_TRUE(std::isnan(float_from_bf16_bits(bits(0x7FC00000u))));
  EXPECT_TRUE(std::isnan(float_from_bf16_bits(bits(0xFF800001u))));  // a NaN whose rounding would carry into inf
  EXPECT_EQ(round_to_bf16(3.14159265f), 3.140625f);
  // Every bfloat16 value is its own rounding; each float lies within half an ulp of its (at most 2^-8 of
  // it: the unit roundoff of 8 significant bits).
  Generator gen(5);
  const std::vector<float> xs = Tensor::uniform({4096}, -1e4, 1e4, DType::F32, gen).to_vector<float>();
  std::vector<uint16_t> out(xs.size());
  cpu::round_to_bf16(xs.data(), out.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(out[i], bf16_bits_from_float(xs[i]));
    const float r = float_from_bf16_bits(out[i]);
    EXPECT_EQ(round_to_bf16(r), r);
    EXPECT_LE(std::fabs(r - xs[i]), std::ldexp(std::fabs(xs[i]), -8)) << xs[i];
  }
}

// OpenBLAS's kernels (ops/cpu/blas.h): an OpenBLAS older than the processor falls back to Prescott's
// SSE3 kernels (Debian 12's 0.3.21 on a 5th generation Xeon: sgemm 4-5x slower); the first GEMM
// replaces that fallback wherever the processor has AVX2 and FMA, unless the user chose the kernels
// (OPENBLAS_CORETYPE), and the GEMMs then still compute the product (the test below, the whole suite).
TEST(Matmul, OpenBlasNeverRunsPrescottKernelsOnAnAvx2Processor) {
  (void)matmul(Tensor::ones({2, 2}), Tensor::ones({2, 2}));  // the first GEMM makes the choice
  const cpu::BlasKernels& kernels = cpu::blas_kernels();
  if (!kernels.replaced.empty()) {
    EXPECT_EQ(kernels.replaced, "Prescott");
    EXPECT_NE(kernels.core, "Prescott");
  }
  if (!kernels.switchable) GTEST_SKIP() << "this OpenBLAS cannot choose its kernels again (no DYNAMIC_ARCH entry points)";
  const bool users_choice = std::getenv("OPENBLAS_CORETYPE") != nullptr;
#if defined(__x86_64__)
  if (!users_choice && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    EXPECT_NE(kernels.core, "Prescott") << "OpenBLAS kept its SSE3 fallback on a processor with AVX2 and FMA";
#endif
}

// OpenBLAS's own threading changes the last bits between 1 and 2 threads at these shapes (64 x 256 x
// 32 and up); the tiled GEMM (ops/cpu/blas.h) must not, for every transpose combination and for bmm, and
// its tiles must still add up to the product (checked against a double-precision loop).
TEST(Matmul, ResultsDoNotDependOnTheThreadCount) {
  const int before = num_threads();
  const int64_t shapes[][3] = {{64, 256, 32}, {256, 96, 32}, {64, 32, 256}, {300, 520, 130}, {2048, 768, 64}};
  for (const auto& s : shapes)
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        const int64_t M = s[0], N = s[1], K = s[2];
        const Tensor a = Tensor::uniform(ta ? Shape{K, M} : Shape{M, K}, -1, 1, DType::F32);
        const Tensor b = Tensor::uniform(tb ? Shape{N, K} : Shape{K, N}, -1, 1, DType::F32);
        std::vector<std::vector<float>> results;
        for (const int threads : {1, 2, 3}) {
          set_num_threads(threads);
          results.push_back(matmul(a, b, ta, tb).to_vector<float>());
        }
        const std::string where = std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
                                  (ta ? " ta" : "") + (tb ? " tb" : "");
        EXPECT_EQ(results[0], results[1]) << where;
        EXPECT_EQ(results[0], results[2]) << where;
        const std::vector<float> pa = a.to_vector<float>(), pb = b.to_vector<float>();
        double worst = 0;
        for (int64_t i = 0; i < M; i += 7)
          for (int64_t j = 0; j < N; j += 5) {
            double ref = 0;
            for (int64_t k = 0; k < K; ++k)
              ref += static_cast<double>(pa[ta ? k * M + i : i * K + k]) * pb[tb ? j * K + k : k * N + j];
            worst = std::max(worst, std::abs(ref - results[0][i * N + j]));
          }
        EXPECT_LT(worst, 1e-3) << where;
      }
  const Tensor a = Tensor::uniform({6, 128, 96}, -1, 1, DType::F32), b = Tensor::uniform({6, 96, 200}, -1, 1, DType::F32);
  set_num_threads(1);
  const std::vector<float> one = bmm(a, b).to_vector<float>();
  set_num_threads(2);
  EXPECT_EQ(one, bmm(a, b).to_vector<float>());
  set_num_threads(before);
}

TEST(Matmul, ShapeErrorsNameBothShapes) {
  const std::string m = error_of([] { matmul(Tensor::zeros({2, 3}), Tensor::zeros({2, 3})); });
  EXPECT_NE(m.find("(2, 3) and (2, 3) do not chain"), std::string::npos) << m;
}

TEST(Reduce, SumAndMeanOverDims) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(values_near(sum(x, 0), {3}, {5, 7, 9}));
  EXPECT_TRUE(values_near(sum(x, 1), {2}, {6, 15}));
  EXPECT_TRUE(values_near(sum(x, -1, true), {2, 1}, {6, 15}));
  EXPECT_TRUE(values_near(mean(x, 0), {3}, {2.5, 3.5, 4.5}));
  EXPECT_TRUE(values_near(sum(x), {}, {21}));
  EXPECT_TRUE(values_near(mean(x), {}, {3.5}));
  Tensor y = Tensor::arange(24, DType::F64).view({2, 3, 4});
  EXPECT_TRUE(values_near(sum(y, 1), {2, 4}, {12, 15, 18, 21, 48, 51, 54, 57}));
}

TEST(Softmax, RowsSumToOneAndMatchFormula) {
  Tensor x = f64({1, 2, 3, 1000, 1000, 1000}, {2, 3});
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_TRUE(values_near(softmax(x), {2, 3},
                          {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 1e-12));
  EXPECT_TRUE(values_near(log_softmax(x), {2, 3},
                          {1 - std::log(z), 2 - std::log(z), 3 - std::log(z), -std::log(3.0), -std::log(3.0),
                           -std::log(3.0)},
                          1e-12));
}

TEST(CrossEntropy, MatchesComposedLogSoftmaxAndIgnoresIndex) {
  Tensor logits = Tensor::uniform({4, 5}, -2, 2, DType::F64);
  Tensor target = i64({1, 4, -100, 0}, {4});
  const auto lsm = log_softmax(logits).to_vector<double>();
  const double expected = -(lsm[0 * 5 + 1] + lsm[1 * 5 + 4] + lsm[3 * 5 + 0]);
  EXPECT_NEAR(cross_entropy(logits, target, -100, Reduction::Sum).item<double>(), expected, 1e-12);
  EXPECT_NEAR(cross_entropy(logits, target).item<double>(), expected / 3, 1e-12);
  // Uniform logits over C classes cost log(C) nats.
  EXPECT_NEAR(cross_entropy(Tensor::zeros({2, 256}), i64({3, 7}, {2})).item<double>(), std::log(256.0), 1e-6);
}

TEST(CrossEntropy, AllIgnoredGivesZeroNotNaN) {
  EXPECT_EQ(cross_entropy(Tensor::zeros({2, 3}), i64({-1, -1}, {2}), -1).item<double>(), 0.0);
}

TEST(CrossEntropy, OutOfRangeTargetIsAnError) {
  const std::string m = error_of([] { cross_entropy(Tensor::zeros({2, 3}), i64({0, 3}, {2})); });
  EXPECT_NE(m.find("target 3 at row 1 is outside [0, 3)"), std::string::npos) << m;
}

TEST(Embedding, LooksUpRows) {
  Tensor w = f32({0, 1, 10, 11, 20, 21}, {3, 2});
  EXPECT_TRUE(values_near(embedding(w, i64({2, 0, 2, 1}, {2, 2})), {2, 2, 2}, {20, 21, 0, 1, 20, 21, 10, 11}));
  const std::string m = error_of([&] { embedding(w, i64({3}, {1})); });
  EXPECT_NE(m.find("index 3 at position 0 is outside the vocabulary [0, 3)"), std::string::npos) << m;
}

TEST(Dropout, KeepsAboutOneMinusPAndScales) {
  Generator gen(11);
  Tensor x = Tensor::ones({100000});
  const auto y = dropout(x, 0.3, true, gen).to_vector<double>();
  int64_t kept = 0;
  for (double v : y) {
    ASSERT_TRUE(v == 0.0 || std::abs(v - 1.0 / 0.7) < 1e-6) << v;
    kept += v != 0.0;
  }
  EXPECT_NEAR(static_cast<double>(kept) / y.size(), 0.7, 0.01);
  EXPECT_TRUE(dropout(x, 0.3, false, gen).shares_storage(x));  // evaluation: identity
  EXPECT_NE(error_of([&] { dropout(x, 1.0, true, gen); }).find("in [0, 1)"), std::string::npos);
}

TEST(Dropout, SameSeedSameMask) {
  Generator a(5), b(5);
  EXPECT_EQ(dropout_mask({1000}, 0.5, DType::F32, a).to_vector<float>(),
            dropout_mask({1000}, 0.5, DType::F32, b).to_vector<float>());
}

// The mask is the documented function of (seed, offset, index) whatever the thread split (it is what
// makes CPU and GPU masks identical): element i keeps iff word i % 4 of Philox block offset + i / 4,
// as a unit float, is >= p.
TEST(Dropout, MaskIsThePhiloxFunctionOfTheIndex) {
  const int64_t n = 3 * kParallelGrain + 7;  // several threads' chunks, none a multiple of 4
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    Tensor mask = Tensor::empty({n});
    cpu::fill_dropout_mask(42, PhiloxOffset{1001}, 0.25, mask, {n, n, 0});
    const auto m = mask.to_vector<float>();
    for (int64_t i = 0; i < n; ++i) {
      const bool keep = philox::u32_to_unit_float(philox::random_u32(42, 1001, i)) >= 0.25f;
      ASSERT_EQ(m[i], keep ? 1.0f / 0.75f : 0.0f) << "element " << i << " with " << threads << " threads";
    }
  }
  set_num_threads(0);
}

// dropout() draws its mask inside the kernel (apply_dropout): output and gradient equal the product with
// the stored mask of the same generator state, bit for bit, NaN and -0 included, in every dtype and under
// a batch shard, and the generator advances by the same words.
// A captured step's draws (core/rng.h PhiloxOffset): with an offset base set, the generator hands out
// offsets relative to its counter at that point and the kernels add the value they read at the base;
// with that value there, dropout (forward and backward), a mask drawn where it is read (the SRU's
// MaskDraw) and the fused attention's dropout draw the numbers of whole offsets, to the bit, and the
// counter advances alike.
TEST(Dropout, OffsetsRelativeToABaseDrawTheNumbersOfWholeOffsets) {
  Generator values(4);
  const Tensor x = Tensor::uniform({6, 4, 10}, -2, 2, DType::F32, values);
  const Tensor q = Tensor::uniform({5, 2, 8}, -1, 1, DType::F32, values);
  const Tensor k = Tensor::uniform({7, 2, 8}, -1, 1, DType::F32, values);
  const Tensor v = Tensor::uniform({7, 2, 8}, -1, 1, DType::F32, values);
  struct Drawn {
    Tensor y, gx, mask, attention;
    float drawn_mask_element;
  };
  auto draw_all = [&](Generator& gen) {
    Tensor leaf = x.clone();
    leaf.set_requires_grad(true);
    Drawn d;
    d.y = dropout(leaf, 0.3, true, gen);
    autograd::backward(sum(mul(d.y, d.y)));
    d.gx = leaf.grad();
    const MaskDraw m = draw_dropout_mask({4, 10}, 0.25, gen);
    d.mask = mask_of(m, {4, 10}, DType::F32, Device::cpu());
    d.drawn_mask_element = m.value<float>(13);
    d.attention = fused_attention(q, k, v, 2, AttentionPattern{}, Tensor(), 0.5, 0.2, true, gen);
    return d;
  };
  Generator whole(21), based(21);
  whole.reserve(1000);
  based.reserve(1000);
  const uint64_t base_value = based.offset();  // what the host writes before a replay
  based.set_offset_base(&base_value);
  EXPECT_EQ(based.draw(0).offset, 0u) << "relative to the counter at set_offset_base";
  EXPECT_EQ(based.draw(0).base, &base_value);
  const Drawn a = draw_all(whole), b = draw_all(based);
  EXPECT_EQ(whole.offset(), based.offset());
  EXPECT_TRUE(tensors_near(b.y, a.y, 0, 0));
  EXPECT_TRUE(tensors_near(b.gx, a.gx, 0, 0));
  EXPECT_TRUE(tensors_near(b.mask, a.mask, 0, 0));
  EXPECT_EQ(b.drawn_mask_element, a.drawn_mask_element);
  EXPECT_TRUE(tensors_near(b.attention, a.attention, 0, 0));
  // And the draws are not all the same numbers: a base one block off changes them.
  const uint64_t shifted = base_value + 1;
  Generator off(21);
  off.reserve(1000);
  off.set_offset_base(&shifted);
  const Drawn c = draw_all(off);
  EXPECT_FALSE(tensors_near(c.y, a.y, 0, 0));
  EXPECT_FALSE(tensors_near(c.attention, a.attention, 0, 0));
  based.set_offset_base(nullptr);
  EXPECT_EQ(based.draw(4).base, nullptr);
}

TEST(Dropout, DrawnInTheKernelEqualsTheStoredMasksProductBitForBit) {
  for (const DType dtype : {DType::F32, DType::F64, DType::BF16})
    for (const bool shard : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (shard ? ", batch shard" : ""));
      Generator values(3);
      std::vector<double> v = Tensor::uniform({5, 6, 9}, -2, 2, DType::F64, values).to_vector<double>();
      v[7] = std::nan("");
      v[8] = -0.0;
      v[9] = -1e30;
      const Tensor x = Tensor::from_vector(v, {5, 6, 9}).to(dtype).detach();
      Tensor leaf = x.clone();
      leaf.set_requires_grad(true);
      Generator fused(17), stored(17);
      fused.reserve(3);
      stored.reserve(3);
      if (shard) {  // time-major (L, B, d): rows 2..7 of a batch of 10
        fused.set_batch_shard({10, 2, 6});
        stored.set_batch_shard({10, 2, 6});
      }
      const int batch_dim = shard ? 1 : 0;
      const Tensor y = dropout(leaf, 0.3, true, fused, batch_dim);
      const DType mask_dtype = dtype == DType::BF16 ? DType::F32 : dtype;
      const Tensor mask = dropout_mask(x.shape(), 0.3, mask_dtype, stored, Device::cpu(), batch_dim);
      const auto product = [&](const Tensor& t) { return mul(t.to(mask_dtype), mask).to(dtype); };
      EXPECT_EQ(fused.offset(), stored.offset());
      const auto bits = [](const Tensor& t) {
        const Tensor w = t.to(DType::F64);
        std::vector<uint64_t> out;
        for (double d : w.to_vector<double>()) {
          uint64_t b;
          std::memcpy(&b, &d, sizeof b);
          out.push_back(std::isnan(d) ? 0x7ff8000000000000ull : b);
        }
        return out;
      };
      EXPECT_EQ(bits(y), bits(product(x)));
      Generator grads(4);
      const Tensor g = Tensor::uniform(x.shape(), -1, 1, DType::F64, grads).to(dtype);
      autograd::backward({y}, {g});
      EXPECT_EQ(bits(leaf.grad()), bits(product(g)));
    }
}

// Data-parallel ranks (batch shards) draw exactly their rows of the whole batch's mask, wherever the
// batch is (dim 0, time-major dim 1, or batch-major folded with heads), in shares of any size, and
// advance the generator as the whole batch does.
TEST(Dropout, BatchShardsDrawTheirRowsOfTheWholeMask) {
  struct Case {
    Shape whole;
    int batch_dim;
    int64_t per_row;  // entries of the batch dim per batch row (heads folded into the batch)
  };
  for (const Case& c : {Case{{7, 40}, 0, 1}, Case{{5, 7, 9}, 1, 1}, Case{{14, 3, 5}, 0, 2}}) {
    const int64_t rows = c.whole[c.batch_dim] / c.per_row;
    Generator whole_gen(21);
    whole_gen.reserve(5);
    const Tensor whole = dropout_mask(c.whole, 0.5, DType::F32, whole_gen, Device::cpu(), c.batch_dim);
    for (const auto& [first, count] : {std::pair<int64_t, int64_t>{0, 3}, {3, 4}, {6, 1}}) {
      Generator gen(21);
      gen.reserve(5);
      gen.set_batch_shard({rows, first, count});
      Shape local = c.whole;
      local[c.batch_dim] = count * c.per_row;
      const Tensor part = dropout_mask(local, 0.5, DType::F32, gen, Device::cpu(), c.batch_dim);
      EXPECT_EQ(gen.offset(), whole_gen.offset()) << shape_str(c.whole);
      // The rows [first, first + count) of `whole` along batch_dim.
      int64_t outer = 1;
      for (int d = 0; d < c.batch_dim; ++d) outer *= c.whole[d];
      const int64_t inner = whole.numel() / (outer * rows);
      const auto w = whole.to_vector<float>(), p = part.to_vector<float>();
      std::vector<float> expected;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < count * inner; ++i) expected.push_back(w[(o * rows + first) * inner + i]);
      EXPECT_EQ(p, expected) << shape_str(c.whole) << " rows " << first << "+" << count;
    }
  }
  Generator gen(1);
  gen.set_batch_shard({4, 0, 2});
  EXPECT_NE(error_of([&] { dropout_mask({3, 5}, 0.5, DType::F32, gen); }).find("not a multiple of the rows"),
            std::string::npos);
}

TEST(LayerNorm, NormalisesRowsThenScalesAndShifts) {
  Tensor x = f64({1, 2, 3, 4, -1, -1, -1, -1}, {2, 4});
  Tensor w = f64({1, 1, 2, 2}, {4}), b = f64({0, 0, 0, 1}, {4});
  const double mu = 2.5, var = 1.25, r = 1 / std::sqrt(var + 1e-5);
  EXPECT_TRUE(values_near(layer_norm(x, w, b), {2, 4},
                          {(1 - mu) * r, (2 - mu) * r, 2 * (3 - mu) * r, 2 * (4 - mu) * r + 1, 0, 0, 0, 1}, 1e-9));
  EXPECT_TRUE(values_near(layer_norm(x, Tensor(), Tensor()), {2, 4},
                          {(1 - mu) * r, (2 - mu) * r, (3 - mu) * r, (4 - mu) * r, 0, 0, 0, 0}, 1e-9));
}

TEST(ShapeOps, ReshapeSliceConcatSplitTranspose) {
  Tensor x = Tensor::arange(6, DType::F32).view({2, 3});
  EXPECT_TRUE(values_near(reshape(x, {3, 2}), {3, 2}, {0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(values_near(slice(x, 1, 1, 3), {2, 2}, {1, 2, 4, 5}));
  EXPECT_TRUE(values_near(slice(x, 0, 1, 2), {1, 3}, {3, 4, 5}));
  EXPECT_TRUE(slice(x, 0, 1, 2).shares_storage(x));
  EXPECT_TRUE(values_near(concat({x, x}, 0), {4, 3}, {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(values_near(concat({x, slice(x, 1, 0, 1)}, 1), {2, 4}, {0, 1, 2, 0, 3, 4, 5, 3}));
  auto parts = split(x, {1, 2}, 1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_TRUE(values_near(parts[0], {2, 1}, {0, 3}));
  EXPECT_TRUE(values_near(parts[1], {2, 2}, {1, 2, 4, 5}));
  EXPECT_TRUE(values_near(transpose(x, 0, 1), {3, 2}, {0, 3, 1, 4, 2, 5}));
  Tensor y = Tensor::arange(24, DType::F32).view({2, 3, 4});
  Tensor t = transpose(y, 0, 2);  // (4, 3, 2): t[k, j, i] = y[i, j, k]
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_FLOAT_EQ(t.data<float>()[(3 * 3 + 1) * 2 + 1], y.data<float>()[(1 * 3 + 1) * 4 + 3]);
  EXPECT_NE(error_of([&] { split(x, {1, 1}, 1); }).find("add up to 2"), std::string::npos);
  EXPECT_NE(error_of([&] { slice(x, 1, 2, 4); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { concat({x, Tensor::zeros({3, 3})}, 1); }).find("does not match"), std::string::npos);
}

TEST(ShapeOps, UnbindGivesZeroCopyRows) {
  Tensor x = Tensor::arange(6, DType::F32).view({3, 2});
  auto rows = unbind(x);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(values_near(rows[1], {2}, {2, 3}));
  EXPECT_TRUE(rows[2].shares_storage(x));
}

TEST(Select, MaskedFillAndWhere) {
  Tensor x = f32({1, 2, 3, 4}, {2, 2});
  Tensor causal = Tensor::from_vector(std::vector<int32_t>{0, 1, 0, 0}, {2, 2});
  EXPECT_TRUE(values_near(masked_fill(x, causal, -1e9), {2, 2}, {1, -1e9, 3, 4}));
  Tensor row_mask = Tensor::from_vector(std::vector<int64_t>{1, 0}, {2});
  EXPECT_TRUE(values_near(masked_fill(x, row_mask, 0), {2, 2}, {0, 2, 0, 4}));
  EXPECT_TRUE(values_near(where(row_mask, x, -x), {2, 2}, {1, -2, 3, -4}));
  EXPECT_NE(error_of([&] { masked_fill(x, Tensor::zeros({3}), 0); }).find("does not match the trailing dims"),
            std::string::npos);
}

// copy_pieces on the CPU: unbind's backward writes zeros for the rows nothing used (they reach it
// undefined), a concatenation of many pieces is one dispatch each way.
TEST(Shapes, UnbindBackwardZerosUnusedRowsAndConcatIsOneDispatch) {
  const Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2}, DType::F64).set_requires_grad(true);
  const std::vector<Tensor> rows = unbind(x);
  const uint64_t before = kernel_dispatches();
  const Tensor joined = concat({rows[2], rows[0]}, 0);
  EXPECT_EQ(kernel_dispatches() - before, 1u);
  EXPECT_EQ(joined.to_vector<double>(), (std::vector<double>{5, 6, 1, 2}));
  autograd::backward(sum(joined * Tensor::from_vector(std::vector<double>{1, 2, 3, 4}, {4}, DType::F64)));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3, 4, 0, 0, 1, 2}));
}

// linear: x W^T + b equals matmul and the add (float64, to the bit), and bad shapes name the op.
TEST(Linear, EqualsMatmulPlusBiasAndNamesBadShapes) {
  Generator gen(3);
  const Tensor x = Tensor::uniform({2, 3, 4}, -1, 1, DType::F64, gen), w = Tensor::uniform({5, 4}, -1, 1, DType::F64, gen);
  const Tensor b = Tensor::uniform({5}, -1, 1, DType::F64, gen);
  EXPECT_TRUE(tensors_near(linear(x, w, b), matmul(x, w, false, true) + b, 0, 0));
  EXPECT_NE(error_of([&] { linear(x, w, Tensor::zeros({4}, DType::F64)); })
                .find("linear: expected x (..., in), weight (out, in), bias (out)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { linear(x, Tensor::zeros({5, 3}, DType::F64), b); }).find("linear"), std::string::npos);
}

// linear_relu: the ReLU applied in linear's bias pass gives relu(linear(...)) to the bit, forward and
// every gradient, in float32 and under bf16 autocast (bf16 answers: the clamp commutes with the one
// rounding), NaN clamped to 0 as relu does; one dispatch forward where linear and relu were two.
TEST(Linear, ReluInTheBiasPassEqualsReluOfLinearToTheBit) {
  for (const std::string precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    const sru::testing::PrecisionScope scope(parse_precision(precision, "precision"));
    const auto run = [](bool fused) {
      Generator gen(5);
      const Tensor x = Tensor::uniform({3, 7, 16}, -1, 1, DType::F32, gen).set_requires_grad(true);
      const Tensor w = Tensor::uniform({24, 16}, -0.5, 0.5, DType::F32, gen).set_requires_grad(true);
      const Tensor b = Tensor::uniform({24}, -0.5, 0.5, DType::F32, gen).set_requires_grad(true);
      const uint64_t before = kernel_dispatches();
      const Tensor y = fused ? linear_relu(x, w, b) : relu(linear(x, w, b));
      const uint64_t forward = kernel_dispatches() - before;
      const Tensor weights = Tensor::uniform(y.shape(), -1, 1, DType::F32, gen);
      autograd::backward(sum(cast(y, DType::F32) * weights));
      return std::tuple{y.to(DType::F32), x.grad(), w.grad(), b.grad(), forward};
    };
    const auto [y1, gx1, gw1, gb1, n1] = run(true);
    const auto [y0, gx0, gw0, gb0, n0] = run(false);
    EXPECT_EQ(n1 + 1, n0);
    for (const auto& [a, e] : {std::pair{y1, y0}, {gx1, gx0}, {gw1, gw0}, {gb1, gb0}}) {
      ASSERT_EQ(a.dtype(), e.dtype());
      EXPECT_EQ(std::memcmp(a.data_ptr(), e.data_ptr(), a.nbytes()), 0);
    }
    const std::vector<float> values = y1.to_vector<float>();
    EXPECT_GT(std::count(values.begin(), values.end(), 0.f), 0);  // some clamped, some not
    EXPECT_LT(std::count(values.begin(), values.end(), 0.f), static_cast<long>(values.size()));
  }
  const Tensor nan_row = Tensor::full({1, 2}, std::nan(""));
  const Tensor y = linear_relu(nan_row, Tensor::ones({3, 2}), Tensor::zeros({3}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 0, 0}));
}
