// The moving average of the weights (train/ema.h): the recurrence in float64 against a closed form,
// the start step, the exchange into the model and back (bit-exact), loading from a checkpoint's tensors
// (with and without raw weights, damaged), and the after-update place in the shared training step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "train/ema.h"
#include "testing.h"

using namespace sru;
using sru::testing::error_of;

namespace {

nn::NamedTensors two_params() {
  Generator gen(3);
  return {{"w", Tensor::uniform({4, 3}, -1, 1, DType::F64, gen).set_requires_grad(true)},
          {"b", Tensor::uniform({5}, -1, 1, DType::F64, gen).set_requires_grad(true)}};
}

// Sets every parameter to values that depend on the step, as an optimiser update would change them.
void set_step_values(nn::NamedTensors& params, int64_t step) {
  for (auto& [name, p] : params) {
    std::vector<double> v(static_cast<size_t>(p.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.3 * static_cast<double>(step) + 0.7 * static_cast<double>(i));
    p.copy_(Tensor::from_vector(v, p.shape(), DType::F64));
  }
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// Steps 1 and 2 of training: the weights change, the average follows.
void two_updates(nn::NamedTensors& params, train::WeightEma& ema) {
  for (int64_t step = 1; step <= 2; ++step) {
    set_step_values(params, step);
    ema.update(step);
  }
}

}  // namespace

TEST(WeightEma, FollowsTheRecurrenceAfterTheStartStep) {
  const double decay = 0.75;
  const int64_t start = 2;
  for (const bool warmup : {false, true}) {
    SCOPED_TRACE(warmup ? "warm-up" : "fixed decay");
    nn::NamedTensors params = two_params();
    train::WeightEma ema(params, decay, start, warmup);
    // Expected: a = w up to the start step; then a = d a + (1 - d) w, d = decay, or with the warm-up
    // min(decay, (1 + n) / (10 + n)) n updates after the start.
    std::vector<double> expected = values(params[0].second);
    for (int64_t step = 1; step <= 30; ++step) {
      set_step_values(params, step);
      ema.update(step);
      const double n = static_cast<double>(step - start);
      const double d = warmup ? std::min(decay, (1 + n) / (10 + n)) : decay;
      if (step > start) {
        EXPECT_DOUBLE_EQ(ema.decay_at(step), d) << step;
      }
      const std::vector<double> w = values(params[0].second);
      for (size_t i = 0; i < expected.size(); ++i)
        expected[i] = step <= start ? w[i] : d * expected[i] + (1 - d) * w[i];
    }
    const train::WeightEma::InModel in(&ema);
    const std::vector<double> got = values(params[0].second);
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-15) << i;
  }
  EXPECT_DOUBLE_EQ(train::WeightEma(two_params(), 0.999, 0).decay_at(1), 2.0 / 11.0);
  EXPECT_DOUBLE_EQ(train::WeightEma(two_params(), 0.999, 0).decay_at(20000), 0.999);
}

TEST(WeightEma, InModelExchangesAndRestoresBitForBit) {
  nn::NamedTensors params = two_params();
  train::WeightEma ema(params, 0.5, 0);
  two_updates(params, ema);
  const std::vector<double> raw = values(params[1].second);
  std::vector<double> average;
  {
    const train::WeightEma::InModel in(&ema);
    EXPECT_TRUE(ema.in_model());
    average = values(params[1].second);
    EXPECT_NE(average, raw);
    {
      const train::WeightEma::InModel nested(&ema);  // does not exchange back
      EXPECT_EQ(values(params[1].second), average);
    }
    EXPECT_EQ(values(params[1].second), average);
    const nn::NamedTensors held = ema.raw_weights();
    ASSERT_EQ(held.size(), 2u);
    EXPECT_EQ(held[1].first, "raw.b");
    EXPECT_EQ(values(held[1].second), raw);
  }
  EXPECT_FALSE(ema.in_model());
  EXPECT_EQ(values(params[1].second), raw);
  EXPECT_NE(error_of([&] { ema.raw_weights(); }).find("outside"), std::string::npos);
  const train::WeightEma::InModel none(nullptr);  // no average: nothing happens
}

TEST(WeightEma, LoadsTheAverageAndTheRawWeightsFromACheckpoint) {
  nn::NamedTensors params = two_params();
  train::WeightEma ema(params, 0.5, 0);
  two_updates(params, ema);
  // What a checkpoint holds: the model tensors are the average, raw.* the weights.
  safetensors::File file;
  std::vector<std::vector<double>> average, raw;
  {
    const train::WeightEma::InModel in(&ema);
    for (const auto& [name, p] : params) {
      file.tensors.emplace_back(name, p.clone());
      average.push_back(values(p));
    }
    for (const auto& [name, t] : ema.raw_weights()) {
      file.tensors.emplace_back(name, t.clone());
      raw.push_back(values(t));
    }
  }
  // A fresh model and average, as a resumed run has them after loading the model tensors.
  nn::NamedTensors again = two_params();
  for (size_t i = 0; i < again.size(); ++i) again[i].second.copy_(*file.find(again[i].first));
  train::WeightEma resumed(again, 0.5, 0);
  EXPECT_NE(resumed.load(file, "ck.safetensors").find("resume from the checkpoint"), std::string::npos);
  for (size_t i = 0; i < again.size(); ++i) EXPECT_EQ(values(again[i].second), raw[i]);
  {
    const train::WeightEma::InModel in(&resumed);
    for (size_t i = 0; i < again.size(); ++i) EXPECT_EQ(values(again[i].second), average[i]);
  }
  // The same updates from here give the same result as the original.
  set_step_values(params, 3);
  set_step_values(again, 3);
  ema.update(3);
  resumed.update(3);
  const train::WeightEma::InModel a(&ema), b(&resumed);
  for (size_t i = 0; i < again.size(); ++i) EXPECT_EQ(values(again[i].second), values(params[i].second));

  // The raw weights restored without an average (train.ema_decay turned off at resume).
  nn::NamedTensors plain = two_params();
  EXPECT_TRUE(train::restore_raw_weights(plain, file, "ck.safetensors"));
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(values(plain[i].second), raw[i]);
}

TEST(WeightEma, CheckpointsWithoutOrWithDamagedRawWeights) {
  nn::NamedTensors params = two_params();
  safetensors::File none{{{"w", params[0].second.clone()}, {"b", params[1].second.clone()}}, {}};
  train::WeightEma ema(params, 0.9, 0);
  EXPECT_NE(ema.load(none, "old.safetensors").find("the weight average starts from its weights"), std::string::npos);
  EXPECT_FALSE(train::restore_raw_weights(params, none, "old.safetensors"));

  safetensors::File half = none;
  half.tensors.emplace_back("raw.w", params[0].second.clone());
  EXPECT_NE(error_of([&] { ema.load(half, "half.safetensors"); }).find("'half.safetensors' holds raw weights for 1 of the 2"),
            std::string::npos);
  safetensors::File wrong = none;
  wrong.tensors.emplace_back("raw.w", Tensor::zeros({3, 4}, DType::F64));
  wrong.tensors.emplace_back("raw.b", params[1].second.clone());
  EXPECT_NE(error_of([&] { ema.load(wrong, "wrong.safetensors"); }).find("'raw.w' does not match parameter 'w'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { train::WeightEma(params, 1.0, 0); }).find("train.ema_decay must be in (0, 1)"),
            std::string::npos);
}
