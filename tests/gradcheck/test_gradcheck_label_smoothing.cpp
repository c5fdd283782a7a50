// Label-smoothed cross-entropy's backward against central finite differences in float64
// (autograd/gradcheck.h): Mean and Sum, ignored rows, i32 targets, and masked (-inf) classes.
#include <gtest/gtest.h>

#include <limits>

#include "autograd/gradcheck.h"
#include "ops/ops.h"
#include "testing.h"

using namespace sru;
using sru::testing::expect_gradients_match;
using sru::testing::i64;
using sru::testing::leaf;
using Inputs = std::vector<Tensor>;

TEST(Gradcheck, LabelSmoothedCrossEntropyMeanAndSumWithIgnoredRows) {
  const Tensor target = i64({2, -100, 0, 4}, {4});
  for (double eps : {0.1, 0.5, 0.95}) {
    SCOPED_TRACE(eps);
    expect_gradients_match([=](const Inputs& x) { return cross_entropy(x[0], target, -100, Reduction::Mean, eps); },
                           {leaf({4, 5}, 1, -3, 3)});
    expect_gradients_match(
        [=](const Inputs& x) { return cross_entropy(x[0], target.to(DType::I32), -100, Reduction::Sum, eps) * 0.5; },
        {leaf({4, 5}, 2, -3, 3)});
  }
}

TEST(Gradcheck, LabelSmoothedCrossEntropyOverMaskedClasses) {
  const Tensor mask = Tensor::from_vector(std::vector<int32_t>{0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0}, {3, 4});
  const Tensor target = i64({1, 2, 3}, {3});
  expect_gradients_match(
      [=](const Inputs& x) { return cross_entropy(masked_log_softmax(x[0], mask), target, -100, Reduction::Mean, 0.2); },
      {leaf({3, 4}, 3, -3, 3)});
  expect_gradients_match(
      [=](const Inputs& x) {
        return cross_entropy(masked_fill(x[0], mask, -std::numeric_limits<double>::infinity()), target, -100,
                             Reduction::Mean, 0.2);
      },
      {leaf({3, 4}, 4, -3, 3)});
}
