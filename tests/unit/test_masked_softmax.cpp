// Forward values of masked_softmax / masked_log_softmax against hand-computed results and a plain
// scalar reference with numpy broadcasting (sharing no code with the kernels), the exact zeros and
// -infs, every broadcast form of the mask, the gradient at masked positions, the losses built on
// them, and the shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/engine.h"
#include "ops/ops.h"
#include "testing.h"

using namespace sru;
using sru::testing::error_of;
using sru::testing::f64;
using sru::testing::tensors_near;
using sru::testing::values_near;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor mask_of(std::vector<int32_t> v, Shape s, DType dtype = DType::I32) {
  return Tensor::from_vector(v, s).to(dtype);
}

// The mask element of x's flat element i under right-aligned numpy broadcasting.
int64_t mask_element(int64_t i, const Shape& x, const Shape& m) {
  int64_t at = 0, stride = 1;
  for (int d = static_cast<int>(x.size()) - 1, dm = static_cast<int>(m.size()) - 1; dm >= 0; --d, --dm) {
    const int64_t coord = i % x[d];
    i /= x[d];
    at += (m[dm] == 1 ? 0 : coord) * stride;
    stride *= m[dm];
  }
  return at;
}

// Scalar reference: per row of the last dim, softmax over the unmasked entries.
std::vector<double> reference(const Tensor& x, const Tensor& mask, bool log) {
  const auto xv = x.to_vector<double>(), mv = mask.to_vector<double>();
  const int64_t C = x.size(-1);
  std::vector<double> out(xv.size());
  for (size_t r = 0; r < xv.size() / C; ++r) {
    auto hidden = [&](int64_t c) { return mv[mask_element(r * C + c, x.shape(), mask.shape())] != 0.0; };
    double mx = -kInf;
    for (int64_t c = 0; c < C; ++c)
      if (!hidden(c)) mx = std::max(mx, xv[r * C + c]);
    double s = 0.0;
    for (int64_t c = 0; c < C; ++c)
      if (!hidden(c)) s += std::exp(xv[r * C + c] - mx);
    for (int64_t c = 0; c < C; ++c) {
      const double lp = xv[r * C + c] - mx - std::log(s);
      out[r * C + c] = hidden(c) || mx == -kInf ? (log ? -kInf : 0.0) : (log ? lp : std::exp(lp));
    }
  }
  return out;
}

// Exact equality for the infinities and zeros, near for the rest.
::testing::AssertionResult matches(const Tensor& y, const std::vector<double>& expected, double tol = 1e-12) {
  const auto v = y.to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) {
    const bool exact_needed = std::isinf(expected[i]) || expected[i] == 0.0;
    if (exact_needed ? v[i] != expected[i] : !(std::abs(v[i] - expected[i]) <= tol * (1 + std::abs(expected[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << v[i] << " vs " << expected[i];
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

TEST(MaskedSoftmax, HandComputedRowsWithExactZerosAndFullyMaskedRow) {
  const Tensor x = f64({1, 2, 3, 0.5, -1, 4, 7, 7, 9}, {3, 3});
  const Tensor mask = mask_of({0, 1, 0, 1, 1, 1, 1, 0, 1}, {3, 3});
  const double e = std::exp(2.0);  // row 0: entries 1 and 3 share the mass
  const std::vector<double> probs = {1 / (1 + e), 0, e / (1 + e), 0, 0, 0, 0, 1, 0};
  EXPECT_TRUE(matches(masked_softmax(x, mask), probs));
  const std::vector<double> logs = {-std::log1p(e), -kInf, 2 - std::log1p(e), -kInf, -kInf, -kInf, -kInf, 0, -kInf};
  EXPECT_TRUE(matches(masked_log_softmax(x, mask), logs));
  // Row 2 has one unmasked entry: probability exactly 1, log-probability exactly 0.
  EXPECT_EQ(masked_softmax(x, mask).to_vector<double>()[7], 1.0);
  EXPECT_EQ(masked_log_softmax(x, mask).to_vector<double>()[7], 0.0);
}

TEST(MaskedSoftmax, NoMaskOrAllZeroMaskIsPlainSoftmax) {
  Generator gen(3);
  const Tensor x = Tensor::uniform({4, 7}, -3, 3, DType::F64, gen);
  EXPECT_TRUE(tensors_near(masked_softmax(x, Tensor()), softmax(x), 0, 0));
  EXPECT_TRUE(tensors_near(masked_log_softmax(x, Tensor()), log_softmax(x), 0, 0));
  EXPECT_TRUE(tensors_near(masked_softmax(x, Tensor::zeros({7})), softmax(x), 1e-15, 1e-15));
  EXPECT_TRUE(tensors_near(masked_log_softmax(x, Tensor::zeros({4, 7}, DType::I64)), log_softmax(x), 1e-15, 1e-15));
}

TEST(MaskedSoftmax, LargeScoresStayFinite) {
  const Tensor x = f64({1000, 999, -1000, 5000}, {1, 4});
  const Tensor mask = mask_of({0, 0, 0, 1}, {1, 4});
  const double l = std::log1p(std::exp(-1.0));
  EXPECT_TRUE(matches(masked_log_softmax(x, mask), {-l, -1 - l, -2000 - l, -kInf}));
  EXPECT_TRUE(matches(masked_softmax(x.to(DType::F32), mask), {std::exp(-l), std::exp(-1 - l), 0, 0}, 1e-6));
}

TEST(MaskedSoftmax, EveryBroadcastFormMatchesTheReference) {
  struct Case {
    Shape x, mask;
  };
  const std::vector<Case> cases = {
      {{2, 3, 5}, {2, 1, 5}},        // key padding over (B, R, C) scores
      {{6, 3, 5}, {3, 5}},           // causal (R, C) over (B*H, R, C)
      {{2, 5}, {2, 5}},              // (B, C) over (B, C)
      {{2, 3, 5}, {5}},              // one row for all
      {{2, 3, 4, 5}, {2, 1, 1, 5}},  // per-batch padding over (B, H, R, C)
      {{2, 3, 4, 5}, {3, 1, 5}},     // per-head mask
      {{2, 3, 5}, {1, 3, 1}},        // whole rows masked: the last dim broadcast
      {{2, 3, 5}, {2, 3, 5}},        // full
      {{3, 5}, {1}},                 // a single flag
  };
  uint64_t seed = 10;
  for (const Case& c : cases) {
    for (DType mask_dtype : {DType::I32, DType::I64, DType::F32, DType::F64}) {
      SCOPED_TRACE(::testing::Message() << "x " << shape_str(c.x) << " mask " << shape_str(c.mask) << " "
                                        << dtype_name(mask_dtype));
      Generator gen(++seed);
      const Tensor x = Tensor::uniform(c.x, -3, 3, DType::F64, gen);
      // Roughly a third masked, so some rows lose several entries and small masks can hide whole rows.
      Tensor mask = Tensor::uniform(c.mask, 0, 1, DType::F64, gen);
      std::vector<int32_t> bits;
      for (double u : mask.to_vector<double>()) bits.push_back(u < 0.35);
      mask = mask_of(bits, c.mask, mask_dtype);
      EXPECT_TRUE(matches(masked_softmax(x, mask), reference(x, mask, false)));
      EXPECT_TRUE(matches(masked_log_softmax(x, mask), reference(x, mask, true)));
      EXPECT_TRUE(matches(masked_softmax(x.to(DType::F32), mask), reference(x.to(DType::F32), mask, false), 1e-6));
    }
  }
}

TEST(MaskedSoftmax, GradientAtMaskedPositionsIsExactlyZeroEvenFromInfiniteOutputs) {
  // An incoming gradient of ones everywhere, masked positions and the fully masked row included.
  for (bool log : {false, true}) {
    SCOPED_TRACE(log);
    Tensor x = f64({0.3, -1, 2, 0.5, 1, 1, 1, 1}, {2, 4});
    x.set_requires_grad(true);
    const Tensor mask = mask_of({1, 0, 0, 1, 1, 1, 1, 1}, {2, 4});
    const Tensor y = log ? masked_log_softmax(x, mask) : masked_softmax(x, mask);
    autograd::backward(y, Tensor::ones({2, 4}, DType::F64));
    const auto g = x.grad().to_vector<double>();
    for (int i : {0, 3, 4, 5, 6, 7}) EXPECT_EQ(g[i], 0.0) << "element " << i;
    for (double v : g) EXPECT_TRUE(std::isfinite(v));
    // Softmax rows sum to 1, so a constant upstream gradient gives no gradient; log_softmax gives
    // 1 - 2 p at the two unmasked entries.
    const double p1 = 1 / (1 + std::exp(3.0));
    EXPECT_NEAR(g[1], log ? 1 - 2 * p1 : 0.0, 1e-15);
    EXPECT_NEAR(g[2], log ? 1 - 2 * (1 - p1) : 0.0, 1e-15);
  }
}

TEST(MaskedSoftmax, NegativeLogLikelihoodOfTargetPositions) {
  // The SQuAD loss: start scores (B, L) with padded positions, target positions, mean NLL.
  Tensor s = f64({0.5, 2, -1, 3, 1, 0.25, -2, 4}, {2, 4});
  s.set_requires_grad(true);
  const Tensor mask = mask_of({0, 0, 0, 1, 0, 0, 1, 1}, {2, 4});
  const Tensor target = Tensor::from_vector(std::vector<int64_t>{1, 0}, {2});
  const Tensor logp = masked_log_softmax(s, mask);
  const auto lp = logp.to_vector<double>();
  const double expected = -(lp[1] + lp[4]) / 2;
  const Tensor loss_a = cross_entropy(logp, target);
  EXPECT_NEAR(loss_a.item<double>(), expected, 1e-14);
  autograd::backward(loss_a);
  const auto ga = s.grad().to_vector<double>();
  s.set_grad(Tensor());
  // The same through masked_fill with -inf and cross_entropy directly.
  const Tensor loss_b = cross_entropy(masked_fill(s, mask, -kInf), target);
  EXPECT_NEAR(loss_b.item<double>(), expected, 1e-14);
  autograd::backward(loss_b);
  const auto gb = s.grad().to_vector<double>();
  const auto p = masked_softmax(s, mask).to_vector<double>();
  for (int i = 0; i < 8; ++i) {
    const double want = (p[i] - (i == 1 || i == 4 ? 1.0 : 0.0)) / 2;
    EXPECT_NEAR(ga[i], want, 1e-14) << i;
    EXPECT_NEAR(gb[i], want, 1e-14) << i;
  }
  for (int i : {3, 6, 7}) EXPECT_EQ(ga[i], 0.0);
}

TEST(MaskedSoftmax, FullyMaskedRowWithIgnoredTargetAddsNothing) {
  Tensor s = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  s.set_requires_grad(true);
  const Tensor mask = mask_of({0, 1, 0, 1, 1, 1}, {2, 3});
  const Tensor loss = cross_entropy(masked_log_softmax(s, mask), Tensor::from_vector(std::vector<int64_t>{2, -100}, {2}));
  EXPECT_NEAR(loss.item<double>(), std::log1p(std::exp(-2.0)), 1e-14);
  autograd::backward(loss);
  for (double g : s.grad().to_vector<double>()) EXPECT_TRUE(std::isfinite(g));
  EXPECT_TRUE(values_near(s.grad().narrow0(1, 1), {1, 3}, {0, 0, 0}, 0, 0));
}

TEST(MaskedSoftmax, RefusesMasksThatDoNotBroadcast) {
  const Tensor x = Tensor::zeros({2, 3, 5});
  std::string m = error_of([&] { masked_softmax(x, Tensor::zeros({2, 5})); });
  EXPECT_NE(m.find("masked_softmax: mask of shape (2, 5) does not broadcast to x of shape (2, 3, 5)"), std::string::npos)
      << m;
  EXPECT_NE(m.find("dim 0 of the mask is 2, x has 3"), std::string::npos) << m;
  m = error_of([&] { masked_log_softmax(x, Tensor::zeros({2, 3, 4})); });
  EXPECT_NE(m.find("masked_log_softmax: mask of shape (2, 3, 4)"), std::string::npos) << m;
  m = error_of([&] { masked_softmax(x, Tensor::zeros({1, 2, 3, 5})); });
  EXPECT_NE(m.find("more dims than x"), std::string::npos) << m;
  m = error_of([&] { masked_softmax(Tensor::zeros({}), Tensor::zeros({})); });
  EXPECT_NE(m.find("no dim"), std::string::npos) << m;
  m = error_of([&] { masked_softmax(Tensor::zeros({2, 3}, DType::I64), Tensor::zeros({3})); });
  EXPECT_NE(m.find("floating"), std::string::npos) << m;
}

TEST(MaskedSoftmax, EmptyRowsAndColumns) {
  EXPECT_EQ(masked_softmax(Tensor::zeros({0, 4}), Tensor::zeros({4})).shape(), (Shape{0, 4}));
  EXPECT_EQ(masked_log_softmax(Tensor::zeros({3, 0}), Tensor::zeros({3, 0})).shape(), (Shape{3, 0}));
}
