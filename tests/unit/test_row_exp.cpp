// The CPU softmax family's float32 row primitives (ops/cpu/row_exp.h): the exp polynomial's accuracy
// and edge values, each vector path the processor has (AVX-512's sixteen lanes, AVX2's eight) equal to
// the one-value path bit for bit (every length across the lane boundaries), the sums' lane order, and
// the kept-class sum of label smoothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "ops/cpu/row_exp.h"
#include "ops/sru_recurrence.h"

using namespace sru;
namespace rows = sru::cpu::rows;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

std::vector<float> random_row(int64_t n, double low, double high, uint64_t seed) {
  Generator gen(seed);
  return Tensor::uniform({n}, low, high, DType::F32, gen).to_vector<float>();
}

// The lane sum row_exp.h promises: element c in lane c mod 8, lanes added in order.
template <typename F>
double lane_sum(int64_t n, F&& term) {
  double lanes[8] = {};
  for (int64_t c = 0; c < n; ++c) lanes[c % 8] += term(c);
  double s = 0.0;
  for (double l : lanes) s += l;
  return s;
}

// Runs `check` once for each path the processor has (AVX-512, AVX2, scalar), narrowing the CPU kernels'
// ISA limit; the limit is restored afterwards.
template <typename F>
void on_every_path(F&& check) {
  struct Restore {
    ~Restore() { cpu::limit_sru_kernel_isa(cpu::SruKernelIsa::Avx512); }
  } restore;
  std::string done;
  using cpu::SruKernelIsa;
  for (const SruKernelIsa isa : {SruKernelIsa::Avx512, SruKernelIsa::Avx2, SruKernelIsa::Baseline}) {
    cpu::limit_sru_kernel_isa(isa);
    const std::string path = rows::isa();
    if (done.find(path) != std::string::npos) continue;  // the processor lacks the wider build
    done += path + " ";
    SCOPED_TRACE("path: " + path);
    check();
  }
  EXPECT_NE(done.find("scalar"), std::string::npos);
}

}  // namespace

TEST(RowExp, WithinTwoUlpOfTheExactValueAndExactAtTheEdges) {
  double worst_ulps = 0.0;
  for (float x = -87.3f; x <= 88.0f; x += 0.00137f) {
    const double exact = std::exp(static_cast<double>(x));
    const double ulp = std::ldexp(1.0, std::ilogb(exact) - 23);
    worst_ulps = std::max(worst_ulps, std::fabs(static_cast<double>(rows::exp(x)) - exact) / ulp);
  }
  EXPECT_LE(worst_ulps, 2.0);
  EXPECT_GT(worst_ulps, 0.0);  // a polynomial, not the library's exp
  EXPECT_EQ(rows::exp(0.0f), 1.0f);
  EXPECT_EQ(rows::exp(-kInf), 0.0f);
  EXPECT_EQ(rows::exp(-88.0f), 0.0f);  // subnormal results are flushed
  EXPECT_EQ(rows::exp(88.5f), kInf);
  EXPECT_EQ(rows::exp(kInf), kInf);
  EXPECT_TRUE(std::isnan(rows::exp(std::numeric_limits<float>::quiet_NaN())));
}

TEST(RowExp, EveryLengthGivesTheOneValuePathsBitsAndLaneOrderSums) {
  on_every_path([] {
    for (int64_t n = 0; n <= 37; ++n) {
      std::vector<float> x = random_row(n, -30.0, 5.0, 7 + n);
      if (n > 3) x[2] = -kInf;  // a masked class
      if (n > 9) x[9] = -100.0f;
      const float shift = n > 0 ? 1.25f : 0.0f, scale = 0.3f;
      std::vector<float> out(static_cast<size_t>(n));
      rows::exp_scaled(x.data(), n, shift, scale, out.data());
      for (int64_t c = 0; c < n; ++c)
        ASSERT_EQ(bits_of(out[c]), bits_of(rows::exp(x[c] - shift) * scale)) << "n " << n << ", c " << c;
      const double expected = lane_sum(n, [&](int64_t c) { return static_cast<double>(rows::exp(x[c] - shift)); });
      EXPECT_EQ(rows::sum_exp(x.data(), n, shift), expected) << "n " << n;
      // The softmax forward's pair: exps stored while summed, then scaled: exp_scaled's bits.
      std::vector<float> stored(static_cast<size_t>(n));
      EXPECT_EQ(rows::exp_and_sum(x.data(), n, shift, stored.data()), expected) << "n " << n;
      rows::scale(stored.data(), n, scale);
      for (int64_t c = 0; c < n; ++c) ASSERT_EQ(bits_of(stored[c]), bits_of(out[c])) << "n " << n << ", c " << c;
      float best = -kInf;
      for (float v : x) best = std::max(best, v);
      EXPECT_EQ(rows::max(x.data(), n), best) << "n " << n;
      const rows::KeptSum kept = rows::sum_kept(x.data(), n);
      EXPECT_EQ(kept.sum, lane_sum(n, [&](int64_t c) { return x[c] == -kInf ? 0.0 : static_cast<double>(x[c]); }));
      EXPECT_EQ(kept.count, n - (n > 3 ? 1 : 0)) << "n " << n;
    }
    // In place, as the softmax kernels call them.
    std::vector<float> x = random_row(21, -5.0, 5.0, 3), y = x, z = x;
    rows::exp_scaled(y.data(), 21, 0.5f, 2.0f, y.data());
    for (int c = 0; c < 21; ++c) EXPECT_EQ(bits_of(y[c]), bits_of(rows::exp(x[c] - 0.5f) * 2.0f));
    rows::exp_and_sum(z.data(), 21, 0.5f, z.data());
    rows::scale(z.data(), 21, 2.0f);
    for (int c = 0; c < 21; ++c) EXPECT_EQ(bits_of(z[c]), bits_of(y[c]));
  });
}

// Layer norm's row sums (the float32 rows of ops/cpu/layer_norm.cpp): the lane order row_exp.h
// promises, to the bit, for every length up to 37 and a long row, with and without the weight.
TEST(RowExp, LayerNormSumsTakeTheLaneOrder) {
  on_every_path([] {
    // 24 long rows: a product rounded or not (a fused multiply-add) changes about one such sum in four.
    std::vector<std::pair<int64_t, uint64_t>> rows_of;  // (length, seed)
    for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 37}) rows_of.emplace_back(n, 40 + n);
    for (uint64_t seed = 0; seed < 24; ++seed) rows_of.emplace_back(1027, 1000 + 3 * seed);
    for (const auto& [n, seed] : rows_of) {
      SCOPED_TRACE(::testing::Message() << "n " << n << ", seed " << seed);
      const std::vector<float> x = random_row(n, -3.0, 4.0, seed), g = random_row(n, -1.0, 1.0, seed + 1),
                               w = random_row(n, 0.5, 1.5, seed + 2);
      const double mean = n > 0 ? rows::sum(x.data(), n) / n : 0.0, rstd = 1.7;
      EXPECT_EQ(rows::sum_squared_deviations(x.data(), n, mean), lane_sum(n, [&](int64_t c) {
                  const double d = static_cast<double>(x[c]) - mean;
                  return d * d;
                }));
      for (const float* weight : {w.data(), static_cast<const float*>(nullptr)}) {
        const auto gh = [&](int64_t c) { return weight ? static_cast<double>(g[c] * weight[c]) : static_cast<double>(g[c]); };
        const rows::NormGradSums sums = rows::norm_grad_sums(g.data(), weight, x.data(), n, mean, rstd);
        EXPECT_EQ(sums.sum_gh, lane_sum(n, gh));
        EXPECT_EQ(sums.sum_gh_xhat,
                  lane_sum(n, [&](int64_t c) { return gh(c) * ((static_cast<double>(x[c]) - mean) * rstd); }));
      }
      EXPECT_EQ(rows::dot(x.data(), g.data(), n),
                lane_sum(n, [&](int64_t c) { return static_cast<double>(x[c]) * static_cast<double>(g[c]); }));
    }
  });
}

TEST(RowExp, NaNReachesTheSumsAndIsPassedOverByTheMax) {
  on_every_path([] {
    // AVX-512: in a sixteen-lane step, in the eight-lane step after it, in the scalar tail.
    for (const int at : {12, 20, 25}) {
      std::vector<float> x = random_row(27, -3.0, 3.0, 11);
      x[at] = std::numeric_limits<float>::quiet_NaN();
      float best = -kInf;
      for (int c = 0; c < 27; ++c)
        if (c != at) best = std::max(best, x[c]);
      EXPECT_EQ(rows::max(x.data(), 27), best);
      EXPECT_TRUE(std::isnan(rows::sum_exp(x.data(), 27, best)));
      EXPECT_TRUE(std::isnan(rows::sum_kept(x.data(), 27).sum));
      std::vector<float> out(27);
      rows::exp_scaled(x.data(), 27, best, 1.0f, out.data());
      EXPECT_TRUE(std::isnan(out[at]));
      EXPECT_FALSE(std::isnan(out[at - 1]));
    }
  });
}

TEST(RowExp, EdgeValuesInEveryLaneGiveTheOneValuePathsResults) {
  on_every_path([] {
    const float specials[] = {88.5f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                              -std::numeric_limits<float>::infinity(), -88.0f, 88.0f, -87.3f, 0.0f};
    for (int64_t n = 8; n <= 33; ++n)
      for (int64_t at = 0; at < n; ++at) {
        std::vector<float> x = random_row(n, -3.0, 3.0, 100 + n);
        for (int k = 0; k < 8; ++k) x[(at + k) % n] = specials[k];
        std::vector<float> out(static_cast<size_t>(n));
        rows::exp_scaled(x.data(), n, 0.0f, 1.0f, out.data());
        for (int64_t c = 0; c < n; ++c) {
          const float want = rows::exp(x[c]);
          if (std::isnan(want)) EXPECT_TRUE(std::isnan(out[c])) << "n " << n << ", c " << c;
          else EXPECT_EQ(bits_of(out[c]), bits_of(want)) << "n " << n << ", c " << c << ", x " << x[c];
        }
      }
  });
}
