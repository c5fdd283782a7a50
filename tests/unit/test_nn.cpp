// nn modules: Linear / Embedding / LayerNorm names, shapes and behaviour, module
// bookkeeping, and the CPU LSTM (PyTorch names, a hand-computed step, padding).
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/engine.h"
#include "nn/layers.h"
#include "nn/lstm.h"
#include "ops/ops.h"
#include "testing.h"

using namespace sru;
using namespace sru::nn;
using sru::testing::values_near;

TEST(Layers, LinearComputesXWTransposedPlusBias) {
  Linear lin(3, 2, true, DType::F64);
  lin.weight.copy_(Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}));
  lin.bias.copy_(Tensor::from_vector(std::vector<double>{10, 20}, {2}));
  Tensor x = Tensor::from_vector(std::vector<double>{1, 0, -1, 2, 2, 2}, {2, 3});
  EXPECT_TRUE(values_near(lin.forward(x), {2, 2}, {1 - 3 + 10, 4 - 6 + 20, 12 + 10, 30 + 20}));
  const auto names = lin.state();
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0].first, "weight");
  EXPECT_EQ(names[1].first, "bias");
  const double bound = 1 / std::sqrt(3.0);
  Linear fresh(3, 500);
  for (double v : fresh.weight.to_vector<double>()) ASSERT_LE(std::abs(v), bound);
}

// train.precision bf16, PyTorch autocast's policy for linear: the answer is bf16 (x and W taken as bf16,
// products summed in float32, the bias added and rounded once more), the gradients of W, b and x stay
// in their own float32; at fp32 the layer is float32 as before.
TEST(Layers, LinearUnderBf16AutocastAnswersInBf16WithFloat32Gradients) {
  struct RestorePrecision {
    ~RestorePrecision() { set_matmul_precision(MatmulPrecision::Highest); }
  } restore;
  Generator gen(41);
  Linear lin(16, 8, true, DType::F32, gen);
  const Tensor x = Tensor::uniform({5, 16}, -1, 1, DType::F32, gen);
  const Tensor cotangent = Tensor::uniform({5, 8}, -1, 1, DType::F32, gen);
  const auto run = [&](MatmulPrecision precision) {
    set_matmul_precision(precision);
    lin.zero_grad();
    Tensor xi = x.clone();
    xi.set_requires_grad(true);
    const Tensor y = lin.forward(xi);
    autograd::backward({sum(mul(y, cotangent))}, {Tensor::ones({}, DType::F32)});  // bf16 y promotes here
    return std::vector<Tensor>{y.detach(), xi.grad(), lin.weight.grad(), lin.bias.grad()};
  };
  const std::vector<Tensor> f32 = run(MatmulPrecision::Highest), b16 = run(MatmulPrecision::Medium);
  EXPECT_EQ(f32[0].dtype(), DType::F32);
  ASSERT_EQ(b16[0].dtype(), DType::BF16);
  for (size_t i = 1; i < b16.size(); ++i) EXPECT_EQ(b16[i].dtype(), DType::F32) << "gradient " << i;
  // y = round(round(p) + round(b)) with p the float32-summed product of the rounded operands: within
  // two roundings (2^-8 each) of |p| + |b| of the float64 math on the same rounded operands.
  const auto rounded64 = [](const Tensor& t) { return t.to(DType::BF16).to(DType::F64); };
  const std::vector<double> p = matmul(rounded64(x), rounded64(lin.weight), false, true).to_vector<double>();
  const std::vector<double> bias = rounded64(lin.bias).to_vector<double>();
  const std::vector<double> y = b16[0].to(DType::F64).to_vector<double>();
  for (size_t i = 0; i < y.size(); ++i) {
    const double exact = p[i] + bias[i % 8], scale = std::abs(p[i]) + std::abs(bias[i % 8]);
    ASSERT_NEAR(y[i], exact, 2 * std::ldexp(scale, -8) + 1e-6) << i;
  }
  for (size_t i = 1; i < b16.size(); ++i)
    EXPECT_LT(sru::testing::max_error_over_largest(b16[i], f32[i]), 0.03) << "gradient " << i;
}

TEST(Layers, EmbeddingPaddingRowStartsAtZero) {
  Embedding emb(5, 3, 2);
  for (double v : emb.weight.narrow0(2, 1).to_vector<double>()) EXPECT_EQ(v, 0.0);
  Tensor out = emb.forward(Tensor::from_vector(std::vector<int64_t>{4, 2}, {2}));
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
}

TEST(Layers, ModuleModesPropagateToChildren) {
  struct Net : Module {
    std::shared_ptr<Linear> lin = register_module("lin", std::make_shared<Linear>(4, 2));
    std::shared_ptr<LayerNorm> norm = register_module("norm", std::make_shared<LayerNorm>(4));
  } net;
  net.eval();
  EXPECT_FALSE(net.lin->is_training());
  EXPECT_FALSE(net.norm->is_training());
  net.train();
  EXPECT_TRUE(net.norm->is_training());
  const auto state = net.state();
  ASSERT_EQ(state.size(), 4u);
  EXPECT_EQ(state[2].first, "norm.weight");
  EXPECT_EQ(net.num_parameters(), 8 + 2 + 8);
}

// Random states outside the Philox counters (cuDNN's dropout states on a GPU; none on the CPU) are
// gathered as after_update is: the module's own, then its children's, so that a training step can save
// and restore them all (train.launch_ahead's take-back).
TEST(Layers, RandomStatesAreGatheredFromEveryModuleOfTheTree) {
  struct Drawing : Module {
    Tensor state = Tensor::zeros({3});
    std::vector<Tensor> own_random_states() const override { return {state}; }
  };
  struct Net : Drawing {
    std::shared_ptr<Linear> lin = register_module("lin", std::make_shared<Linear>(4, 2));
    std::shared_ptr<Drawing> inner = register_module("inner", std::make_shared<Drawing>());
  } net;
  const std::vector<Tensor> states = net.random_states();
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(states[0].impl(), net.state.impl());
  EXPECT_EQ(states[1].impl(), net.inner->state.impl());
  EXPECT_TRUE(net.lin->random_states().empty());
  LSTMOptions o;
  o.input_size = 4;
  o.hidden_size = 3;
  o.num_layers = 2;
  o.dropout = 0.5;
  o.cudnn_dropout = true;
  LSTM lstm(o);
  lstm.forward(Tensor::randn({5, 2, 4}));
  EXPECT_TRUE(lstm.random_states().empty());  // on the CPU its dropout draws from the Philox counters
}

TEST(Layers, TiedWeightIsCollectedOnceUnderItsFirstName) {
  // An output layer sharing the embedding's matrix (weight tying): one tensor under two names.
  struct Tied : Module {
    std::shared_ptr<Embedding> embedding = register_module("embedding", std::make_shared<Embedding>(6, 4));
    std::shared_ptr<Linear> output = register_module("output", std::make_shared<Linear>(4, 6));
    Tied() { output->tie_weight(embedding->weight); }
  } net;
  const auto params = net.named_parameters();
  ASSERT_EQ(params.size(), 2u) << "embedding.weight and output.bias";
  EXPECT_EQ(params[0].first, "embedding.weight");
  EXPECT_EQ(params[1].first, "output.bias");
  EXPECT_EQ(net.num_parameters(), 6 * 4 + 6);
  EXPECT_EQ(net.state().size(), 2u);
  EXPECT_TRUE(net.output->weight.shares_storage(net.embedding->weight));
}

TEST(Layers, ZeroGradClearsGradients) {
  Linear lin(2, 2);
  autograd::backward(sum(lin.forward(Tensor::ones({1, 2}))));
  EXPECT_TRUE(lin.weight.grad().defined());
  lin.zero_grad();
  EXPECT_FALSE(lin.weight.grad().defined());
}

TEST(Lstm, NamesAndShapesMatchPyTorch) {
  LSTMOptions o;
  o.input_size = 3;
  o.hidden_size = 5;
  o.num_layers = 2;
  o.bidirectional = true;
  LSTM lstm(o);
  std::vector<std::string> names;
  for (auto& [n, t] : lstm.state()) names.push_back(n + " " + shape_str(t.shape()));
  const std::vector<std::string> expected = {
      "weight_ih_l0 (20, 3)",          "weight_hh_l0 (20, 5)",         "bias_ih_l0 (20,)",
      "bias_hh_l0 (20,)",              "weight_ih_l0_reverse (20, 3)", "weight_hh_l0_reverse (20, 5)",
      "bias_ih_l0_reverse (20,)",      "bias_hh_l0_reverse (20,)",     "weight_ih_l1 (20, 10)",
      "weight_hh_l1 (20, 5)",          "bias_ih_l1 (20,)",             "bias_hh_l1 (20,)",
      "weight_ih_l1_reverse (20, 10)", "weight_hh_l1_reverse (20, 5)", "bias_ih_l1_reverse (20,)",
      "bias_hh_l1_reverse (20,)"};
  EXPECT_EQ(names, expected);
}

TEST(Lstm, OneStepByHandWithGateOrderIFGO) {
  LSTMOptions o;
  o.input_size = 1;
  o.hidden_size = 1;
  o.dtype = DType::F64;
  LSTM lstm(o);
  auto state = lstm.state();
  // weight_ih = [i f g o] = [0.5, -0.5, 1.0, 2.0]; weight_hh = [0.1, 0.2, 0.3, 0.4]; biases 0.
  state[0].second.copy_(Tensor::from_vector(std::vector<double>{0.5, -0.5, 1.0, 2.0}, {4, 1}));
  state[1].second.copy_(Tensor::from_vector(std::vector<double>{0.1, 0.2, 0.3, 0.4}, {4, 1}));
  state[2].second.zero_();
  state[3].second.zero_();
  const double x = 0.8, h0 = 0.5, c0 = -0.3;
  auto s = [](double v) { return 1 / (1 + std::exp(-v)); };
  const double i = s(0.5 * x + 0.1 * h0), f = s(-0.5 * x + 0.2 * h0), g = std::tanh(1.0 * x + 0.3 * h0),
               og = s(2.0 * x + 0.4 * h0);
  const double c = f * c0 + i * g, h = og * std::tanh(c);
  auto r = lstm.forward(Tensor::full({1, 1, 1}, x, DType::F64), Tensor::full({1, 1, 1}, h0, DType::F64),
                        Tensor::full({1, 1, 1}, c0, DType::F64));
  EXPECT_NEAR(r.output.item<double>(), h, 1e-14);
  EXPECT_NEAR(r.h.item<double>(), h, 1e-14);
  EXPECT_NEAR(r.c.item<double>(), c, 1e-14);
}

TEST(Lstm, PaddedStepsKeepStateAndOutputZero) {
  LSTMOptions o;
  o.input_size = 2;
  o.hidden_size = 3;
  o.dtype = DType::F64;
  LSTM lstm(o);
  Tensor x = Tensor::uniform({4, 2, 2}, -1, 1, DType::F64);
  Tensor mask = Tensor::from_vector(std::vector<int32_t>{0, 0, 0, 0, 0, 1, 0, 1}, {4, 2});
  auto padded = lstm.forward(x, Tensor(), Tensor(), mask);
  Tensor x0 = Tensor::empty({2, 1, 2}, DType::F64);
  for (int t = 0; t < 2; ++t) std::copy_n(x.data<double>() + (t * 2 + 1) * 2, 2, x0.data<double>() + t * 2);
  auto alone = lstm.forward(x0);
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(padded.c.data<double>()[3 + j], alone.c.data<double>()[j], 1e-14);
    EXPECT_NEAR(padded.h.data<double>()[3 + j], alone.h.data<double>()[j], 1e-14);
    EXPECT_EQ(padded.output.data<double>()[(3 * 2 + 1) * 3 + j], 0.0);
  }
}
