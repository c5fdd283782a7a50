// Optimisers, schedules and clipping against updates computed by hand from PyTorch's formulas.
#include <gtest/gtest.h>

#include <cmath>

#include "core/kernel_count.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "testing.h"

using namespace sru;
using sru::testing::options_with_decay;

namespace {

// One scalar parameter p with value p0; runs the optimizer for the given gradients, returns p after each step.
std::vector<double> run(const std::string& kind, double p0, const std::vector<double>& grads, double lr,
                        optim::OptimizerOptions o = {}) {
  o.kind = kind;
  Tensor p = Tensor::full({1}, p0, DType::F64).set_requires_grad(true);
  optim::Optimizer opt({{"p", p}}, o);
  std::vector<double> values;
  for (double g : grads) {
    p.set_grad(Tensor::full({1}, g, DType::F64));
    opt.step(lr);
    values.push_back(p.item<double>());
  }
  return values;
}

}  // namespace

TEST(Optim, SgdPlainMomentumAndWeightDecay) {
  const auto plain = run("sgd", 1.0, {0.5, 0.5}, 0.1);
  EXPECT_NEAR(plain[0], 0.95, 1e-15);
  EXPECT_NEAR(plain[1], 0.90, 1e-15);
  optim::OptimizerOptions o;
  o.momentum = 0.9;
  o.weight_decay = 0.1;
  // g1 = 0.5 + 0.1*1 = 0.6; buf = 0.6; p = 1 - 0.1*0.6 = 0.94
  // g2 = 0.5 + 0.1*0.94 = 0.594; buf = 0.9*0.6 + 0.594 = 1.134; p = 0.94 - 0.1134 = 0.8266
  const auto v = run("sgd", 1.0, {0.5, 0.5}, 0.1, o);
  EXPECT_NEAR(v[0], 0.94, 1e-15);
  EXPECT_NEAR(v[1], 0.8266, 1e-15);
}

TEST(Optim, AdamBiasCorrectedSteps) {
  // Step 1 of Adam moves by lr * sign(g) (up to eps); step 2 by hand.
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8, lr = 0.01;
  const auto v = run("adam", 1.0, {0.5, -0.2}, lr);
  double m = (1 - b1) * 0.5, s = (1 - b2) * 0.25;
  double p = 1.0 - lr * (m / (1 - b1)) / (std::sqrt(s / (1 - b2)) + eps);
  EXPECT_NEAR(v[0], p, 1e-15);
  m = b1 * m + (1 - b1) * -0.2;
  s = b2 * s + (1 - b2) * 0.04;
  p -= lr * (m / (1 - b1 * b1)) / (std::sqrt(s / (1 - b2 * b2)) + eps);
  EXPECT_NEAR(v[1], p, 1e-15);
}

TEST(Optim, AdamWDecouplesWeightDecay) {
  optim::OptimizerOptions o;
  o.weight_decay = 0.1;
  const double lr = 0.01;
  const auto v = run("adamw", 2.0, {0.5}, lr, o);
  // p = 2 * (1 - lr*wd), then the plain Adam step of size lr (|g| >> eps).
  EXPECT_NEAR(v[0], 2.0 * (1 - lr * 0.1) - lr * 0.5 / (0.5 + 1e-8), 1e-12);
  // Adam with the same weight decay adds it to the gradient instead: a different result.
  EXPECT_GT(std::abs(run("adam", 2.0, {0.5}, lr, o)[0] - v[0]), 1e-4);
}

TEST(Optim, AdamaxInfinityNorm) {
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8, lr = 0.002;
  const auto v = run("adamax", 1.0, {0.5, 0.1}, lr);
  double m = (1 - b1) * 0.5, u = std::max(0.0, 0.5 + eps);
  double p = 1.0 - lr / (1 - b1) * m / u;
  EXPECT_NEAR(v[0], p, 1e-15);
  m = b1 * m + (1 - b1) * 0.1;
  u = std::max(b2 * u, 0.1 + eps);
  p -= lr / (1 - b1 * b1) * m / u;
  EXPECT_NEAR(v[1], p, 1e-15);
}

TEST(Optim, RAdamUnrectifiedThenRectified) {
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8, lr = 0.1;
  std::vector<double> grads(7, 0.3);
  const auto v = run("radam", 1.0, grads, lr);
  // Early steps: rho_t <= 5, a momentum-SGD step with the bias-corrected first moment (= 0.3 here).
  EXPECT_NEAR(v[0], 1.0 - lr * 0.3, 1e-12);
  // Replay by hand to the first rectified step.
  double p = 1.0, m = 0, s = 0;
  const double rho_inf = 2 / (1 - b2) - 1;
  for (int t = 1; t <= 7; ++t) {
    m = b1 * m + (1 - b1) * 0.3;
    s = b2 * s + (1 - b2) * 0.09;
    const double bias2 = 1 - std::pow(b2, t);
    const double m_hat = m / (1 - std::pow(b1, t));
    const double rho = rho_inf - 2 * t * std::pow(b2, t) / bias2;
    if (rho > 5) {
      const double r = std::sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho));
      p -= lr * m_hat * r * std::sqrt(bias2) / (std::sqrt(s) + eps);
    } else {
      p -= lr * m_hat;
    }
    EXPECT_NEAR(v[t - 1], p, 1e-12) << "step " << t;
  }
}

TEST(Optim, RAdamWDecouplesWeightDecay) {
  optim::OptimizerOptions o;
  o.weight_decay = 0.1;
  const double lr = 0.01;
  std::vector<double> grads(8, 0.5);
  const auto decoupled = run("radamw", 2.0, grads, lr, o), plain = run("radam", 2.0, grads, lr);
  // Each step shrinks p by (1 - lr wd) and then takes RAdam's step without weight decay, whose size
  // does not depend on p: p_t = (1 - lr wd) p_{t-1} - (plain_{t-1} - plain_t).
  double p = 2.0, previous_plain = 2.0;
  for (size_t t = 0; t < grads.size(); ++t) {
    p = p * (1 - lr * 0.1) - (previous_plain - plain[t]);
    previous_plain = plain[t];
    EXPECT_NEAR(decoupled[t], p, 1e-12) << "step " << t + 1;
  }
  // RAdam with the same weight decay adds it to the gradient instead: a different result.
  EXPECT_GT(std::abs(run("radam", 2.0, grads, lr, o).back() - decoupled.back()), 1e-4);
}

TEST(Optim, StateRoundTripContinuesIdentically) {
  Tensor a = Tensor::full({3}, 1.0, DType::F64).set_requires_grad(true);
  Tensor b = a.clone().set_requires_grad(true);
  optim::Optimizer oa({{"w", a}}, {}), ob({{"w", b}}, {});
  for (int i = 0; i < 3; ++i) {
    a.set_grad(Tensor::full({3}, 0.1 * (i + 1), DType::F64));
    oa.step(0.01);
  }
  b.copy_(a);
  ob.load_state(oa.state());
  EXPECT_EQ(ob.steps(), 3);
  a.set_grad(Tensor::full({3}, -0.7, DType::F64));
  b.set_grad(Tensor::full({3}, -0.7, DType::F64));
  oa.step(0.01);
  ob.step(0.01);
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
  optim::Optimizer sgd({{"w", b}}, {"sgd"});
  EXPECT_NE(sru::testing::error_of([&] { sgd.load_state(oa.state()); }).find("momentum_buffer"), std::string::npos);
}

TEST(Optim, ClipGradNormScalesToTheLimit) {
  Tensor a = Tensor::zeros({2}, DType::F64).set_requires_grad(true), b = Tensor::zeros({1}, DType::F64).set_requires_grad(true);
  a.set_grad(Tensor::from_vector(std::vector<double>{3, 0}, {2}));
  b.set_grad(Tensor::from_vector(std::vector<double>{4}, {1}));
  const double norm = optim::clip_grad_norm({{"a", a}, {"b", b}}, 1.0);
  EXPECT_DOUBLE_EQ(norm, 5.0);
  EXPECT_NEAR(a.grad().to_vector<double>()[0], 3.0 / (5.0 + 1e-6), 1e-15);
  EXPECT_NEAR(b.grad().item<double>(), 4.0 / (5.0 + 1e-6), 1e-15);
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm({{"a", a}}, 100.0), a.grad().to_vector<double>()[0]) << "under the limit: unchanged";
  b.set_grad(Tensor::full({1}, std::nan(""), DType::F64));
  EXPECT_TRUE(std::isnan(optim::clip_grad_norm({{"b", b}}, 1.0)));
}

// The training step's update: the norm and clip factor left on the device (grad_norm_and_clip_factor)
// and applied inside the multi-tensor update give the parameters and slots of clip_grad_norm's
// scaling pass followed by the update, to the bit, for every optimiser, with the factor below and at
// 1; one update dispatch per dtype group, one norm dispatch per group plus the finish.
TEST(Optim, TheClipFactorFoldedIntoOneUpdatePerDtypeEqualsScalingFirst) {
  for (const std::string kind : {"sgd", "adam", "adamw", "adamax", "radam", "radamw"}) {
    SCOPED_TRACE(kind);
    const optim::OptimizerOptions o = options_with_decay(kind, 0.01);
    const auto make = [](uint64_t seed) {
      Generator gen(seed);
      nn::NamedTensors params;
      params.emplace_back("big", Tensor::uniform({70000}, -1, 1, DType::F32, gen).set_requires_grad(true));  // 2 blocks
      params.emplace_back("row", Tensor::uniform({5}, -1, 1, DType::F32, gen).set_requires_grad(true));
      params.emplace_back("double", Tensor::uniform({3, 4}, -1, 1, DType::F64, gen).set_requires_grad(true));
      params.emplace_back("matrix", Tensor::uniform({7, 9}, -1, 1, DType::F32, gen).set_requires_grad(true));
      return params;
    };
    nn::NamedTensors scaled = make(3), folded = make(3);
    optim::Optimizer scaled_opt(scaled, o), folded_opt(folded, o);
    for (int step = 0; step < 4; ++step) {
      const double max_norm = step == 2 ? 1e9 : 2.0;  // step 2: under the limit, factor 1
      for (size_t i = 0; i < scaled.size(); ++i) {
        Generator gen(50 + 10 * step + i);
        const Tensor g = Tensor::uniform(scaled[i].second.shape(), -1, 1, scaled[i].second.dtype(), gen);
        scaled[i].second.set_grad(g.clone());
        folded[i].second.set_grad(g.clone());
      }
      const double norm = optim::clip_grad_norm(scaled, max_norm);
      scaled_opt.step(0.01);
      const uint64_t before = kernel_dispatches();
      const Tensor norm_and_factor = optim::grad_norm_and_clip_factor(folded, max_norm);
      folded_opt.step(0.01, norm_and_factor);
      EXPECT_EQ(kernel_dispatches() - before, 2u + 1u + 2u) << "norm: 2 groups and the finish; update: 2 groups";
      EXPECT_EQ(norm_and_factor.to_vector<double>()[0], norm);
      EXPECT_EQ(norm_and_factor.to_vector<double>()[1] == 1.0, step == 2);
      for (size_t i = 0; i < scaled.size(); ++i)
        ASSERT_EQ(folded[i].second.to_vector<double>(), scaled[i].second.to_vector<double>())
            << "step " << step << " " << scaled[i].first;
    }
    const nn::NamedTensors a = scaled_opt.state(), b = folded_opt.state();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(b[i].second.to_vector<double>(), a[i].second.to_vector<double>()) << a[i].first;
  }
}

// Gradient accumulation's 1 / terms folded into the update (grad_norm_and_clip_factor's grad_scale):
// the norm is that of the scaled gradients and the update equals scaling the gradients first, clipped
// and not, to float rounding (one rounding of g * (s f) against two of (g * s) * f).
TEST(Optim, TheAccumulationScaleFoldedIntoTheUpdateEqualsScalingFirst) {
  const double grad_scale = 1.0 / 7.0;
  for (const double max_norm : {0.0, 0.5, 1e9}) {
    SCOPED_TRACE(::testing::Message() << "max_norm " << max_norm);
    optim::OptimizerOptions o;
    o.kind = "adamw";
    o.weight_decay = 0.01;
    Generator gen(9);
    const Tensor w0 = Tensor::uniform({300}, -1, 1, DType::F32, gen), g = Tensor::uniform({300}, -1, 1, DType::F32, gen);
    nn::NamedTensors scaled{{"w", w0.clone().set_requires_grad(true)}}, folded{{"w", w0.clone().set_requires_grad(true)}};
    optim::Optimizer scaled_opt(scaled, o), folded_opt(folded, o);
    scaled[0].second.set_grad(g.clone().mul_(grad_scale));
    folded[0].second.set_grad(g.clone());
    const Tensor expected = optim::grad_norm_and_clip_factor(scaled, max_norm);
    const Tensor norm_and_factor = optim::grad_norm_and_clip_factor(folded, max_norm, grad_scale);
    EXPECT_NEAR(norm_and_factor.to_vector<double>()[0], expected.to_vector<double>()[0], 1e-6);
    EXPECT_NEAR(norm_and_factor.to_vector<double>()[1], grad_scale * expected.to_vector<double>()[1], 1e-7);
    scaled_opt.step(0.01, max_norm > 0 ? expected : Tensor());
    folded_opt.step(0.01, norm_and_factor);
    EXPECT_TRUE(sru::testing::tensors_near(folded[0].second, scaled[0].second, 1e-6, 1e-6));
    EXPECT_FALSE(sru::testing::tensors_near(folded[0].second, w0, 1e-6, 1e-6)) << "no update happened";
  }
}

// Per-parameter weight decay (train.weight_decay_exclude): the excluded parameters take exactly the steps
// of an optimiser with weight decay 0 (torch.optim's second parameter group), the others those of one
// with the decay, to the bit, for every optimiser; a string in no parameter's name is refused naming it.
TEST(Optim, AParameterExcludedFromWeightDecayStepsAsWithZeroDecay) {
  for (const std::string kind : {"sgd", "adam", "adamw", "adamax", "radam", "radamw"}) {
    SCOPED_TRACE(kind);
    const optim::OptimizerOptions o = options_with_decay(kind, 0.1);
    Generator gen(4);
    const Tensor w0 = Tensor::uniform({40}, -1, 1, DType::F32, gen), b0 = Tensor::uniform({6}, -1, 1, DType::F32, gen);
    nn::NamedTensors both{{"layer.weight", w0.clone().set_requires_grad(true)},
                          {"layer.bias", b0.clone().set_requires_grad(true)}};
    nn::NamedTensors decayed{{"layer.weight", w0.clone().set_requires_grad(true)}};
    nn::NamedTensors spared{{"layer.bias", b0.clone().set_requires_grad(true)}};
    optim::OptimizerOptions excluding = o, no_decay = o;
    excluding.weight_decay_exclude = {"bias"};
    no_decay.weight_decay = 0.0;
    optim::Optimizer mixed(both, excluding), with_decay(decayed, o), without(spared, no_decay);
    EXPECT_TRUE(mixed.decays(0));
    EXPECT_FALSE(mixed.decays(1));
    for (int step = 0; step < 3; ++step) {
      Generator g(20 + step);
      const Tensor gw = Tensor::uniform({40}, -1, 1, DType::F32, g), gb = Tensor::uniform({6}, -1, 1, DType::F32, g);
      both[0].second.set_grad(gw.clone());
      both[1].second.set_grad(gb.clone());
      decayed[0].second.set_grad(gw.clone());
      spared[0].second.set_grad(gb.clone());
      mixed.step(0.01);
      with_decay.step(0.01);
      without.step(0.01);
    }
    EXPECT_EQ(both[0].second.to_vector<float>(), decayed[0].second.to_vector<float>());
    EXPECT_EQ(both[1].second.to_vector<float>(), spared[0].second.to_vector<float>());
  }
  optim::OptimizerOptions typo;
  typo.weight_decay_exclude = {"bais"};
  nn::NamedTensors params{{"layer.bias", Tensor::zeros({2}).set_requires_grad(true)}};
  const std::string error = sru::testing::error_of([&] { optim::Optimizer(params, typo); });
  EXPECT_NE(error.find("train.weight_decay_exclude: 'bais' is in no trainable parameter's name (they are: layer.bias)"),
            std::string::npos) << error;
}

// A non-finite step decided on the device (the factor NaN when the norm or the given loss is not
// finite): every optimiser's per-tensor update leaves the parameters and slots as they were (the
// whole-buffer update: FlatParameters.MembersOfManyPiecesAndEmptyOnesStepAsTensorByTensor), and
// forget_step takes the count back so that the next step equals the first step of an optimiser that
// never saw the bad one.
TEST(Optim, ANanClipFactorLeavesEverythingAsItWas) {
  for (const std::string kind : {"sgd", "adam", "adamw", "adamax", "radam", "radamw"}) {
    SCOPED_TRACE(kind);
    const optim::OptimizerOptions o = options_with_decay(kind, 0.01);
    Generator gen(6);
    const Tensor w0 = Tensor::uniform({50}, -1, 1, DType::F32, gen), g = Tensor::uniform({50}, -1, 1, DType::F32, gen);
    nn::NamedTensors skipped{{"w", w0.clone().set_requires_grad(true)}}, clean{{"w", w0.clone().set_requires_grad(true)}};
    optim::Optimizer skipping(skipped, o), fresh(clean, o);
    Tensor bad = g.clone();
    bad.data<float>()[3] = std::nanf("");
    skipped[0].second.set_grad(bad);
    const Tensor nan_norm = skipping.grad_norm_and_clip_factor(1.0);
    EXPECT_TRUE(std::isnan(nan_norm.to_vector<double>()[1])) << "a NaN gradient";
    skipping.step(0.01, nan_norm);
    EXPECT_EQ(skipped[0].second.to_vector<float>(), w0.to_vector<float>());
    for (const auto& [name, slot] : skipping.state())
      if (name != "optim.step") EXPECT_EQ(slot.to_vector<double>(), std::vector<double>(50, 0.0)) << name;
    skipping.forget_step();
    EXPECT_EQ(skipping.steps(), 0);
    // A finite norm with a non-finite loss: skipped as well.
    skipped[0].second.set_grad(g.clone());
    const Tensor inf_loss = skipping.grad_norm_and_clip_factor(1.0, 1.0, Tensor::full({}, INFINITY, DType::F32));
    EXPECT_TRUE(std::isfinite(inf_loss.to_vector<double>()[0]));
    EXPECT_TRUE(std::isnan(inf_loss.to_vector<double>()[1]));
    skipping.step(0.01, inf_loss);
    EXPECT_EQ(skipped[0].second.to_vector<float>(), w0.to_vector<float>());
    skipping.forget_step();
    // Then a good step equals a fresh optimiser's first.
    const Tensor good = skipping.grad_norm_and_clip_factor(1.0, 1.0, Tensor::full({}, 2.5, DType::F32));
    skipping.step(0.01, good);
    clean[0].second.set_grad(g.clone());
    fresh.step(0.01, optim::grad_norm_and_clip_factor(clean, 1.0));
    EXPECT_EQ(skipped[0].second.to_vector<float>(), clean[0].second.to_vector<float>());
  }
}

TEST(Schedule, HandComputedValues) {
  optim::ScheduleOptions o;
  o.lr = 0.1;
  EXPECT_DOUBLE_EQ(optim::learning_rate(o, 7, 3), 0.1);
  o.kind = "step";
  o.decay_steps = 10;
  o.decay_rate = 0.5;
  EXPECT_DOUBLE_EQ(optim::learning_rate(o, 10, 0), 0.1);
  EXPECT_DOUBLE_EQ(optim::learning_rate(o, 11, 0), 0.05);
  EXPECT_DOUBLE_EQ(optim::learning_rate(o, 25, 0), 0.025);
  o.kind = "epoch";
  EXPECT_DOUBLE_EQ(optim::learning_rate(o, 1, 2), 0.025);
  o.kind = "noam";
  o.lr = 3.0;
  o.model_size = 1024;
  o.warmup_steps = 100;
  EXPECT_DOUBLE_EQ(optim::learning_rate(o, 50, 0), 3.0 / 32.0 * 50 * std::pow(100.0, -1.5));
  EXPECT_DOUBLE_EQ(optim::learning_rate(o, 400, 0), 3.0 / 32.0 / 20.0);
  o.kind = "cosine";
  o.lr = 1.0;
  o.min_lr = 0.1;
  o.warmup_steps = 10;
  o.total_steps = 110;
  EXPECT_DOUBLE_EQ(optim::learning_rate(o, 5, 0), 0.5);
  EXPECT_DOUBLE_EQ(optim::learning_rate(o, 10, 0), 1.0);
  EXPECT_NEAR(optim::learning_rate(o, 60, 0), 0.55, 1e-15);
  EXPECT_NEAR(optim::learning_rate(o, 110, 0), 0.1, 1e-15);
  EXPECT_NEAR(optim::learning_rate(o, 500, 0), 0.1, 1e-15);
}
