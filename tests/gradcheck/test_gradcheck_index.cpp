// index_select's and topk's backward against central finite differences in float64 (autograd/gradcheck.h).
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "ops/ops.h"
#include "testing.h"

using namespace sru;
using sru::testing::expect_gradients_match;
using sru::testing::i64;
using sru::testing::leaf;
using Inputs = std::vector<Tensor>;

TEST(GradcheckIndex, IndexSelectEveryDimWithRepeats) {
  // Repeated indices accumulate; row 1 of dim 0 is never picked (zero gradient).
  const Tensor rows = i64({2, 0, 2, 3}, {4});
  expect_gradients_match([=](const Inputs& x) { return index_select(x[0], 0, rows); }, {leaf({4, 3, 2}, 1)});
  expect_gradients_match([=](const Inputs& x) { return index_select(x[0], 1, i64({1, 1, 0}, {3})); },
                         {leaf({2, 3, 2}, 2)});
  expect_gradients_match([=](const Inputs& x) { return index_select(x[0], -1, i64({1, 0, 1, 1}, {4})); },
                         {leaf({2, 3, 2}, 3)});
  const Tensor rows32 = Tensor::from_vector(std::vector<int32_t>{3, 3, 1}, {3});
  expect_gradients_match([=](const Inputs& x) { return index_select(x[0], -3, rows32); }, {leaf({4, 3, 2}, 4)});
}

TEST(GradcheckIndex, TopKValues) {
  // Uniform random values: no two within the finite-difference step, so the picks do not change.
  expect_gradients_match([](const Inputs& x) { return topk(x[0], 1).values; }, {leaf({3, 6}, 5)});
  expect_gradients_match([](const Inputs& x) { return topk(x[0], 3).values; }, {leaf({2, 3, 6}, 6)});
  expect_gradients_match([](const Inputs& x) { return topk(x[0], 6).values; }, {leaf({2, 6}, 7)});
}

TEST(GradcheckIndex, BeamStepComposition) {
  // One beam-search step: log-probs + a per-token bonus, topk over the flattened candidates, then the chosen
  // hypotheses' states gathered along the batch dim of (layers, B, d).
  const Tensor beams = i64({1, 1, 0}, {3});
  expect_gradients_match(
      [=](const Inputs& p) {
        const Tensor scores = reshape(log_softmax(p[0]) + p[1], {1, -1});
        const Tensor best = topk(scores, 3).values;
        const Tensor states = index_select(tanh(p[2]), 1, beams);
        return sum(best) + sum(states * states);
      },
      {leaf({2, 4}, 8), leaf({4}, 9), leaf({2, 2, 3}, 10)});
}
