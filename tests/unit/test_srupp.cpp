// SRU++ (nn/srupp.h): the reference's parameter names and shapes, a new layer (alpha = 0) equal to the
// SRU with the factorised projection W3 W1, causality (no output or gradient depends on a later input),
// memory that makes a segmented stream equal the whole one (training mask) and evaluation independent
// of the chunking (same_length), the carried state's layout, padding, option errors, and a checkpoint
// round trip; plus causal_softmax against masked_softmax with the equivalent mask tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "autograd/engine.h"
#include "nn/attention.h"
#include "nn/checkpoint.h"
#include "nn/lstm.h"
#include "nn/sru.h"
#include "nn/srupp.h"
#include "ops/ops.h"
#include "srupp_testing.h"
#include "testing.h"

using namespace sru;
using sru::testing::error_of;
using sru::testing::expect_same_state_except;
using sru::testing::set_alpha;
using sru::testing::srupp_state_tensors;
using sru::testing::tensors_near;

namespace {

nn::SRUppOptions small_options() { return sru::testing::srupp_options(6, 8, 4, 3, 2); }

Tensor run(const nn::SRUpp& model, const Tensor& x, nn::EncoderStatePtr& state, const Tensor& pad = Tensor()) {
  return model.forward_sequence({x, pad, Tensor()}, state);
}

Tensor random_input(int64_t L, int64_t B, int64_t n, uint64_t seed) {
  Generator gen(seed);
  return Tensor::uniform({L, B, n}, -1, 1, DType::F64, gen);
}

}  // namespace

TEST(SRUpp, ParameterNamesAndShapesFollowTheReferenceStateDict) {
  nn::SRUppOptions o = small_options();
  o.attention_every_n_layers = 2;  // attention in layer 1 only
  o.layer_norm = true;
  o.proj_input_to_hidden_first = false;
  Generator gen(1);
  nn::SRUpp model(o, gen);
  std::vector<std::pair<std::string, Shape>> got;
  for (const auto& [name, t] : model.state()) got.emplace_back(name, t.shape());
  const std::vector<std::pair<std::string, Shape>> expected = {
      {"rnn_lst.0.weight_c", {16}}, {"rnn_lst.0.bias", {16}}, {"rnn_lst.0.scale_x", {1}},
      {"rnn_lst.0.transform_module.linear1.weight", {4, 6}}, {"rnn_lst.0.transform_module.linear2.weight", {32, 4}},
      {"rnn_lst.0.transform_module.layer_norm.weight", {4}}, {"rnn_lst.0.transform_module.layer_norm.bias", {4}},
      {"rnn_lst.0.layer_norm.weight", {6}}, {"rnn_lst.0.layer_norm.bias", {6}},
      {"rnn_lst.1.weight_c", {16}}, {"rnn_lst.1.bias", {16}}, {"rnn_lst.1.scale_x", {1}},
      {"rnn_lst.1.transform_module.alpha", {1}}, {"rnn_lst.1.transform_module.linear1.weight", {4, 8}},
      {"rnn_lst.1.transform_module.linear2.weight", {8, 4}}, {"rnn_lst.1.transform_module.linear3.weight", {24, 4}},
      {"rnn_lst.1.transform_module.layer_norm.weight", {4}}, {"rnn_lst.1.transform_module.layer_norm.bias", {4}},
      {"rnn_lst.1.layer_norm.weight", {8}}, {"rnn_lst.1.layer_norm.bias", {8}},
      {"rnn_lst.2.weight_c", {16}}, {"rnn_lst.2.bias", {16}}, {"rnn_lst.2.scale_x", {1}},
      {"rnn_lst.2.transform_module.linear1.weight", {4, 8}}, {"rnn_lst.2.transform_module.linear2.weight", {24, 4}},
      {"rnn_lst.2.transform_module.layer_norm.weight", {4}}, {"rnn_lst.2.transform_module.layer_norm.bias", {4}},
      {"rnn_lst.2.layer_norm.weight", {8}}, {"rnn_lst.2.layer_norm.bias", {8}}};
  EXPECT_EQ(got, expected);
  EXPECT_EQ(model.attention_layers(), 1);

  // Initialisation: alpha 0, bias [0 | highway_bias], weight_c in [-1, 1], scale_x 1 without rescale.
  const nn::SRUppLayer& layer = *model.layers[1];
  const auto bias = layer.bias.to_vector<double>();
  EXPECT_TRUE(std::all_of(bias.begin(), bias.begin() + 8, [](double b) { return b == 0.0; }));
  EXPECT_TRUE(std::all_of(bias.begin() + 8, bias.end(), [](double b) { return b == -2.0; }));
  const auto wc = layer.weight_c.to_vector<double>();
  EXPECT_TRUE(std::all_of(wc.begin(), wc.end(), [](double w) { return std::abs(w) <= 1.0; }));
  EXPECT_EQ(layer.scale_x.item<double>(), 1.0);
  EXPECT_EQ(dynamic_cast<nn::SRUppAttention&>(*layer.transform_module).alpha.item<double>(), 0.0);

  // The last n layers; the input mapped to the layers' width first.
  o.attention_every_n_layers = 1;
  o.attention_last_n_layers = 2;
  o.proj_input_to_hidden_first = true;
  const nn::SRUpp last_two(o, gen);
  EXPECT_FALSE(last_two.layers[0]->transform_module->attends());
  EXPECT_TRUE(last_two.layers[1]->transform_module->attends() && last_two.layers[2]->transform_module->attends());
  ASSERT_TRUE(last_two.input_to_hidden);
  EXPECT_EQ(last_two.input_to_hidden->weight.shape(), (Shape{8, 6}));
  EXPECT_EQ(last_two.layers[0]->k, 3) << "the first layer reads the mapped input of the layers' width";
}

TEST(SRUpp, NewLayersAreTheSRUWithTheFactorisedProjection) {
  // alpha = 0 and no attention layer norm: U = W3 W1 x, the SRU with projection_size d'.
  nn::SRUppOptions o = small_options();
  o.attn_layer_norm = false;
  o.num_layers = 2;
  Generator gen(2);
  nn::SRUpp srupp(o, gen);
  srupp.train(false);
  nn::SRUOptions so;
  so.input_size = o.input_size;
  so.hidden_size = o.hidden_size;
  so.num_layers = 2;
  so.projection_size = o.proj_size;
  so.highway_bias = o.highway_bias;
  so.dtype = DType::F64;
  nn::SRU sru(so, gen);
  sru.eval();
  for (size_t i = 0; i < 2; ++i) {
    const nn::SRUppLayer& from = *srupp.layers[i];
    nn::SRULayer& to = *sru.layers[i];
    const auto& attention = dynamic_cast<const nn::SRUppAttention&>(*from.transform_module);
    ASSERT_TRUE(to.weight_proj.defined());
    ASSERT_EQ(to.k, from.k);
    to.weight_proj.copy_(transpose(attention.linear1->weight, 0, 1));
    to.weight.copy_(transpose(attention.linear3->weight, 0, 1));
    to.weight_c.copy_(from.weight_c);
    to.bias.copy_(from.bias);
  }
  const Tensor x = random_input(5, 3, 6, 3);
  nn::EncoderStatePtr state;
  const Tensor h = run(srupp, x, state);
  const auto [h_sru, c_sru] = sru.forward(x);
  EXPECT_TRUE(tensors_near(h, h_sru, 1e-12, 1e-12));
  EXPECT_TRUE(tensors_near(dynamic_cast<const nn::SruppState&>(*state).c, c_sru, 1e-12, 1e-12));
  // A trained alpha brings the attention in.
  set_alpha(srupp, 0.5);
  nn::EncoderStatePtr state2;
  EXPECT_FALSE(tensors_near(run(srupp, x, state2), h_sru, 1e-6, 1e-6));
}

TEST(SRUpp, NoOutputOrGradientDependsOnALaterInput) {
  nn::SRUppOptions o = small_options();
  o.memory_length = 3;
  Generator gen(4);
  nn::SRUpp model(o, gen);
  set_alpha(model, 0.8);
  for (const bool training : {false, true}) {
    model.train(training);
    SCOPED_TRACE(training ? "training" : "evaluation");
    const int64_t L = 6, B = 2;
    nn::EncoderStatePtr warm;  // a memory from an earlier segment
    run(model, random_input(4, B, 6, 5), warm);
    warm = warm->detached();
    const Tensor x = random_input(L, B, 6, 6);
    for (int64_t t = 0; t + 1 < L; ++t) {
      Tensor changed = x.clone();
      for (int64_t i = (t + 1) * B * 6; i < changed.numel(); ++i) changed.data<double>()[i] += 0.37 * (i % 5 + 1);
      nn::EncoderStatePtr s1 = warm, s2 = warm;
      gen.set_state(9, 0);
      const Tensor a = run(model, x, s1);
      gen.set_state(9, 0);
      const Tensor b = run(model, changed, s2);
      EXPECT_TRUE(tensors_near(slice(a, 0, 0, t + 1), slice(b, 0, 0, t + 1), 0, 0)) << "time " << t;
      EXPECT_FALSE(tensors_near(slice(a, 0, t + 1, L), slice(b, 0, t + 1, L), 1e-9, 0));
    }
    // The gradient of the outputs up to t reaches no later input.
    const Tensor xg = x.clone().set_requires_grad(true);
    nn::EncoderStatePtr s = warm;
    gen.set_state(9, 0);
    autograd::backward(sum(slice(run(model, xg, s), 0, 0, 3)));
    const auto g = xg.grad().to_vector<double>();
    for (size_t i = 3 * B * 6; i < g.size(); ++i) EXPECT_EQ(g[i], 0.0) << i;
    EXPECT_NE(g[0], 0.0);
  }
}

TEST(SRUpp, MemoryOfThePreviousSegmentMakesSegmentsEqualTheWholeStream) {
  // Training mask (each query sees the whole memory and its segment up to itself): with a memory as long
  // as the previous segment, the second segment's output equals the whole stream's last rows. Training
  // (dropout 0 here) carries the raw inputs; evaluation carries the decoding cache of projected keys and
  // values: both must compute the same.
  nn::SRUppOptions o = small_options();
  o.layer_norm = true;
  o.memory_length = 5;
  Generator gen(7);
  nn::SRUpp model(o, gen);
  set_alpha(model, 0.9);
  const Tensor x = random_input(9, 2, 6, 8);
  // The evaluation window (same_length) changes nothing here: each query's window holds every key the
  // whole stream offers it.
  for (const bool training : {true, false})
    for (const bool same_length : {false, true}) {
      model.train(training);
      model.options.same_length = same_length;
      nn::EncoderStatePtr whole_state;
      const Tensor whole = run(model, x, whole_state);
      nn::EncoderStatePtr state;
      const Tensor first = run(model, slice(x, 0, 0, 5), state);
      if (training) {
        const auto& raw = dynamic_cast<const nn::SruppState&>(*state);
        ASSERT_EQ(raw.memories.size(), 3u) << "the memory of three attention layers";
        EXPECT_EQ(raw.memories[0].shape(), (Shape{5, 2, 6}));
        EXPECT_EQ(raw.memories[1].shape(), (Shape{5, 2, 8}));
      } else {
        const auto& cached = dynamic_cast<const nn::SruppCacheState&>(*state);
        ASSERT_EQ(cached.caches.size(), 3u) << "K and V of three attention layers";
        EXPECT_EQ(cached.caches[0].start, 0);
        EXPECT_EQ(cached.caches[0].length, 5) << "ring start and length";
        EXPECT_EQ(cached.caches[0].keys.shape(), (Shape{2 * 2, 6, 2})) << "(B*H, M + 1, d'/H)";
      }
      const Tensor second = run(model, slice(x, 0, 5, 9), state);
      if (training) {
        EXPECT_EQ(dynamic_cast<const nn::SruppState&>(*state).memories[0].shape(), (Shape{5, 2, 6}))
            << "the last memory_length inputs";
      } else {
        EXPECT_EQ(dynamic_cast<const nn::SruppCacheState&>(*state).caches[0].length, 5) << "the last memory_length rows";
      }
      EXPECT_TRUE(tensors_near(first, slice(whole, 0, 0, 5), 1e-12, 1e-12)) << "training " << training;
      EXPECT_TRUE(tensors_near(second, slice(whole, 0, 5, 9), 1e-12, 1e-12)) << "training " << training;
      EXPECT_TRUE(tensors_near(srupp_state_tensors(state)[0], srupp_state_tensors(whole_state)[0], 1e-12, 1e-12));
    }
  model.train(false);
  // Without memory the second segment does not see the first.
  o.memory_length = 0;
  Generator gen2(7);
  nn::SRUpp forgetful(o, gen2);
  set_alpha(forgetful, 0.9);
  forgetful.train(false);
  nn::EncoderStatePtr whole_state, state;
  const Tensor whole = run(forgetful, x, whole_state);
  run(forgetful, slice(x, 0, 0, 5), state);
  EXPECT_TRUE(dynamic_cast<const nn::SruppState&>(*state).memories.empty());
  EXPECT_FALSE(tensors_near(run(forgetful, slice(x, 0, 5, 9), state), slice(whole, 0, 5, 9), 1e-9, 0));
}

TEST(SRUpp, TheDecodingCacheComputesWhatTheRawMemoryDoesInBothMemoryConventions) {
  // The reference's convention (normalize_memory false: only the current segment is normalised by the
  // pre-norm) and ours, through the raw memory of training (dropout 0) and the cache of evaluation, on a
  // stream cut into segments, one of them a single token, and from a training state handed to evaluation.
  for (const bool normalize_memory : {true, false}) {
    nn::SRUppOptions o = small_options();
    o.layer_norm = true;
    o.memory_length = 12;  // longer than the stream: the evaluation window hides nothing
    o.normalize_memory = normalize_memory;
    Generator gen(21);
    nn::SRUpp model(o, gen);
    set_alpha(model, 0.8);
    const Tensor x = random_input(10, 2, 6, 22);
    const std::vector<std::pair<int64_t, int64_t>> cuts = {{0, 4}, {4, 5}, {5, 8}, {8, 10}};
    std::vector<Tensor> raw, cached;
    nn::EncoderStatePtr raw_state, cache_state, handed_state;
    for (const auto& [a, b] : cuts) {
      if (b == 10) handed_state = raw_state;  // the training state before the last segment
      model.train(true);
      raw.push_back(run(model, slice(x, 0, a, b), raw_state));
      model.train(false);
      cached.push_back(run(model, slice(x, 0, a, b), cache_state));
    }
    EXPECT_TRUE(tensors_near(concat(cached, 0), concat(raw, 0), 1e-12, 1e-12)) << "normalize_memory " << normalize_memory;
    // A training state (raw inputs) handed to evaluation is projected into the cache on the way in.
    ASSERT_EQ(dynamic_cast<const nn::SruppState&>(*handed_state).memories.size(), 3u);
    model.train(false);
    EXPECT_TRUE(tensors_near(run(model, slice(x, 0, 8, 10), handed_state), cached.back(), 1e-12, 1e-12));
    // The conventions differ once a normalised layer sees a memory.
    if (!normalize_memory) {
      nn::SRUppOptions ours = o;
      ours.normalize_memory = true;
      Generator gen2(21);
      nn::SRUpp twin(ours, gen2);
      set_alpha(twin, 0.8);
      twin.train(false);
      nn::EncoderStatePtr twin_state;
      run(twin, slice(x, 0, 0, 8), twin_state);
      EXPECT_FALSE(tensors_near(run(twin, slice(x, 0, 8, 10), twin_state), cached.back(), 1e-9, 0));
    }
  }
}

TEST(SRUpp, EvaluationWithSameLengthDoesNotDependOnTheChunking) {
  nn::SRUppOptions o = small_options();
  o.memory_length = 4;
  Generator gen(10);
  nn::SRUpp model(o, gen);
  set_alpha(model, 1.1);
  model.train(false);
  const Tensor x = random_input(13, 2, 6, 11);
  nn::EncoderStatePtr whole_state;
  const Tensor whole = run(model, x, whole_state);
  for (const std::vector<int64_t>& cuts : {std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                                           std::vector<int64_t>{5, 4, 3, 1}, std::vector<int64_t>{2, 11}}) {
    nn::EncoderStatePtr state;
    std::vector<Tensor> pieces;
    int64_t at = 0;
    for (int64_t n : cuts) {
      pieces.push_back(run(model, slice(x, 0, at, at + n), state));
      at += n;
    }
    EXPECT_TRUE(tensors_near(concat(pieces, 0), whole, 1e-12, 1e-12)) << "first cut " << cuts[0];
  }
}

TEST(SRUpp, PaddedKeysAreHiddenAndBidirectionalNeedsFullAttention) {
  nn::SRUppOptions o = small_options();
  o.bidirectional = true;
  o.causal = false;
  o.hidden_size = 3;  // out 6 = input: k = 3
  Generator gen(12);
  nn::SRUpp model(o, gen);
  set_alpha(model, 0.7);
  model.train(false);
  // Sequence 1 is 3 long in a batch padded to 5: its output equals running it alone.
  const Tensor x = random_input(5, 2, 6, 13);
  const Tensor pad = Tensor::from_vector(std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 1, 0, 1}, {5, 2});
  nn::EncoderStatePtr state;
  const Tensor both = run(model, x, state, pad);
  Tensor alone_x = Tensor::empty({3, 1, 6}, DType::F64);
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t j = 0; j < 6; ++j) alone_x.data<double>()[t * 6 + j] = x.data<double>()[(t * 2 + 1) * 6 + j];
  nn::EncoderStatePtr alone_state;
  const Tensor alone = run(model, alone_x, alone_state);
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t j = 0; j < 6; ++j)
      EXPECT_NEAR(both.data<double>()[(t * 2 + 1) * 6 + j], alone.data<double>()[t * 6 + j], 1e-12) << t << "," << j;
  EXPECT_EQ(both.data<double>()[(4 * 2 + 1) * 6], 0.0) << "padded steps output 0";

  o.causal = true;
  EXPECT_NE(error_of([&] { nn::SRUpp(o, gen); }).find("set model.causal: false"), std::string::npos);
}

TEST(SRUpp, BadOptionsAndStatesAreRefusedByName) {
  nn::SRUppOptions o = small_options();
  Generator gen(14);
  o.num_heads = 3;
  EXPECT_NE(error_of([&] { nn::SRUpp(o, gen); }).find("proj_size (4) must be divisible by num_heads (3)"),
            std::string::npos);
  o.num_heads = 1;
  o.attention_every_n_layers = 2;
  o.attention_last_n_layers = 1;
  EXPECT_NE(error_of([&] { nn::SRUpp(o, gen); }).find("not both"), std::string::npos);
  o.attention_every_n_layers = 1;
  o.attention_last_n_layers = -1;
  o.memory_length = 2;
  nn::SRUpp model(o, gen);
  nn::EncoderStatePtr state = model.state_from({Tensor::zeros({3, 2, 8}, DType::F64)});
  EXPECT_NE(error_of([&] { model.state_from({Tensor::zeros({3, 2, 8}, DType::F64), Tensor::zeros({2, 2, 6}, DType::F64)}); })
                .find("c and the memory of each attention layer (4 tensors), got 2"),
            std::string::npos);
  EXPECT_NE(error_of([&] { run(model, random_input(3, 2, 6, 1), state = std::make_shared<nn::LstmState>(Tensor(), Tensor())); })
                .find("another encoder's"),
            std::string::npos);
  nn::EncoderStatePtr none;
  const Tensor pad = Tensor::zeros({3, 2}, DType::I32);
  EXPECT_NE(error_of([&] { run(model, random_input(3, 2, 6, 1), none, pad); }).find("without padding"),
            std::string::npos);
  nn::EncoderStatePtr wrong_batch;
  run(model, random_input(3, 2, 6, 1), wrong_batch);
  EXPECT_NE(error_of([&] { run(model, random_input(3, 4, 6, 1), wrong_batch); }).find("c0 must be"), std::string::npos);
  o.proj_size = 0;
  EXPECT_EQ(nn::SRUpp(o, gen).options.proj_size, 2) << "hidden_size / 4";
}

TEST(SRUpp, ProjDropoutMovesTheDropoutBeforeUsProjectionApartFromTheDropoutOnH) {
  // One layer: the dropout on h applies to all layers but the last, so any training/evaluation
  // difference comes from the dropout before U's last projection (attention dropout is 0).
  const auto training_changes_output = [](double dropout, double proj_dropout) {
    nn::SRUppOptions o = small_options();
    o.num_layers = 1;
    o.dropout = dropout;
    o.proj_dropout = proj_dropout;
    Generator gen(18);
    nn::SRUpp model(o, gen);
    set_alpha(model, 0.5);
    const Tensor x = random_input(4, 2, 6, 19);
    nn::EncoderStatePtr s1, s2;
    model.train(true);
    const Tensor trained = run(model, x, s1);
    model.train(false);
    return !tensors_near(trained, run(model, x, s2), 1e-12, 1e-12);
  };
  EXPECT_TRUE(training_changes_output(0.5, -1)) << "-1: the reference's dropout before the projection";
  EXPECT_FALSE(training_changes_output(0.5, 0)) << "proj_dropout 0 removes it; dropout stays on h only";
  EXPECT_TRUE(training_changes_output(0, 0.5));
  // The last projection's initial scale sqrt(1 - p) follows the dropout before it, in layers with
  // attention (linear3) and without (linear2): with proj_dropout 0 every tensor equals the undropped model's.
  nn::SRUppOptions o = small_options();
  o.attention_last_n_layers = 1;
  o.dropout = 0.5;
  o.proj_dropout = 0;
  Generator g1(20), g2(20);
  nn::SRUpp split(o, g1);
  o.dropout = 0;
  nn::SRUpp none(o, g2);
  expect_same_state_except(split, none);
  o.proj_dropout = -0.5;
  EXPECT_NE(error_of([&] { nn::SRUpp(o, g1); }).find("proj_dropout must be -1 (= dropout) or in [0, 1)"),
            std::string::npos);
}

TEST(SRUpp, RezeroInitAlphaStartsTheAttentionAtThatWeight) {
  // Two stacks from the same seed differ only in alpha's start: every other tensor is equal, and the
  // one started at 0.5 is the one started at 0 with alpha set to 0.5 (the attention is in from step 0).
  nn::SRUppOptions o = small_options();
  Generator g1(21), g2(21);
  nn::SRUpp from_zero(o, g1);
  o.rezero_init_alpha = 0.5;
  nn::SRUpp from_half(o, g2);
  EXPECT_EQ(expect_same_state_except(from_zero, from_half, "transform_module.alpha").size(),
            static_cast<size_t>(o.num_layers)) << "attention in every layer";
  for (size_t i = 0; i < from_zero.layers.size(); ++i) {
    EXPECT_EQ(dynamic_cast<const nn::SRUppAttention&>(*from_zero.layers[i]->transform_module).alpha.item<double>(), 0.0);
    EXPECT_EQ(dynamic_cast<const nn::SRUppAttention&>(*from_half.layers[i]->transform_module).alpha.item<double>(), 0.5);
  }
  from_zero.train(false);
  from_half.train(false);
  const Tensor x = random_input(5, 2, 6, 22);
  nn::EncoderStatePtr s1, s2, s3;
  const Tensor started_at_half = run(from_half, x, s1);
  EXPECT_FALSE(tensors_near(run(from_zero, x, s2), started_at_half, 1e-6, 1e-6));
  set_alpha(from_zero, 0.5);
  EXPECT_TRUE(tensors_near(run(from_zero, x, s3), started_at_half, 0, 0));
}

TEST(SRUpp, CheckpointRoundTripRestoresTheOutputs) {
  nn::SRUppOptions o = small_options();
  o.dtype = DType::F32;
  o.memory_length = 2;
  Generator gen(15);
  nn::SRUpp model(o, gen);
  set_alpha(model, 0.3);
  model.train(false);
  const std::string path = sru::testing::tmp_dir() + "srupp_roundtrip.safetensors";
  nn::save_state(model, path);
  Generator other(99);
  nn::SRUpp loaded(o, other);
  loaded.train(false);
  nn::load_state(loaded, path);
  Generator xg(16);
  const Tensor x = Tensor::uniform({4, 2, 6}, -1, 1, DType::F32, xg);
  nn::EncoderStatePtr s1, s2;
  EXPECT_TRUE(tensors_near(run(loaded, x, s1), run(model, x, s2), 0, 0));
  std::filesystem::remove(path);
}

TEST(CausalSoftmax, WithAKeyMaskEqualsMaskedSoftmaxWithBothPatterns) {
  // (B, H, Lq, Lk) scores, a (B, 1, 1, Lk) key-padding mask, offsets and windows: the same as
  // masked_softmax with the union of the causal pattern and the padding as one tensor, values and
  // gradients (a row with no visible key is all 0).
  const int64_t B = 2, H = 2, Lq = 3, Lk = 5;
  const Tensor pad = Tensor::from_vector(std::vector<int32_t>{0, 0, 0, 1, 1, 1, 0, 0, 0, 0}, {B, 1, 1, Lk});
  for (const auto& [offset, window] : {std::pair<int64_t, int64_t>{2, -1}, {2, 1}, {0, -1}, {4, 0}}) {
    std::vector<int32_t> both(B * Lq * Lk);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < Lq; ++i)
        for (int64_t j = 0; j < Lk; ++j) {
          const bool causal_hides = j > i + offset || (window >= 0 && j < i + offset - window);
          both[(b * Lq + i) * Lk + j] = causal_hides || pad.to_vector<int32_t>()[b * Lk + j];
        }
    const Tensor mask = Tensor::from_vector(both, {B, 1, Lq, Lk});
    const Tensor x = random_input(B * H, Lq, Lk, 40 + offset).view({B, H, Lq, Lk}).set_requires_grad(true);
    const Tensor x2 = x.detach().clone().set_requires_grad(true);
    const Tensor y = causal_softmax(x, 0.6, offset, window, pad), y2 = masked_softmax(x2 * 0.6, mask);
    EXPECT_TRUE(tensors_near(y, y2, 1e-15, 1e-14)) << offset << " " << window;
    const Tensor g = random_input(B * H, Lq, Lk, 50).view({B, H, Lq, Lk});
    autograd::backward(y, g);
    autograd::backward(y2, g);
    EXPECT_TRUE(tensors_near(x.grad(), x2.grad(), 1e-14, 1e-13));
  }
  EXPECT_NE(error_of([&] { causal_softmax(Tensor::zeros({2, 3, 4}), 1.0, 0, -1, Tensor::zeros({3, 1, 4})); })
                .find("does not broadcast"),
            std::string::npos);
}

TEST(CausalSoftmax, EqualsMaskedSoftmaxWithTheCausalMaskTensor) {
  Generator gen(17);
  for (const auto& [Lq, Lk, offset, window] :
       {std::tuple{4, 4, 0, -1}, std::tuple{3, 7, 4, -1}, std::tuple{5, 8, 3, 3}, std::tuple{3, 5, 2, 0},
        std::tuple{3, 2, 0, -1}, std::tuple{4, 3, 5, 1}}) {
    SCOPED_TRACE(::testing::Message() << Lq << " " << Lk << " " << offset << " " << window);
    const Tensor x = Tensor::uniform({2, Lq, Lk}, -3, 3, DType::F64, gen);
    Tensor mask = nn::causal_mask(Lq, Lk, offset, DType::I32);
    if (window >= 0)
      for (int64_t i = 0; i < Lq; ++i)
        for (int64_t j = 0; j < Lk; ++j) mask.data<int32_t>()[i * Lk + j] |= j < i + offset - window;
    EXPECT_TRUE(tensors_near(causal_softmax(x, 0.6, offset, window), masked_softmax(x * 0.6, mask), 1e-15, 1e-14));
  }
  EXPECT_NE(error_of([&] { causal_softmax(Tensor::zeros({3}), 1.0, 0); }).find("(..., Lq, Lk)"), std::string::npos);
  EXPECT_NE(error_of([&] { causal_softmax(Tensor::zeros({2, 3}), 1.0, -1); }).find("offset must be >= 0"),
            std::string::npos);
}
