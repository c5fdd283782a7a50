// Every op's backward against central finite differences in float64 (autograd/gradcheck.h).
#include <gtest/gtest.h>

#include <limits>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "ops/ops.h"
#include "testing.h"

using namespace sru;
using sru::testing::expect_gradients_match;
using sru::testing::i64;
using sru::testing::leaf;
using Inputs = std::vector<Tensor>;

namespace {

Tensor mask_of(std::vector<int32_t> v, Shape s) { return Tensor::from_vector(v, s); }

}  // namespace

TEST(Gradcheck, AddSubMulDivSameShape) {
  expect_gradients_match([](const Inputs& x) { return x[0] + x[1]; }, {leaf({2, 3}, 1), leaf({2, 3}, 2)});
  expect_gradients_match([](const Inputs& x) { return x[0] - x[1]; }, {leaf({2, 3}, 1), leaf({2, 3}, 2)});
  expect_gradients_match([](const Inputs& x) { return x[0] * x[1]; }, {leaf({2, 3}, 1), leaf({2, 3}, 2)});
  expect_gradients_match([](const Inputs& x) { return x[0] / x[1]; }, {leaf({2, 3}, 1), leaf({2, 3}, 2, 0.5, 2.0)});
}

TEST(Gradcheck, BroadcastOperandGetsSummedGradient) {
  expect_gradients_match([](const Inputs& x) { return x[0] + x[1]; }, {leaf({4, 2, 3}, 3), leaf({3}, 4)});
  expect_gradients_match([](const Inputs& x) { return x[1] - x[0]; }, {leaf({4, 2, 3}, 3), leaf({2, 3}, 4)});
  expect_gradients_match([](const Inputs& x) { return x[0] * x[1]; }, {leaf({4, 2, 3}, 5), leaf({2, 3}, 6)});
  expect_gradients_match([](const Inputs& x) { return x[1] / x[0]; }, {leaf({4, 3}, 7, 0.5, 2.0), leaf({3}, 8)});
  expect_gradients_match([](const Inputs& x) { return x[0] / x[1]; }, {leaf({4, 3}, 7), leaf({}, 8, 0.5, 2.0)});
}

TEST(Gradcheck, ScalarOps) {
  expect_gradients_match([](const Inputs& x) { return x[0] + 2.0; }, {leaf({5}, 1)});
  expect_gradients_match([](const Inputs& x) { return x[0] * -3.0; }, {leaf({5}, 2)});
  expect_gradients_match([](const Inputs& x) { return 1.5 - x[0]; }, {leaf({5}, 3)});
  expect_gradients_match([](const Inputs& x) { return 2.0 / x[0]; }, {leaf({5}, 4, 0.5, 2.0)});
  expect_gradients_match([](const Inputs& x) { return pow_scalar(x[0], 2.5); }, {leaf({5}, 5, 0.5, 2.0)});
  expect_gradients_match([](const Inputs& x) { return -x[0]; }, {leaf({5}, 6)});
}

TEST(Gradcheck, UnaryActivations) {
  expect_gradients_match([](const Inputs& x) { return exp(x[0]); }, {leaf({3, 4}, 1)});
  expect_gradients_match([](const Inputs& x) { return log(x[0]); }, {leaf({3, 4}, 2, 0.2, 3.0)});
  expect_gradients_match([](const Inputs& x) { return tanh(x[0]); }, {leaf({3, 4}, 3, -3, 3)});
  expect_gradients_match([](const Inputs& x) { return sigmoid(x[0]); }, {leaf({3, 4}, 4, -5, 5)});
  // relu: inputs kept away from the kink at 0, where the derivative is undefined.
  expect_gradients_match([](const Inputs& x) { return relu(x[0] - 1.5) + relu(x[0] + 1.5); }, {leaf({3, 4}, 5, -1, 1)});
}

TEST(Gradcheck, MatmulAllTransposeFlags) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "ta=" << ta << " tb=" << tb);
      Tensor a = leaf(ta ? Shape{4, 3} : Shape{3, 4}, 1), b = leaf(tb ? Shape{5, 4} : Shape{4, 5}, 2);
      expect_gradients_match([=](const Inputs& x) { return matmul(x[0], x[1], ta, tb); }, {a, b});
    }
}

TEST(Gradcheck, MatmulWithFoldedLeadingDims) {
  expect_gradients_match([](const Inputs& x) { return matmul(x[0], x[1]); }, {leaf({3, 2, 4}, 1), leaf({4, 5}, 2)});
  expect_gradients_match([](const Inputs& x) { return matmul(x[0], x[1], false, true); },
                         {leaf({3, 2, 4}, 3), leaf({5, 4}, 4)});
}

TEST(Gradcheck, BatchedMatmulAllTransposeFlags) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "ta=" << ta << " tb=" << tb);
      Tensor a = leaf(ta ? Shape{2, 4, 3} : Shape{2, 3, 4}, 5), b = leaf(tb ? Shape{2, 5, 4} : Shape{2, 4, 5}, 6);
      expect_gradients_match([=](const Inputs& x) { return bmm(x[0], x[1], ta, tb); }, {a, b});
    }
}

TEST(Gradcheck, SumAndMean) {
  for (int dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(dim);
    expect_gradients_match([=](const Inputs& x) { return sum(x[0], dim); }, {leaf({2, 3, 4}, 1)});
    expect_gradients_match([=](const Inputs& x) { return mean(x[0], dim, true); }, {leaf({2, 3, 4}, 2)});
  }
  expect_gradients_match([](const Inputs& x) { return sum(x[0]); }, {leaf({2, 3}, 3)});
  expect_gradients_match([](const Inputs& x) { return mean(x[0]); }, {leaf({2, 3}, 4)});
}

TEST(Gradcheck, SoftmaxAndLogSoftmax) {
  expect_gradients_match([](const Inputs& x) { return softmax(x[0]); }, {leaf({3, 5}, 1, -3, 3)});
  expect_gradients_match([](const Inputs& x) { return log_softmax(x[0]); }, {leaf({2, 2, 5}, 2, -3, 3)});
}

TEST(Gradcheck, CrossEntropyMeanAndSumWithIgnoredRows) {
  Tensor target = i64({2, -100, 0, 4}, {4});
  expect_gradients_match([=](const Inputs& x) { return cross_entropy(x[0], target); }, {leaf({4, 5}, 1, -3, 3)});
  expect_gradients_match([=](const Inputs& x) { return cross_entropy(x[0], target, -100, Reduction::Sum) * 0.5; },
                         {leaf({4, 5}, 2, -3, 3)});
}

TEST(Gradcheck, MaskedSoftmaxEveryBroadcastFormAndFullyMaskedRows) {
  struct Case {
    Shape x;
    Tensor mask;
  };
  const std::vector<Case> cases = {
      // (B, 1, C) key padding; batch 1 fully masked.
      {{2, 3, 4}, mask_of({0, 0, 1, 1, 1, 1, 1, 1}, {2, 1, 4})},
      // (R, C) causal over (B*H, R, C), one key of memory.
      {{3, 3, 4}, mask_of({0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0}, {3, 4})},
      // (B, C) on (B, C): row 1 fully masked, row 2 a single unmasked entry.
      {{3, 4}, mask_of({0, 1, 0, 0, 1, 1, 1, 1, 1, 0, 1, 1}, {3, 4})},
      // (1, R, 1): whole rows masked by a broadcast last dim.
      {{2, 3, 4}, mask_of({0, 1, 0}, {1, 3, 1})},
      // (B, 1, 1, C) over (B, H, R, C).
      {{2, 2, 2, 3}, mask_of({0, 0, 1, 1, 0, 0}, {2, 1, 1, 3})},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.x) + " mask " + shape_str(c.mask.shape()));
    const Tensor mask = c.mask;
    expect_gradients_match([=](const Inputs& x) { return masked_softmax(x[0], mask); }, {leaf(c.x, ++seed, -3, 3)});
    // exp() maps the -inf outputs to 0, so the finite differences stay finite.
    expect_gradients_match([=](const Inputs& x) { return exp(masked_log_softmax(x[0], mask)); },
                           {leaf(c.x, ++seed, -3, 3)});
  }
}

TEST(Gradcheck, MaskedLogSoftmaxThroughTheLoss) {
  const Tensor mask = mask_of({0, 0, 1, 1, 0, 0, 0, 1}, {2, 4});
  const Tensor target = Tensor::from_vector(std::vector<int64_t>{1, 2}, {2});
  expect_gradients_match([=](const Inputs& x) { return cross_entropy(masked_log_softmax(x[0], mask), target); },
                         {leaf({2, 4}, 20, -3, 3)});
  expect_gradients_match(
      [=](const Inputs& x) {
        return cross_entropy(masked_fill(x[0], mask, -std::numeric_limits<double>::infinity()), target);
      },
      {leaf({2, 4}, 21, -3, 3)});
}

TEST(Gradcheck, EmbeddingWithRepeatsAndPadding) {
  Tensor idx = i64({1, 3, 1, 0, 2, 1}, {2, 3});
  expect_gradients_match([=](const Inputs& x) { return embedding(x[0], idx); }, {leaf({4, 3}, 1)});
  const auto r = autograd::gradcheck(autograd::SingleFn([=](const Inputs& x) { return embedding(x[0], idx, 1); }),
                                     {leaf({4, 3}, 2)});
  EXPECT_FALSE(r.ok) << "padding_idx rows must get no gradient, which the finite difference disagrees with";
}

TEST(Gradcheck, EmbeddingPaddingRowGetsZeroGradient) {
  Tensor w = leaf({4, 3}, 3);
  autograd::backward(sum(embedding(w, i64({1, 2, 1}, {3}), 1)));
  const auto g = w.grad().to_vector<double>();
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(g[1 * 3 + j], 0.0);
    EXPECT_EQ(g[2 * 3 + j], 1.0);
  }
}

TEST(Gradcheck, DropoutWithFixedMask) {
  // The same seed inside f gives the same mask for every evaluation, as finite differences require.
  expect_gradients_match(
      [](const Inputs& x) {
        Generator gen(77);
        return dropout(x[0], 0.4, true, gen);
      },
      {leaf({6, 5}, 1)});
}

TEST(Gradcheck, LayerNormWithAndWithoutAffine) {
  expect_gradients_match([](const Inputs& x) { return layer_norm(x[0], x[1], x[2]); },
                         {leaf({3, 5}, 1, -2, 2), leaf({5}, 2, 0.5, 1.5), leaf({5}, 3)});
  expect_gradients_match([](const Inputs& x) { return layer_norm(x[0], Tensor(), Tensor()); }, {leaf({2, 2, 6}, 4)});
}

TEST(Gradcheck, ReshapeSliceConcatSplitTranspose) {
  expect_gradients_match([](const Inputs& x) { return reshape(x[0], {3, -1}) * 2.0; }, {leaf({2, 3, 2}, 1)});
  for (int dim : {0, 1, 2}) {
    SCOPED_TRACE(dim);
    expect_gradients_match([=](const Inputs& x) { return slice(x[0], dim, 1, 3); }, {leaf({3, 4, 3}, 2)});
    expect_gradients_match([=](const Inputs& x) { return concat({x[0], x[1] * 3.0, x[0]}, dim); },
                           {leaf({2, 3, 2}, 3), leaf({2, 3, 2}, 4)});
  }
  expect_gradients_match(
      [](const Inputs& x) {
        auto p = split(x[0], {1, 3}, 1);
        return p[0] * 2.0 + slice(p[1], 1, 0, 1) * 5.0;
      },
      {leaf({3, 4}, 5)});
  expect_gradients_match([](const Inputs& x) { return transpose(x[0], 0, 2); }, {leaf({2, 3, 4}, 6)});
  expect_gradients_match([](const Inputs& x) { return transpose(x[0], -1, 1); }, {leaf({2, 3, 4, 2}, 7)});
}

TEST(Gradcheck, UnbindWithUnusedRows) {
  // Row 1 is never used: its gradient must be zero, filled in by the engine.
  expect_gradients_match(
      [](const Inputs& x) {
        auto rows = unbind(x[0]);
        return rows[0] * 2.0 + rows[2] * rows[2] + rows[3];
      },
      {leaf({4, 2, 3}, 8)});
}

TEST(Gradcheck, MaskedFillAndWhere) {
  Tensor mask = Tensor::from_vector(std::vector<int32_t>{1, 0, 0, 1, 1, 0}, {2, 3});
  expect_gradients_match([=](const Inputs& x) { return masked_fill(x[0], mask, -5.0); }, {leaf({4, 2, 3}, 1)});
  expect_gradients_match([=](const Inputs& x) { return where(mask, x[0], x[1]); }, {leaf({2, 3}, 2), leaf({2, 3}, 3)});
}

TEST(Gradcheck, SmallNetworkEndToEnd) {
  // A two-layer classifier: embedding -> reshape -> linear -> tanh -> layer norm -> linear -> CE.
  Tensor idx = i64({0, 2, 1, 1, 3, 0}, {3, 2});
  Tensor target = i64({1, 0, 2}, {3});
  expect_gradients_match(
      [=](const Inputs& p) {
        Tensor h = reshape(embedding(p[0], idx), {3, -1});
        h = layer_norm(tanh(matmul(h, p[1]) + p[2]), Tensor(), Tensor());
        return cross_entropy(matmul(h, p[3], false, true), target);
      },
      {leaf({4, 2}, 1), leaf({4, 5}, 2), leaf({5}, 3), leaf({3, 5}, 4)});
}
