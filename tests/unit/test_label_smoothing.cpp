// Label-smoothed cross-entropy (cross_entropy's label_smoothing, ops/softmax_math.h): forward values
// against PyTorch's formula (nn.CrossEntropyLoss(label_smoothing=eps): (1 - eps) nll + eps / C * sum_c
// -log p_c, ignored rows left out, mean over the counted rows) computed by hand, the gradient
// (softmax - target distribution) * scale, masked (-inf) classes, eps = 0 as the plain loss bit for
// bit, and the argument check. (Finite-difference gradients: gradcheck/test_gradcheck_label_smoothing.cpp;
// CUDA: parity/test_cuda_parity_label_smoothing.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/engine.h"
#include "ops/ops.h"
#include "testing.h"

using namespace sru;
using sru::testing::error_of;
using sru::testing::f32;
using sru::testing::f64;
using sru::testing::i64;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// PyTorch's formula, row by row in double: sum over counted rows of (1 - eps) nll + eps mean_c(-log p_c).
double torch_formula(const std::vector<std::vector<double>>& logits, const std::vector<int64_t>& target, double eps,
                     bool mean, int64_t ignore_index = -100) {
  double total = 0;
  int64_t counted = 0;
  for (size_t n = 0; n < logits.size(); ++n) {
    if (target[n] == ignore_index) continue;
    const auto& x = logits[n];
    double mx = -kInf, s = 0, minus_log_p = 0;
    for (double v : x) mx = std::max(mx, v);
    for (double v : x) s += std::exp(v - mx);
    const double lse = mx + std::log(s);
    for (double v : x) minus_log_p += lse - v;
    total += (1 - eps) * (lse - x[target[n]]) + eps * minus_log_p / static_cast<double>(x.size());
    ++counted;
  }
  return mean ? total / static_cast<double>(counted) : total;
}

const std::vector<std::vector<double>> kLogits = {{1.0, 2.0, 3.0}, {0.5, -1.0, 2.0}, {-2.0, 0.0, 0.25}, {3.0, 1.0, -1.0}};
const std::vector<int64_t> kTarget = {0, 2, -100, 1};

Tensor logits_tensor(DType dtype) {
  std::vector<double> flat;
  for (const auto& row : kLogits) flat.insert(flat.end(), row.begin(), row.end());
  return Tensor::from_vector(flat, {4, 3}, dtype);
}

}  // namespace

TEST(LabelSmoothing, ForwardMatchesTorchsFormula) {
  const Tensor target = i64(kTarget, {4});
  // Values of PyTorch's formula, computed separately in Python (math module, double).
  EXPECT_NEAR(cross_entropy(f64({1, 2, 3}, {1, 3}), i64({0}, {1}), -100, Reduction::Mean, 0.1).item<double>(),
              2.3076059644443805, 1e-14);
  EXPECT_NEAR(cross_entropy(logits_tensor(DType::F64), target, -100, Reduction::Mean, 0.1).item<double>(),
              1.6139496298671459, 1e-14);
  EXPECT_NEAR(cross_entropy(logits_tensor(DType::F64), target, -100, Reduction::Sum, 0.1).item<double>(),
              4.8418488896014376, 1e-14);
  for (double eps : {0.0, 0.1, 0.25, 0.9}) {
    SCOPED_TRACE(eps);
    for (bool mean : {true, false}) {
      const double expected = torch_formula(kLogits, kTarget, eps, mean);
      const Reduction r = mean ? Reduction::Mean : Reduction::Sum;
      EXPECT_NEAR(cross_entropy(logits_tensor(DType::F64), target, -100, r, eps).item<double>(), expected, 1e-13);
      EXPECT_NEAR(cross_entropy(logits_tensor(DType::F32), target.to(DType::I32), -100, r, eps).item<double>(), expected,
                  1e-6);
    }
  }
  // Uniform logits: every -log p_c is log C, smoothed or not.
  EXPECT_NEAR(cross_entropy(Tensor::zeros({2, 256}), i64({3, 7}, {2}), -100, Reduction::Mean, 0.3).item<double>(),
              std::log(256.0), 1e-6);
  // Every row ignored: 0, not NaN.
  EXPECT_EQ(cross_entropy(Tensor::zeros({2, 3}), i64({-1, -1}, {2}), -1, Reduction::Mean, 0.1).item<double>(), 0.0);
}

// eps = 0 is the plain loss and gradient, bit for bit (the defaults train exactly as before).
TEST(LabelSmoothing, ZeroIsThePlainLossBitForBit) {
  for (DType dtype : {DType::F32, DType::F64}) {
    const Tensor target = i64(kTarget, {4});
    Tensor a = logits_tensor(dtype).set_requires_grad(true), b = logits_tensor(dtype).set_requires_grad(true);
    const Tensor la = cross_entropy(a, target), lb = cross_entropy(b, target, -100, Reduction::Mean, 0.0);
    EXPECT_EQ(la.to(DType::F64).item<double>(), lb.to(DType::F64).item<double>());
    autograd::backward(la);
    autograd::backward(lb);
    EXPECT_EQ(a.grad().to(DType::F64).to_vector<double>(), b.grad().to(DType::F64).to_vector<double>());
  }
}

// d loss / d x = (softmax - q) / counted rows, q = (1 - eps) onehot + eps / C; ignored rows get 0.
TEST(LabelSmoothing, GradientIsSoftmaxMinusTheSmoothedTarget) {
  const double eps = 0.2;
  const Tensor target = i64(kTarget, {4});
  Tensor x = logits_tensor(DType::F64).set_requires_grad(true);
  autograd::backward(cross_entropy(x, target, -100, Reduction::Mean, eps));
  const std::vector<double> g = x.grad().to_vector<double>();
  for (size_t n = 0; n < kLogits.size(); ++n) {
    double s = 0;
    for (double v : kLogits[n]) s += std::exp(v);
    for (size_t c = 0; c < 3; ++c) {
      const double q = kTarget[n] == -100 ? 0 : (static_cast<int64_t>(c) == kTarget[n] ? 1 - eps : 0) + eps / 3;
      const double expected = kTarget[n] == -100 ? 0 : (std::exp(kLogits[n][c]) / s - q) / 3;  // 3 counted rows
      EXPECT_NEAR(g[n * 3 + c], expected, 1e-15) << "row " << n << " class " << c;
    }
  }
}

// Classes with logit -inf (SQuAD's padded positions, masked log-probabilities) take no smoothing mass:
// the loss and gradient are those of the rows without them (PyTorch would give inf).
TEST(LabelSmoothing, MaskedClassesTakeNoSmoothingMass) {
  const double eps = 0.1;
  const Tensor masked = f64({1, -kInf, 3, -kInf, 0.5, 2, -1, -kInf}, {2, 4});
  // Row 0 without its masked classes: (1, 3), target 1 (was 2); row 1 keeps 3 classes: (0.5, 2, -1), target 0.
  const double row0 = torch_formula({{1, 3}}, {1}, eps, false), row1 = torch_formula({{0.5, 2, -1}}, {0}, eps, false);
  Tensor x = masked.clone().set_requires_grad(true);
  const Tensor loss = cross_entropy(x, i64({2, 0}, {2}), -100, Reduction::Mean, eps);
  EXPECT_NEAR(loss.item<double>(), (row0 + row1) / 2, 1e-14);
  autograd::backward(loss);
  const std::vector<double> g = x.grad().to_vector<double>();
  EXPECT_EQ(g[1], 0.0);
  EXPECT_EQ(g[3], 0.0);
  EXPECT_EQ(g[7], 0.0);
  const double s0 = std::exp(1.0) + std::exp(3.0);
  EXPECT_NEAR(g[0], (std::exp(1.0) / s0 - eps / 2) / 2, 1e-15);
  EXPECT_NEAR(g[2], (std::exp(3.0) / s0 - (1 - eps) - eps / 2) / 2, 1e-15);
  // Masking through masked_log_softmax (how SQuAD computes its scores) gives the same loss.
  const Tensor mask = Tensor::from_vector(std::vector<int32_t>{0, 1, 0, 1, 0, 0, 0, 1}, {2, 4});
  const Tensor logp = masked_log_softmax(f64({1, 7, 3, 9, 0.5, 2, -1, 4}, {2, 4}), mask);
  EXPECT_NEAR(cross_entropy(logp, i64({2, 0}, {2}), -100, Reduction::Mean, eps).item<double>(), (row0 + row1) / 2,
              1e-14);
}

TEST(LabelSmoothing, RefusesValuesOutsideZeroToOne) {
  for (double eps : {1.0, -0.1, 1.5, std::nan("")}) {
    const std::string m = error_of([&] { cross_entropy(Tensor::zeros({2, 3}), i64({0, 1}, {2}), -100, Reduction::Mean, eps); });
    EXPECT_NE(m.find("cross_entropy: label_smoothing"), std::string::npos) << m;
    EXPECT_NE(m.find("is outside [0, 1)"), std::string::npos) << m;
  }
}
