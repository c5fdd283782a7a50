// The AVX512-BF16 GEMM kernels (ops/cpu/gemm_bf16.h) against float64 products of the bfloat16-rounded
// operands, in every layout and at the edges of their blocking, and matmul / linear / bmm at precision
// bf16 taking them. Skipped on processors without AVX512-BF16 (the rounded-operand sgemm path is
// tested in test_ops_forward.cpp either way).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/float16.h"
#include "core/parallel.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/ops.h"

using namespace sru;

namespace {

#define SKIP_WITHOUT_BF16_KERNELS()                                                          \
  if (!cpu::bf16_dot_kernels_available()) GTEST_SKIP() << "this processor has no AVX512-BF16"

struct Operands {
  int64_t M, N, K;
  bool ta, tb;
  std::vector<float> a, b;  // stored as the flags say: a (K, M) when ta, b (N, K) when tb
  float a_at(int64_t i, int64_t k) const { return a[static_cast<size_t>(ta ? k * M + i : i * K + k)]; }
  float b_at(int64_t k, int64_t j) const { return b[static_cast<size_t>(tb ? j * K + k : k * N + j)]; }
  int64_t lda() const { return ta ? M : K; }
  int64_t ldb() const { return tb ? K : N; }
};

Operands random_operands(int64_t M, int64_t N, int64_t K, bool ta, bool tb, uint64_t seed) {
  Generator gen(seed);
  Operands o{M, N, K, ta, tb, {}, {}};
  o.a = Tensor::uniform({M * K}, -1, 1, DType::F32, gen).to_vector<float>();
  o.b = Tensor::uniform({K * N}, -1, 1, DType::F32, gen).to_vector<float>();
  return o;
}

// |got - (alpha sum round(a) round(b) + beta c0)| within the FP32 summation bound: gamma_K sum |terms|
// for the sum (K adds in whatever order), plus the rounding of alpha's product and of the add of beta c0.
void expect_rounded_product(const Operands& o, float alpha, float beta, const std::vector<float>& c0,
                            const std::vector<float>& got, const std::string& where) {
  const double gamma = (static_cast<double>(o.K) + 3) * std::ldexp(1.0, -24) * 1.01;
  int bad = 0;
  for (int64_t i = 0; i < o.M; ++i)
    for (int64_t j = 0; j < o.N; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t k = 0; k < o.K; ++k) {
        const double term = double(round_to_bf16(o.a_at(i, k))) * double(round_to_bf16(o.b_at(k, j)));
        sum += term;
        magnitude += std::abs(term);
      }
      const size_t at = static_cast<size_t>(i * o.N + j);
      const double expected = alpha * sum + (beta != 0 ? beta * double(c0[at]) : 0.0);
      const double bound = gamma * (std::abs(alpha) * magnitude + std::abs(beta * double(c0[at]))) + 1e-30;
      if (!(std::abs(got[at] - expected) <= bound) && ++bad <= 3)
        ADD_FAILURE() << where << ": c(" << i << ", " << j << ") = " << got[at] << ", expected " << expected << " +- "
                      << bound;
    }
  EXPECT_EQ(bad, 0) << where;
}

}  // namespace

TEST(Bf16DotGemm, EveryLayoutAndBlockEdgeMatchesTheRoundedProduct) {
  SKIP_WITHOUT_BF16_KERNELS();
  // Shapes around the blocking: 12-row and 32-column panels (1, 11, 13, 33 rows / columns), odd K (the
  // last pair's half), K over one 256-value block (257, 600), N over one 2048-column block (2100).
  const int64_t shapes[][3] = {{1, 1, 1}, {11, 33, 7}, {13, 31, 257}, {40, 70, 600}, {5, 2100, 9}, {97, 65, 128}};
  uint64_t seed = 11;
  for (const auto& s : shapes)
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        const int64_t M = s[0], N = s[1], K = s[2];
        const Operands o = random_operands(M, N, K, ta, tb, ++seed);
        const std::string where = std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
                                  (ta ? " ta" : "") + (tb ? " tb" : "");
        // beta 0 never reads c: NaN there must not reach the result.
        std::vector<float> c(static_cast<size_t>(M * N), std::numeric_limits<float>::quiet_NaN());
        cpu::bf16_dot_gemm(ta, tb, M, N, K, 1.0f, o.a.data(), o.lda(), o.b.data(), o.ldb(), 0.0f, c.data(), N);
        expect_rounded_product(o, 1.0f, 0.0f, c, c, where + " float beta 0");
        // alpha and beta, c read; the same operands as bf16 storage give the same bits.
        Generator c_gen(seed);
        const std::vector<float> c0 = Tensor::uniform({M * N}, -1, 1, DType::F32, c_gen).to_vector<float>();
        std::vector<float> scaled = c0;
        cpu::bf16_dot_gemm(ta, tb, M, N, K, 0.5f, o.a.data(), o.lda(), o.b.data(), o.ldb(), -2.0f, scaled.data(), N);
        expect_rounded_product(o, 0.5f, -2.0f, c0, scaled, where + " float alpha 0.5 beta -2");
        std::vector<bf16> a16(o.a.begin(), o.a.end()), b16(o.b.begin(), o.b.end());
        std::vector<float> from_bf16 = c0;
        cpu::bf16_dot_gemm(ta, tb, M, N, K, 0.5f, a16.data(), o.lda(), b16.data(), o.ldb(), -2.0f, from_bf16.data(), N);
        EXPECT_EQ(from_bf16, scaled) << where << ": bf16 storage and float32 rounded while packed";
      }
}

TEST(Bf16DotGemm, RoundsLikeTheScalarRuleAndKeepsNaN) {
  SKIP_WITHOUT_BF16_KERNELS();
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even, 1; 1 + 3 * 2^-8 rounds up to 1 + 2^-6.
  // One product per element: a (1, 2) . b (2, 3), the exact result of the rounded values.
  const float tie = 1.0f + std::ldexp(1.0f, -8), up = 1.0f + 3 * std::ldexp(1.0f, -8);
  const std::vector<float> a = {tie, up};
  const std::vector<float> b = {1, 0, 2, 0, 1, 1};  // rows k = 0, 1
  std::vector<float> c(3);
  cpu::bf16_dot_gemm(false, false, 1, 3, 2, 1.0f, a.data(), 2, b.data(), 3, 0.0f, c.data(), 3);
  EXPECT_EQ(c[0], 1.0f);
  EXPECT_EQ(c[1], 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(c[2], 3.0f + std::ldexp(1.0f, -6));
  const std::vector<float> with_nan = {std::numeric_limits<float>::quiet_NaN(), 1.0f};
  cpu::bf16_dot_gemm(false, false, 1, 3, 2, 1.0f, with_nan.data(), 2, b.data(), 3, 0.0f, c.data(), 3);
  for (float v : c) EXPECT_TRUE(std::isnan(v));
}

TEST(Bf16DotGemm, ResultsDoNotDependOnTheThreadCount) {
  SKIP_WITHOUT_BF16_KERNELS();
  const int before = num_threads();
  const Operands o = random_operands(300, 520, 700, false, true, 5);
  std::vector<std::vector<float>> results;
  for (const int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::vector<float> c(300 * 520);
    cpu::bf16_dot_gemm(false, true, 300, 520, 700, 1.0f, o.a.data(), o.lda(), o.b.data(), o.ldb(), 0.0f, c.data(), 520);
    results.push_back(c);
  }
  set_num_threads(before);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

// matmul, bmm (float32 operands at precision bf16) and linear / matmul over bf16 tensors take the
// kernels where they pay and agree with the rounded-operand sgemm path within the summation bound.
TEST(Bf16DotGemm, PrecisionBf16OpsTakeTheKernelsWhereTheyPay) {
  SKIP_WITHOUT_BF16_KERNELS();
  struct Restore {
    ~Restore() {
      set_matmul_precision(MatmulPrecision::Highest);
      cpu::force_bf16_dot_kernels_off(false);
    }
  } restore;
  const int64_t M = 96, K = 160, N = 200;
  EXPECT_TRUE(cpu::bf16_dot_gemm_pays(M, N, K));
  EXPECT_FALSE(cpu::bf16_dot_gemm_pays(4, 4, 4)) << "tiny products stay on sgemm";
  set_matmul_precision(MatmulPrecision::Medium);
  const Tensor a = Tensor::uniform({M, K}, -1, 1), b = Tensor::uniform({K, N}, -1, 1);
  const Tensor a3 = Tensor::uniform({3, M, K}, -1, 1), b3 = Tensor::uniform({3, N, K}, -1, 1);
  const Tensor x16 = a.to(DType::BF16), w16 = Tensor::uniform({N, K}, -1, 1).to(DType::BF16);
  const Tensor bias16 = Tensor::uniform({N}, -1, 1).to(DType::BF16);
  const auto run = [&] {
    return std::vector<Tensor>{matmul(a, b), bmm(a3, b3, false, true), linear(x16, w16, bias16).to(DType::F32),
                               matmul(x16, w16, false, true).to(DType::F32)};
  };
  const std::vector<Tensor> kernels = run();
  cpu::force_bf16_dot_kernels_off(true);
  const std::vector<Tensor> rounded = run();
  const char* names[] = {"matmul", "bmm", "linear bf16", "matmul bf16"};
  for (size_t i = 0; i < kernels.size(); ++i) {
    const std::vector<float> k = kernels[i].to_vector<float>(), r = rounded[i].to_vector<float>();
    ASSERT_EQ(k.size(), r.size());
    // Both are FP32 sums of the same exact products: within 2 gamma_K of sum |terms| <= K (|a|, |b| <= 1);
    // the bf16 outputs also round once each (2^-8 relative).
    const double bound = 2 * K * std::ldexp(1.0, -24) * K + (i >= 2 ? std::ldexp(1.0, -8) * K : 0.0);
    double worst = 0;
    bool differ = false;
    for (size_t j = 0; j < k.size(); ++j) {
      worst = std::max(worst, std::abs(double(k[j]) - r[j]));
      differ |= k[j] != r[j];
    }
    EXPECT_LE(worst, bound) << names[i];
    if (i < 2) EXPECT_TRUE(differ) << names[i] << ": the kernels sum in another order, so some bits differ";
  }
}

// The epilogue (Bf16Epilogue): the bias, the ReLU and the rounding to a bf16 out in the kernels' last
// K block give the bits of the float32 product followed by those passes (what linear and a bf16 C did
// before), with beta's old value read from out, K within one block (no float32 c at all) and over
// several (c the partials' scratch), out's rows wider than N left alone past N.
TEST(Bf16DotGemm, TheEpilogueWritesTheBitsOfTheSeparatePasses) {
  SKIP_WITHOUT_BF16_KERNELS();
  const int64_t shapes[][3] = {{13, 31, 7}, {40, 70, 600}, {5, 2100, 257}, {97, 65, 256}};
  uint64_t seed = 41;
  for (const auto& s : shapes)
    for (const bool tb : {false, true})
      for (const int mode : {0, 1, 2}) {  // 0: rounding only, beta 1; 1: bias; 2: bias and ReLU
        const int64_t M = s[0], N = s[1], K = s[2], ldo = N + 3;
        const Operands o = random_operands(M, N, K, false, tb, ++seed);
        const std::string where = std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
                                  (tb ? " tb" : "") + " mode " + std::to_string(mode);
        Generator gen(seed);
        const std::vector<float> bias = Tensor::uniform({N}, -1, 1, DType::F32, gen).to_vector<float>();
        const std::vector<float> old = Tensor::uniform({M * ldo}, -1, 1, DType::F32, gen).to_vector<float>();
        const float beta = mode == 0 ? 1.0f : 0.0f;
        // The separate passes: float32 c from the old values (widened bf16), then bias, clamp, rounding.
        std::vector<bf16> expected(old.begin(), old.end());
        std::vector<float> c(static_cast<size_t>(M * N));
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) c[static_cast<size_t>(i * N + j)] = float(expected[static_cast<size_t>(i * ldo + j)]);
        cpu::bf16_dot_gemm(false, tb, M, N, K, 0.5f, o.a.data(), o.lda(), o.b.data(), o.ldb(), beta, c.data(), N);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            float v = c[static_cast<size_t>(i * N + j)];
            if (mode >= 1) v += bias[static_cast<size_t>(j)];
            if (mode == 2) v = v > 0.0f ? v : 0.0f;
            expected[static_cast<size_t>(i * ldo + j)] = bf16(v);
          }
        std::vector<bf16> out(old.begin(), old.end());
        std::vector<float> partials(K > cpu::kBf16DotKBlock ? static_cast<size_t>(M * ldo) : 0);
        const cpu::Bf16Epilogue ep{mode >= 1 ? bias.data() : nullptr, mode == 2, out.data(), ldo};
        cpu::bf16_dot_gemm(false, tb, M, N, K, 0.5f, o.a.data(), o.lda(), o.b.data(), o.ldb(), beta,
                           partials.empty() ? nullptr : partials.data(), ldo, ep);
        int differ = 0;
        for (size_t e = 0; e < out.size(); ++e) differ += out[e].bits != expected[e].bits;
        EXPECT_EQ(differ, 0) << where;
      }
}
