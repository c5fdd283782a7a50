// The decoder contract (nn/decoder.h) over every registered decoder and a few layer settings: in
// evaluation mode, stepping through a target equals the teacher-forced pass over it; reordering the
// state then stepping equals recomputing the reordered rows from scratch; padding a row's trailing
// target positions leaves the other rows and its own earlier positions unchanged; every parameter gets
// a gradient in training. Also the Transformer decoder's names (checkpoints of the fixed decoder load).
#include <gtest/gtest.h>

#include <algorithm>

#include "autograd/engine.h"
#include "core/kernel_count.h"
#include "nn/attention.h"
#include "nn/decoder.h"
#include "nn/transformer_decoder.h"
#include "ops/ops.h"
#include "testing.h"

using namespace sru;
using namespace sru::nn;
using sru::testing::tensors_near;

namespace {

Tensor random(const Shape& s, uint64_t seed) {
  Generator gen(seed);
  return Tensor::uniform(s, -1, 1, DType::F64, gen);
}

struct Variant {
  std::string decoder;
  bool pre_norm;
  FeedForwardKind ffn;
  bool fused_attention = false;  // the fused attention's CPU twin (the CPU's default is the composed one)
};

std::string variant_name(const ::testing::TestParamInfo<Variant>& info) {
  std::string name = info.param.decoder + (info.param.pre_norm ? "_pre" : "_post") +
                     (info.param.ffn == FeedForwardKind::Sru ? "_sru_ffn" : "") +
                     (info.param.fused_attention ? "_fused_attention" : "");
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

std::vector<Variant> variants() {
  std::vector<Variant> out;
  for (const DecoderSpec& d : decoders()) {
    out.push_back({d.name, true, FeedForwardKind::Relu});
    out.push_back({d.name, false, FeedForwardKind::Relu});
    out.push_back({d.name, true, FeedForwardKind::Sru});
    out.push_back({d.name, true, FeedForwardKind::Relu, true});
    out.push_back({d.name, false, FeedForwardKind::Relu, true});
  }
  return out;
}

class DecoderContract : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    nn::set_attention_kernel(GetParam().fused_attention ? nn::AttentionKernel::Fused : nn::AttentionKernel::Auto);
  }
  void TearDown() override { nn::set_attention_kernel(nn::AttentionKernel::Auto); }
  static constexpr int64_t kWidth = 8, kTarget = 5, kSource = 4, kBatch = 3;

  std::shared_ptr<Decoder> build(uint64_t seed = 1) const {
    DecoderArgs a;
    a.layer.width = kWidth;
    a.layer.heads = 2;
    a.layer.ff_size = 12;
    a.layer.pre_norm = GetParam().pre_norm;
    a.layer.ffn = GetParam().ffn;
    a.layer.dtype = DType::F64;
    a.num_layers = 2;
    Generator gen(seed);
    std::shared_ptr<Decoder> d = find_decoder(GetParam().decoder).build(a, gen);
    d->eval();
    return d;
  }
  // Source row 1 is padded at its last position.
  static Tensor memory_padding() {
    std::vector<int32_t> pad(kBatch * kSource, 0);
    pad[1 * kSource + kSource - 1] = 1;
    return Tensor::from_vector(pad, {kBatch, kSource});
  }
  // Feeds x (L, B, w) one position at a time from a fresh state.
  static Tensor stepped(const Decoder& d, const Tensor& x, const Tensor& memory, const Tensor& padding) {
    const std::unique_ptr<DecoderState> state = d.start_decoding(memory, padding);
    std::vector<Tensor> outs;
    for (int64_t t = 0; t < x.size(0); ++t) outs.push_back(d.forward_step(slice(x, 0, t, t + 1), *state));
    return concat(outs, 0);
  }
};

}  // namespace

TEST_P(DecoderContract, SteppingEqualsTheTeacherForcedPass) {
  const auto d = build();
  const Tensor x = random({kTarget, kBatch, kWidth}, 2), memory = random({kSource, kBatch, kWidth}, 3);
  const Tensor full = d->forward(x, Tensor(), memory, memory_padding());
  EXPECT_TRUE(tensors_near(stepped(*d, x, memory, memory_padding()), full, 1e-12, 1e-12));
}

TEST_P(DecoderContract, ReorderThenStepEqualsRecomputingTheReorderedRows) {
  const auto d = build();
  const Tensor x = random({kTarget, kBatch, kWidth}, 4), memory = random({kSource, kBatch, kWidth}, 5);
  const std::vector<int64_t> rows = {2, 0, 0, 1};
  const Tensor index = Tensor::from_vector(rows, {4});
  // Two steps on the original rows, reorder, then the remaining steps on the reordered rows' inputs.
  const std::unique_ptr<DecoderState> state = d->start_decoding(memory, memory_padding());
  for (int64_t t = 0; t < 2; ++t) d->forward_step(slice(x, 0, t, t + 1), *state);
  state->reorder(index);
  const Tensor x2 = index_select(x, 1, index);
  std::vector<Tensor> after;
  for (int64_t t = 2; t < kTarget; ++t) after.push_back(d->forward_step(slice(x2, 0, t, t + 1), *state));
  // From scratch on the reordered rows.
  const Tensor fresh = stepped(*d, x2, index_select(memory, 1, index), index_select(memory_padding(), 0, index));
  EXPECT_TRUE(tensors_near(concat(after, 0), slice(fresh, 0, 2, kTarget), 1e-12, 1e-12));
}

TEST_P(DecoderContract, TrailingTargetPaddingChangesNothingItShouldNot) {
  const auto d = build();
  const Tensor x = random({kTarget, kBatch, kWidth}, 6), memory = random({kSource, kBatch, kWidth}, 7);
  std::vector<int32_t> pad(kBatch * kTarget, 0);
  pad[0 * kTarget + 3] = pad[0 * kTarget + 4] = 1;  // row 0 is two positions shorter
  const Tensor plain = d->forward(x, Tensor(), memory, memory_padding());
  const Tensor padded = d->forward(x, Tensor::from_vector(pad, {kBatch, kTarget}), memory, memory_padding());
  EXPECT_TRUE(tensors_near(slice(padded, 1, 1, kBatch), slice(plain, 1, 1, kBatch), 1e-12, 1e-12));
  EXPECT_TRUE(tensors_near(slice(slice(padded, 1, 0, 1), 0, 0, 3), slice(slice(plain, 1, 0, 1), 0, 0, 3), 1e-12, 1e-12));
}

TEST_P(DecoderContract, EveryParameterGetsAGradientInTraining) {
  const auto d = build();
  d->train();
  const Tensor x = random({kTarget, kBatch, kWidth}, 8), memory = random({kSource, kBatch, kWidth}, 9);
  autograd::backward(sum(d->forward(x, Tensor(), memory, memory_padding())));
  for (const auto& [name, p] : d->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    double total = 0;
    for (double v : p.grad().to_vector<double>()) total += std::abs(v);
    EXPECT_GT(total, 0.0) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Registered, DecoderContract, ::testing::ValuesIn(variants()), variant_name);

// The *_fused_attention variants do reach the fused op (its kernel's marks in the host profile), in
// the teacher-forced pass and in a decoding step.
TEST_P(DecoderContract, TheFusedVariantsRunTheFusedAttention) {
  if (!GetParam().fused_attention) GTEST_SKIP() << "a composed-attention variant";
  const auto d = build();
  const Tensor x = random({kTarget, kBatch, kWidth}, 10), memory = random({kSource, kBatch, kWidth}, 11);
  const auto fused_marks = [](const std::vector<HostProfileEntry>& profile) {
    for (const HostProfileEntry& e : profile)
      if (e.name == std::string("fused_attention_forward")) return e.marks;
    return uint64_t{0};
  };
  start_host_profile();
  d->forward(x, Tensor(), memory, memory_padding());
  EXPECT_GT(fused_marks(stop_host_profile()), 0u) << "teacher-forced pass";
  start_host_profile();
  stepped(*d, slice(x, 0, 0, 1), memory, memory_padding());
  EXPECT_GT(fused_marks(stop_host_profile()), 0u) << "decoding step";
}

TEST(TransformerDecoder, KeepsTheTranslationModelsNamesAndTheSsruReplacesSelfAttention) {
  DecoderArgs a;
  a.layer.width = 8;
  a.layer.heads = 2;
  a.num_layers = 2;
  Generator gen(1);
  const auto names_of = [&](const std::string& decoder) {
    std::vector<std::string> names;
    for (const auto& [name, t] : find_decoder(decoder).build(a, gen)->state())
      if (name.rfind("layers.0.", 0) == 0 && name.find("feed_forward") == std::string::npos) names.push_back(name);
    return names;
  };
  const std::vector<std::string> transformer = names_of("transformer"), ssru = names_of("ssru-transformer");
  EXPECT_EQ(transformer.front(), "layers.0.self_attn.linear_query.weight");
  EXPECT_NE(std::find(transformer.begin(), transformer.end(), "layers.0.layer_norm_2.bias"), transformer.end());
  EXPECT_EQ(ssru.front(), "layers.0.ssru.weight");
  EXPECT_EQ(ssru.at(1), "layers.0.ssru.forget_bias");
  for (const std::string& n : ssru) EXPECT_EQ(n.find("self_attn"), std::string::npos) << n;
  const auto d = find_decoder("transformer").build(a, gen);
  EXPECT_TRUE(d->state().back().first == "layer_norm.bias");
  EXPECT_THROW(find_decoder("lstm"), Error);
}

TEST(SsruSublayer, PaddedStepsOutputZeroAndKeepTheState) {
  Generator gen(3);
  const SsruSublayer ssru(4, DType::F64, gen);
  const Tensor x = random({4, 2, 4}, 10);
  std::vector<int32_t> pad(4 * 2, 0);
  pad[2 * 2 + 1] = pad[3 * 2 + 1] = 1;  // row 1 ends after two steps
  Tensor c, c_short;
  const Tensor h = ssru.forward(x, Tensor::from_vector(pad, {4, 2}), c);
  ssru.forward(slice(x, 0, 0, 2), Tensor(), c_short);
  for (int64_t t = 2; t < 4; ++t)
    for (double v : slice(slice(h, 0, t, t + 1), 1, 1, 2).to_vector<double>()) EXPECT_EQ(v, 0.0) << "step " << t;
  EXPECT_EQ(slice(c, 0, 1, 2).to_vector<double>(), slice(c_short, 0, 1, 2).to_vector<double>());
  EXPECT_NE(slice(c, 0, 0, 1).to_vector<double>(), slice(c_short, 0, 0, 1).to_vector<double>());
}
