// SRU layer/stack: fused kernel vs the independent composed implementation over every option
// combination (float64, forward and all gradients, 1e-10 relative), padding semantics, parameter
// names/shapes of `sru` v2.6, initialisation, and the variance claim of paper section 3.2.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "config/config.h"
#include "core/kernel_count.h"
#include "nn/sru.h"
#include "ops/ops.h"
#include "ops/sru_recurrence.h"
#include "testing.h"

using namespace sru;
using namespace sru::nn;

namespace {

struct StackRun {
  Tensor h, c;
  std::vector<std::pair<std::string, Tensor>> grads;  // parameters, then "x", "c0"
};

// Forward + backward of a weighted sum of h and c, with the given implementation and mask seed.
StackRun run_stack(SRU& model, Generator& gen, SRUImplementation impl, const Tensor& x, const Tensor& c0,
              const Tensor& mask_pad) {
  model.set_implementation(impl);
  model.zero_grad();
  x.impl()->grad.reset();
  if (c0.defined()) c0.impl()->grad.reset();
  gen.set_state(99, 0);  // the same dropout masks for both implementations
  auto [h, c] = model.forward(x, c0, mask_pad);
  Generator cot(5);
  Tensor wh = Tensor::uniform(h.shape(), -1, 1, DType::F64, cot), wc = Tensor::uniform(c.shape(), -1, 1, DType::F64, cot);
  autograd::backward(sum(h * wh) + sum(c * wc));
  StackRun r{h.detach(), c.detach(), {}};
  for (auto& [name, p] : model.named_parameters()) r.grads.emplace_back(name, p.grad());
  r.grads.emplace_back("x", x.grad());
  if (c0.defined()) r.grads.emplace_back("c0", c0.grad());
  return r;
}

::testing::AssertionResult relative_close(const Tensor& a, const Tensor& b, double rtol = 1e-10) {
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << "one gradient is undefined";
  if (!a.defined()) return ::testing::AssertionSuccess();
  if (a.shape() != b.shape()) return ::testing::AssertionFailure() << "shapes differ";
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  for (size_t i = 0; i < va.size(); ++i)
    if (!(std::abs(va[i] - vb[i]) <= rtol * std::max(1.0, std::abs(vb[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << va[i] << " vs " << vb[i];
  return ::testing::AssertionSuccess();
}

Tensor padding_mask(int64_t L, const std::vector<int64_t>& lengths) {
  std::vector<int32_t> m;
  for (int64_t t = 0; t < L; ++t)
    for (int64_t len : lengths) m.push_back(t >= len ? 1 : 0);
  return Tensor::from_vector(m, {L, static_cast<int64_t>(lengths.size())});
}

}  // namespace

TEST(SRU, FusedMatchesComposedForEveryOptionCombination) {
  const int64_t L = 5, B = 3, d = 4;
  for (int bits = 0; bits < 256; ++bits) {
    SRUOptions o;
    o.bidirectional = bits & 1;
    const bool k4 = bits & 2;                 // n_in != out
    o.has_skip_term = bits & 4;
    o.use_tanh = bits & 8;
    const bool padded = bits & 16;
    o.dropout = (bits & 32) ? 0.3 : 0.0;
    o.v1 = bits & 64;
    o.rescale = bits & 128;
    // The remaining options vary with other residues of bits, so they meet every combination above.
    o.rnn_dropout = bits % 5 == 0 ? 0.2 : 0.0;
    o.layer_norm = bits % 3 != 0;
    o.normalize_after = bits % 3 == 2;
    o.highway_bias = -1.0;
    o.hidden_size = d;
    const int64_t out = (o.bidirectional ? 2 : 1) * d;
    o.input_size = k4 ? out + 3 : out;
    o.projection_size = (bits / 3) % 2 ? 3 : 0;
    o.num_layers = 2;
    o.dtype = DType::F64;
    SCOPED_TRACE(::testing::Message() << "bits=" << bits << " bidir=" << o.bidirectional << " k4=" << k4
                                      << " skip=" << o.has_skip_term << " tanh=" << o.use_tanh << " pad=" << padded
                                      << " dropout=" << o.dropout << " v1=" << o.v1 << " rescale=" << o.rescale
                                      << " rnn_dropout=" << o.rnn_dropout << " ln=" << o.layer_norm
                                      << " after=" << o.normalize_after << " proj=" << o.projection_size);
    Generator gen(static_cast<uint64_t>(bits) + 1);
    SRU model(o, gen);
    model.train(true);
    Tensor x = sru::testing::leaf({L, B, o.input_size}, 1000 + bits);
    Tensor c0 = bits % 2 == 0 ? sru::testing::leaf({2, B, out}, 2000 + bits) : Tensor();
    Tensor mask = padded ? padding_mask(L, {5, 2, 4}) : Tensor();
    const StackRun fused = run_stack(model, gen, SRUImplementation::Fused, x, c0, mask);
    const StackRun composed = run_stack(model, gen, SRUImplementation::Composed, x, c0, mask);
    ASSERT_TRUE(relative_close(fused.h, composed.h)) << "h";
    ASSERT_TRUE(relative_close(fused.c, composed.c)) << "c";
    ASSERT_EQ(fused.grads.size(), composed.grads.size());
    for (size_t i = 0; i < fused.grads.size(); ++i)
      ASSERT_TRUE(relative_close(fused.grads[i].second, composed.grads[i].second)) << "grad " << fused.grads[i].first;
  }
}

TEST(SRU, PaddedSequencesMatchRunningThemAlone) {
  SRUOptions o;
  o.input_size = 6;
  o.hidden_size = 3;
  o.bidirectional = true;
  o.dtype = DType::F64;
  Generator gen(3);
  SRU model(o, gen);
  model.eval();
  Tensor x = Tensor::uniform({7, 2, 6}, -1, 1, DType::F64, gen);
  auto [h, c] = model.forward(x, Tensor(), padding_mask(7, {7, 4}));
  // Sequence 1 alone, 4 steps long.
  Tensor x1 = Tensor::empty({4, 1, 6}, DType::F64);
  for (int64_t t = 0; t < 4; ++t)
    std::copy_n(x.data<double>() + (t * 2 + 1) * 6, 6, x1.data<double>() + t * 6);
  auto [h1, c1] = model.forward(x1);
  for (int64_t t = 0; t < 7; ++t)
    for (int64_t j = 0; j < 6; ++j) {
      const double got = h.data<double>()[(t * 2 + 1) * 6 + j];
      if (t < 4) EXPECT_NEAR(got, h1.data<double>()[t * 6 + j], 1e-12);
      else EXPECT_EQ(got, 0.0) << "padded steps output 0";
    }
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t j = 0; j < 6; ++j) EXPECT_NEAR(c.data<double>()[(l * 2 + 1) * 6 + j], c1.data<double>()[l * 6 + j], 1e-12);
}

TEST(SRU, ParameterNamesAndShapesMatchPyTorchSru) {
  // sru v2.6: SRU(input_size=5, hidden_size=4, num_layers=3, bidirectional=True, projection_size=3,
  // layer_norm=True). Layer 0: n_in 5 != out 8 -> k = 4; projection 3 < 5 and < 8 is used.
  // Layers 1, 2: n_in = out = 8 -> k = 3, projection used (3 < 8).
  SRUOptions o;
  o.input_size = 5;
  o.hidden_size = 4;
  o.num_layers = 3;
  o.bidirectional = true;
  o.projection_size = 3;
  o.layer_norm = true;
  SRU model(o);
  std::vector<std::pair<std::string, Shape>> expected = {
      {"rnn_lst.0.weight_proj", {5, 3}}, {"rnn_lst.0.weight", {3, 32}}, {"rnn_lst.0.weight_c", {16}},
      {"rnn_lst.0.bias", {16}},          {"rnn_lst.0.scale_x", {1}},   {"rnn_lst.0.layer_norm.weight", {5}},
      {"rnn_lst.0.layer_norm.bias", {5}}, {"rnn_lst.1.weight_proj", {8, 3}}, {"rnn_lst.1.weight", {3, 24}},
      {"rnn_lst.1.weight_c", {16}},      {"rnn_lst.1.bias", {16}},     {"rnn_lst.1.scale_x", {1}},
      {"rnn_lst.1.layer_norm.weight", {8}}, {"rnn_lst.1.layer_norm.bias", {8}}, {"rnn_lst.2.weight_proj", {8, 3}},
      {"rnn_lst.2.weight", {3, 24}},     {"rnn_lst.2.weight_c", {16}}, {"rnn_lst.2.bias", {16}},
      {"rnn_lst.2.scale_x", {1}},        {"rnn_lst.2.layer_norm.weight", {8}}, {"rnn_lst.2.layer_norm.bias", {8}}};
  auto state = model.state();
  std::sort(state.begin(), state.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::sort(expected.begin(), expected.end());
  ASSERT_EQ(state.size(), expected.size());
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(state[i].first, expected[i].first);
    EXPECT_EQ(state[i].second.shape(), expected[i].second) << state[i].first;
  }
}

TEST(SRU, ProjectionIgnoredWhereSruIgnoresItAndNormalizeAfterUsesOutputSize) {
  SRUOptions o;
  o.input_size = 4;
  o.hidden_size = 8;
  o.projection_size = 6;  // not < n_in = 4: `sru` builds a plain weight for layer 0
  o.layer_norm = true;
  o.normalize_after = true;
  o.has_skip_term = false;
  SRU model(o);
  EXPECT_FALSE(model.layers[0]->weight_proj.defined());
  EXPECT_EQ(model.layers[0]->weight.shape(), (Shape{4, 24}));  // no skip term -> k = 3 even though 4 != 8
  EXPECT_EQ(model.layers[0]->layer_norm->weight.shape(), (Shape{8}));
  EXPECT_TRUE(model.layers[1]->weight_proj.defined());
}

TEST(SRU, InitialisationFollowsTheReference) {
  SRUOptions o;
  o.input_size = 200;
  o.hidden_size = 100;  // k = 4
  o.num_layers = 2;
  o.highway_bias = -3.0;
  o.rescale = true;
  o.dropout = 0.36;
  Generator gen(8);
  SRU model(o, gen);
  const SRULayer& l0 = *model.layers[0];
  ASSERT_EQ(l0.k, 4);
  const double alpha = std::sqrt(1 + 2 * std::exp(-3.0));
  EXPECT_NEAR(l0.scale_x.item<double>(), alpha, 1e-6);
  const auto b = l0.bias.to_vector<double>();
  for (int i = 0; i < 100; ++i) EXPECT_EQ(b[i], 0.0) << "b_f starts at 0";
  for (int i = 100; i < 200; ++i) EXPECT_FLOAT_EQ(b[i], -3.0f) << "b_r starts at highway_bias";
  // Per-block maxima of |W|: sqrt(3/fan_in) times the block's factors.
  const double range = std::sqrt(3.0 / 200);
  const double expected_max[4] = {range * std::sqrt(1 - 0.36), range * std::sqrt(0.5), range * std::sqrt(0.5),
                                  range * alpha};
  double seen_max[4] = {0, 0, 0, 0};
  const auto w = l0.weight.to_vector<double>();
  for (size_t i = 0; i < w.size(); ++i) seen_max[(i % 400) % 4] = std::max(seen_max[(i % 400) % 4], std::abs(w[i]));
  for (int m = 0; m < 4; ++m) {
    EXPECT_LE(seen_max[m], expected_max[m] * (1 + 1e-6)) << "block " << m;
    EXPECT_GE(seen_max[m], expected_max[m] * 0.98) << "block " << m;
  }
  // weight_c ~ U(-sqrt(3), sqrt(3)) * sqrt(0.5): variance 0.5.
  double var = 0;
  for (double v : l0.weight_c.to_vector<double>()) var += v * v;
  EXPECT_NEAR(var / 200, 0.5, 0.1);
  EXPECT_EQ(model.layers[1]->dropout, 0.0) << "the last layer has no dropout";
}

// `sru`'s weight_c_init: weight_c starts U(-w, w) as drawn (no sqrt(0.5) factor); the weights and
// their gate blocks come out as with the default (same generator draws before weight_c).
TEST(SRU, WeightCInitSetsItsRangeAndLeavesTheWeights) {
  SRUOptions o;
  o.input_size = 64;
  o.hidden_size = 64;
  o.num_layers = 2;
  Generator default_gen(9), ranged_gen(9);
  const SRU by_default(o, default_gen);
  o.weight_c_init = 0.25;
  const SRU ranged(o, ranged_gen);
  for (int64_t i = 0; i < 2; ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    EXPECT_EQ(ranged.layers[i]->weight.to_vector<double>(), by_default.layers[i]->weight.to_vector<double>());
    double largest = 0, largest_default = 0;
    for (double v : ranged.layers[i]->weight_c.to_vector<double>()) largest = std::max(largest, std::abs(v));
    for (double v : by_default.layers[i]->weight_c.to_vector<double>())
      largest_default = std::max(largest_default, std::abs(v));
    EXPECT_LE(largest, 0.25);
    EXPECT_GT(largest, 0.2) << "128 draws of U(-0.25, 0.25)";
    EXPECT_GT(largest_default, 0.9) << "the default: U(-sqrt(3), sqrt(3)) * sqrt(0.5), up to 1.22";
  }
  const std::string sru_model = "task: charlm\ndata:\n  path: x\nmodel:\n  type: sru\n";
  const config::Config cfg =
      config::parse_config(sru_model + "  weight_c_init: 0.5\n  proj_input_to_hidden_first: true\n", "exp.yaml");
  EXPECT_EQ(cfg.encoder_options.as<SRUOptions>().weight_c_init, 0.5);
  EXPECT_TRUE(cfg.encoder_options.as<SRUOptions>().proj_input_to_hidden_first);
  EXPECT_NE(sru::testing::error_of([&] { config::parse_config(sru_model + "  weight_c_init: -2\n", "exp.yaml"); })
                .find("model.weight_c_init"),
            std::string::npos);
  // Only the stack of SRU layers takes them: an encoder built on SRU layers otherwise refuses the key.
  EXPECT_NE(sru::testing::error_of([] {
              config::parse_config("task: wordlm\ndata:\n  path: x\nmodel:\n  type: embed-sru\n"
                                   "  proj_input_to_hidden_first: true\n", "exp.yaml");
            }).find("proj_input_to_hidden_first"),
            std::string::npos);
}

// `sru`'s proj_input_to_hidden_first: input_to_hidden.weight (out, input_size) maps the input to the
// layers' width first, so that layer 0 takes out inputs (k = 3: its skip term is its input); none when
// the widths agree. The stack's output is the layers' on the mapped input, gradients included.
TEST(SRU, ProjInputToHiddenFirstMapsTheInputAsSruDoes) {
  SRUOptions o;
  o.input_size = 5;
  o.hidden_size = 3;
  o.num_layers = 2;
  o.bidirectional = true;  // out = 6
  o.proj_input_to_hidden_first = true;
  o.dtype = DType::F64;
  Generator gen(4);
  SRU model(o, gen);
  ASSERT_TRUE(model.input_to_hidden);
  const auto state = model.state();
  const auto mapped = std::find_if(state.begin(), state.end(), [](auto& e) { return e.first == "input_to_hidden.weight"; });
  ASSERT_NE(mapped, state.end());
  EXPECT_EQ(mapped->second.shape(), (Shape{6, 5}));
  EXPECT_EQ(model.layers[0]->input_size, 6);
  EXPECT_EQ(model.layers[0]->k, 3);
  const Tensor x = sru::testing::leaf({4, 2, 5}, 11);
  const Tensor h = model.forward(x).first;
  const Tensor by_hand = model.layers[1]->forward(model.layers[0]->forward(model.input_to_hidden->forward(x), Tensor(),
                                                                            Tensor()).first, Tensor(), Tensor()).first;
  EXPECT_EQ(h.to_vector<double>(), by_hand.to_vector<double>());
  sru::testing::expect_gradients_match([&](const std::vector<Tensor>& in) { return model.forward(in[0]).first; }, {x});
  o.input_size = 6;
  EXPECT_FALSE(SRU(o, gen).input_to_hidden) << "the widths agree: nothing to map";
}

TEST(SRU, V1FreezesWeightCAtZero) {
  SRUOptions o;
  o.input_size = 4;
  o.hidden_size = 4;
  o.v1 = true;
  SRU model(o);
  for (double v : model.layers[0]->weight_c.to_vector<double>()) EXPECT_EQ(v, 0.0);
  EXPECT_FALSE(model.layers[0]->weight_c.requires_grad());
  EXPECT_EQ(model.num_parameters(), 2 * (4 * 12 + 8));  // weight + bias per layer; weight_c frozen
}

TEST(SRU, RescaleKeepsOutputVarianceThroughDepth) {
  // Paper section 3.2: with x' scaled by alpha, Var[h] stays close to Var[x] through a deep stack of
  // randomly initialised layers; without the scaling the highway mixes x with the smaller-variance
  // state and the variance shrinks layer after layer.
  auto variance_ratio = [](bool rescale) {
    SRUOptions o;
    o.input_size = 128;
    o.hidden_size = 128;
    o.num_layers = 8;
    o.highway_bias = -3.0;
    o.rescale = rescale;
    Generator gen(21);
    SRU model(o, gen);
    model.eval();
    autograd::NoGradGuard no_grad;
    Tensor x = Tensor::randn({64, 16, 128}, DType::F32, gen);
    const Tensor h = model.forward(x).first;
    auto var = [](const Tensor& t) {
      double s = 0, s2 = 0;
      for (double v : t.to_vector<double>()) {
        s += v;
        s2 += v * v;
      }
      const double n = static_cast<double>(t.numel());
      return s2 / n - (s / n) * (s / n);
    };
    return var(h) / var(x);
  };
  const double with = variance_ratio(true), without = variance_ratio(false);
  std::cout << "Var[h]/Var[x] after 8 layers: " << with << " with rescale, " << without << " without\n";
  EXPECT_GT(with, 0.6) << "with rescale";
  EXPECT_LT(with, 1.6) << "with rescale";
  EXPECT_LT(without, 0.6 * with) << "without rescale the variance should fall well below the rescaled one";
}

// train.precision bf16 (autocast_bf16): the fused layers compute U from bf16 operands and run the
// recurrence on bf16 I/O, passing bf16 h between layers; the stack answers in float32 whose values are
// the last layer's bf16 outputs, within bf16 rounding of the float32 run, its gradients too.
TEST(SRU, Bf16AutocastKeepsActivationsInBf16AndTracksFloat32) {
  struct RestorePrecision {
    ~RestorePrecision() { set_matmul_precision(MatmulPrecision::Highest); }
  } restore;
  for (const bool bidirectional : {false, true}) {
    for (const bool layer_norm : {false, true}) {
      SCOPED_TRACE(std::string(bidirectional ? "bidirectional" : "forward") + (layer_norm ? ", layer norm" : ""));
      SRUOptions o;
      o.input_size = 6;
      o.hidden_size = 4;
      o.num_layers = 3;
      o.bidirectional = bidirectional;
      o.layer_norm = layer_norm;
      o.rnn_dropout = 0.2;
      Generator gen(31);
      SRU model(o, gen);
      model.train(true);
      Generator data(32);
      const Tensor x = Tensor::uniform({7, 3, 6}, -1, 1, DType::F32, data);
      const Tensor w = Tensor::uniform({7, 3, bidirectional ? 8 : 4}, -1, 1, DType::F32, data);
      struct Run {
        Tensor h;
        std::vector<Tensor> grads;
      };
      const auto run = [&](MatmulPrecision precision) {
        set_matmul_precision(precision);
        model.zero_grad();
        gen.set_state(33, 0);  // the same dropout masks
        Tensor xi = x.clone();
        xi.set_requires_grad(true);
        const Tensor h = model.forward(xi).first;
        autograd::backward({sum(mul(h, w))}, {Tensor::ones({}, DType::F32)});
        Run r{h.detach(), {xi.grad()}};
        for (const Tensor& p : model.trainable_parameters()) r.grads.push_back(p.grad());
        return r;
      };
      const Run f32 = run(MatmulPrecision::Highest), b16 = run(MatmulPrecision::Medium);
      ASSERT_EQ(b16.h.dtype(), DType::F32);
      const std::vector<float> h = b16.h.to_vector<float>();
      for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(h[i], round_to_bf16(h[i])) << "h[" << i << "] is not a bf16 value";
      EXPECT_LT(sru::testing::max_error_over_largest(b16.h, f32.h), 0.05);
      ASSERT_EQ(b16.grads.size(), f32.grads.size());
      for (size_t i = 0; i < f32.grads.size(); ++i) {
        ASSERT_EQ(b16.grads[i].dtype(), DType::F32) << "gradient " << i;
        EXPECT_LT(sru::testing::max_error_over_largest(b16.grads[i], f32.grads[i]), 0.1) << "gradient " << i;
      }
    }
  }
}

// The recurrence's dropout mask drawn by its kernels (SruRecurrenceOptions::mask_c_draw) is the mask
// dropout_mask fills for the same generator state, to the bit: outputs and every gradient equal, also
// for a rank's rows of a batch shard, bidirectional, and at float64; and it costs no dispatch of its own.
TEST(SRU, TheMaskDrawnInTheKernelIsTheFilledMaskToTheBit) {
  const int64_t L = 6, B = 4, d = 5;
  for (const DType dt : {DType::F32, DType::F64})
    for (const bool bidir : {false, true})
      for (const bool shard : {false, true}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dt) << (bidir ? " bidir" : "") << (shard ? " shard" : ""));
        SruRecurrenceOptions o;
        o.hidden_size = d;
        o.bidirectional = bidir;
        const int64_t out = (bidir ? 2 : 1) * d;
        Generator data(3);
        const Tensor U = Tensor::uniform({L, B, 3 * out}, -1, 1, dt, data), x = Tensor::uniform({L, B, out}, -1, 1, dt, data);
        const Tensor w = Tensor::uniform({2 * out}, -1, 1, dt, data), b = Tensor::uniform({2 * out}, -1, 1, dt, data);
        const Tensor gh = Tensor::uniform({L, B, out}, -1, 1, dt, data);
        std::vector<std::vector<double>> results[2];
        uint64_t dispatches[2] = {0, 0};
        for (const bool drawn : {false, true}) {
          Generator gen(17);
          if (shard) gen.set_batch_shard({2 * B, B, B});  // this rank: rows [4, 8) of a batch of 8
          const MaskDraw draw = draw_dropout_mask({B, out}, 0.3, gen);
          SruRecurrenceOptions ro = o;
          if (drawn) ro.mask_c_draw = draw;
          const Tensor mask = drawn ? Tensor() : mask_of(draw, {B, out}, dt, Device::cpu());
          if (!drawn) {  // MaskDraw::value (what the CUDA kernel computes per column) is the filled mask
            const std::vector<double> filled = mask.to_vector<double>();
            for (int64_t j = 0; j < B * out; ++j)
              ASSERT_EQ(dt == DType::F32 ? draw.value<float>(j) : draw.value<double>(j), filled[j]) << j;
          }
          Tensor Ul = U.clone().set_requires_grad(true), xl = x.clone().set_requires_grad(true);
          Tensor wl = w.clone().set_requires_grad(true), bl = b.clone().set_requires_grad(true);
          const uint64_t before = kernel_dispatches();
          auto [h, c] = sru_recurrence(Ul, xl, wl, bl, Tensor(), mask, Tensor(), ro);
          autograd::backward(h, gh);
          dispatches[drawn] = kernel_dispatches() - before;
          for (const Tensor& t : {h, c, Ul.grad(), xl.grad(), wl.grad(), bl.grad()}) results[drawn].push_back(t.to_vector<double>());
        }
        EXPECT_EQ(results[1], results[0]);
        EXPECT_EQ(dispatches[1], dispatches[0]);
      }
}
