// The shared multi-head attention module and the Transformer layer (nn/attention.h, nn/transformer.h):
// OpenNMT-py's parameter names and the parameter count, causality, key padding, decoding through the
// key/value cache (bounded ring and unbounded growth) against whole passes, and reordering a cache.
#include <gtest/gtest.h>

#include "autograd/node.h"
#include "nn/attention.h"
#include "nn/transformer.h"
#include "ops/ops.h"
#include "testing.h"

using namespace sru;
using namespace sru::nn;
using sru::testing::joined_over_pieces;
using sru::testing::tensors_near;

namespace {

Tensor random(const Shape& s, uint64_t seed) {
  Generator gen(seed);
  return Tensor::uniform(s, -1, 1, DType::F64, gen);
}

TransformerLayerOptions layer_options(bool pre_norm, bool causal = true) {
  TransformerLayerOptions o;
  o.width = 8;
  o.heads = 2;
  o.pre_norm = pre_norm;
  o.causal = causal;
  o.dtype = DType::F64;
  return o;
}

// Runs the layer over x one chunk at a time through one decoding state; returns the outputs joined.
Tensor decode(const TransformerLayer& layer, const Tensor& x, const std::vector<int64_t>& pieces) {
  TransformerLayerState state;
  return joined_over_pieces(pieces, [&](int64_t from, int64_t to) {
    return layer.forward_incremental(slice(x, 0, from, to), state);
  });
}

}  // namespace

TEST(TransformerLayer, OpenNMTNamesAndTwelveWSquaredParameters) {
  Generator gen(1);
  TransformerLayerOptions o = layer_options(true);
  const TransformerLayer layer(o, gen);
  std::vector<std::string> names;
  for (const auto& [name, t] : layer.state()) names.push_back(name + " " + shape_str(t.shape()));
  EXPECT_EQ(names, (std::vector<std::string>{
                       "self_attn.linear_query.weight (8, 8)", "self_attn.linear_query.bias (8,)",
                       "self_attn.linear_keys.weight (8, 8)", "self_attn.linear_keys.bias (8,)",
                       "self_attn.linear_values.weight (8, 8)", "self_attn.linear_values.bias (8,)",
                       "self_attn.final_linear.weight (8, 8)", "self_attn.final_linear.bias (8,)",
                       "feed_forward.w_1.weight (32, 8)", "feed_forward.w_1.bias (32,)",
                       "feed_forward.w_2.weight (8, 32)", "feed_forward.w_2.bias (8,)",
                       "feed_forward.layer_norm.weight (8,)", "feed_forward.layer_norm.bias (8,)",
                       "layer_norm.weight (8,)", "layer_norm.bias (8,)"}));
  EXPECT_EQ(layer.num_parameters(), 12 * 8 * 8 + 13 * 8);
}

TEST(TransformerLayer, CausalOutputsIgnoreLaterInputs) {
  Generator gen(2);
  TransformerLayer layer(layer_options(true), gen);
  layer.eval();
  const Tensor x = random({6, 2, 8}, 3);
  Tensor later = x.clone();
  later.narrow0(4, 2).copy_(random({2, 2, 8}, 4));
  EXPECT_TRUE(tensors_near(slice(layer.forward(later), 0, 0, 4), slice(layer.forward(x), 0, 0, 4), 1e-14, 1e-14));
  EXPECT_FALSE(tensors_near(slice(layer.forward(later), 0, 4, 6), slice(layer.forward(x), 0, 4, 6), 1e-6, 0));
}

TEST(TransformerLayer, DecodingThroughTheCacheEqualsTheWholePass) {
  for (const bool pre_norm : {true, false}) {
    Generator gen(5);
    TransformerLayer layer(layer_options(pre_norm), gen);
    layer.eval();
    autograd::NoGradGuard no_grad;
    // 40 positions: the unbounded cache grows past its first 16 slots twice.
    const Tensor x = random({40, 3, 8}, 6);
    const Tensor whole = layer.forward(x);
    EXPECT_TRUE(tensors_near(decode(layer, x, std::vector<int64_t>(40, 1)), whole, 1e-10, 1e-10)) << pre_norm;
    EXPECT_TRUE(tensors_near(decode(layer, x, {3, 1, 20, 1, 15}), whole, 1e-10, 1e-10)) << pre_norm;
  }
}

TEST(TransformerLayer, PaddedKeysDoNotChangeTheOtherRows) {
  Generator gen(7);
  TransformerLayer layer(layer_options(true, /*causal=*/false), gen);
  layer.eval();
  const Tensor x = random({5, 2, 8}, 8);
  // Row 1 has 3 real positions: its output there equals running it alone on those 3.
  const Tensor pad = Tensor::from_vector(std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 5});
  const Tensor out = layer.forward(x, pad);
  const Tensor alone = layer.forward(slice(slice(x, 1, 1, 2), 0, 0, 3));
  EXPECT_TRUE(tensors_near(slice(slice(out, 1, 1, 2), 0, 0, 3), alone, 1e-12, 1e-12));
  // Without the mask the padded keys leak in.
  EXPECT_FALSE(tensors_near(slice(slice(layer.forward(x), 1, 1, 2), 0, 0, 3), alone, 1e-6, 0));
}

TEST(MultiHeadAttention, BoundedCacheKeepsTheLastRowsAndReordersByBatchRow) {
  MultiHeadAttentionOptions o;
  o.query_size = o.model_size = 6;
  o.heads = 3;
  o.dtype = DType::F64;
  Generator gen(9);
  const MultiHeadAttention attention(o, gen);
  autograd::NoGradGuard no_grad;
  const Tensor x = random({12, 3, 6}, 10);
  const int64_t window = 4;
  // A bounded cache of 4 rows, one token at a time (the ring wraps twice), equals attention where each
  // query sees itself and its 4 predecessors.
  KeyValueCache cache;
  cache.max_length = window;
  std::vector<Tensor> steps;
  for (int64_t t = 0; t < 12; ++t) {
    const Tensor xt = slice(x, 0, t, t + 1);
    steps.push_back(attention.attend_incremental(attention.project_queries(xt), xt, cache, window));
  }
  EXPECT_EQ(cache.length, window);
  EXPECT_EQ(cache.capacity(), window + 1);
  const Tensor q = attention.project_queries(x);
  const auto [k, v] = attention.project_keys_values(x);
  const Tensor whole = attention.attend(q, k, v, AttentionMask::causal(0, window));
  EXPECT_TRUE(tensors_near(concat(steps, 0), whole, 1e-12, 1e-12));
  // Reordering the cache's batch rows, then a step, equals the step on the reordered batch.
  const std::vector<int64_t> rows = {2, 2, 0};
  KeyValueCache fresh;
  fresh.max_length = window;
  const Tensor index = Tensor::from_vector(rows, {3});
  const Tensor prefix = index_select(slice(x, 0, 0, 11), 1, index);
  for (int64_t t = 0; t < 11; ++t) {
    const Tensor xt = slice(prefix, 0, t, t + 1);
    attention.attend_incremental(attention.project_queries(xt), xt, fresh, window);
  }
  KeyValueCache replay;
  replay.max_length = window;
  for (int64_t t = 0; t < 11; ++t) {
    const Tensor xt = slice(x, 0, t, t + 1);
    attention.attend_incremental(attention.project_queries(xt), xt, replay, window);
  }
  replay.reorder(index, o.heads);
  const Tensor next = random({1, 3, 6}, 11);
  EXPECT_TRUE(tensors_near(attention.attend_incremental(attention.project_queries(next), next, replay, window),
                           attention.attend_incremental(attention.project_queries(next), next, fresh, window), 1e-12,
                           1e-12));
}

namespace {

TransformerLayerOptions decoder_options(bool pre_norm, FeedForwardKind ffn) {
  TransformerLayerOptions o = layer_options(pre_norm);
  o.cross_attention = true;
  o.ffn = ffn;
  o.ff_size = 12;
  return o;
}

// Decodes x through a fresh state in the given pieces, the memory projected once.
Tensor decode_with_memory(const TransformerLayer& layer, const Tensor& x, const Tensor& memory, const Tensor& padding,
                          const std::vector<int64_t>& pieces, TransformerLayerState& state) {
  layer.start_decoding(state, memory, padding);
  return joined_over_pieces(pieces, [&](int64_t from, int64_t to) {
    return layer.forward_incremental(slice(x, 0, from, to), state);
  });
}

}  // namespace

TEST(TransformerLayer, DecoderLayersNameTheirPartsAsOpenNMTAndTheSruBlock) {
  Generator gen(20);
  const TransformerLayer layer(decoder_options(true, FeedForwardKind::Sru), gen);
  std::vector<std::string> names;
  for (const auto& [name, t] : layer.state()) names.push_back(name + " " + shape_str(t.shape()));
  EXPECT_EQ(names, (std::vector<std::string>{
                       "self_attn.linear_query.weight (8, 8)", "self_attn.linear_query.bias (8,)",
                       "self_attn.linear_keys.weight (8, 8)", "self_attn.linear_keys.bias (8,)",
                       "self_attn.linear_values.weight (8, 8)", "self_attn.linear_values.bias (8,)",
                       "self_attn.final_linear.weight (8, 8)", "self_attn.final_linear.bias (8,)",
                       "context_attn.linear_query.weight (8, 8)", "context_attn.linear_query.bias (8,)",
                       "context_attn.linear_keys.weight (8, 8)", "context_attn.linear_keys.bias (8,)",
                       "context_attn.linear_values.weight (8, 8)", "context_attn.linear_values.bias (8,)",
                       "context_attn.final_linear.weight (8, 8)", "context_attn.final_linear.bias (8,)",
                       "feed_forward.sru.rnn_lst.0.weight (8, 36)", "feed_forward.sru.rnn_lst.0.weight_c (24,)",
                       "feed_forward.sru.rnn_lst.0.bias (24,)", "feed_forward.sru.rnn_lst.0.scale_x (1,)",
                       "feed_forward.w_2.weight (8, 12)", "feed_forward.w_2.bias (8,)",
                       "feed_forward.layer_norm.weight (8,)", "feed_forward.layer_norm.bias (8,)",
                       "layer_norm_1.weight (8,)", "layer_norm_1.bias (8,)", "layer_norm_2.weight (8,)",
                       "layer_norm_2.bias (8,)"}));
}

TEST(TransformerLayer, DecoderDecodingEqualsTheWholePassWithEitherFeedForward) {
  for (const FeedForwardKind ffn : {FeedForwardKind::Relu, FeedForwardKind::Sru})
    for (const bool pre_norm : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "sru " << (ffn == FeedForwardKind::Sru) << " pre_norm " << pre_norm);
      Generator gen(21);
      TransformerLayer layer(decoder_options(pre_norm, ffn), gen);
      layer.eval();
      autograd::NoGradGuard no_grad;
      const Tensor x = random({9, 3, 8}, 22), memory = random({6, 3, 8}, 23);
      const Tensor padding = Tensor::from_vector(std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1,
                                                                      0, 0, 0, 1, 1, 1},
                                                 {3, 6});
      const Tensor whole = layer.forward(x, Tensor(), memory, padding);
      TransformerLayerState tokens, chunks;
      EXPECT_TRUE(tensors_near(decode_with_memory(layer, x, memory, padding, std::vector<int64_t>(9, 1), tokens), whole,
                               1e-10, 1e-10));
      EXPECT_TRUE(tensors_near(decode_with_memory(layer, x, memory, padding, {4, 1, 4}, chunks), whole, 1e-10, 1e-10));
      // A padded memory position changes nothing it hides.
      Tensor other = memory.clone();
      other.narrow0(5, 1).copy_(random({1, 3, 8}, 24));
      EXPECT_TRUE(tensors_near(slice(layer.forward(x, Tensor(), other, padding), 1, 1, 3),
                               slice(whole, 1, 1, 3), 1e-12, 1e-12));
    }
}

TEST(TransformerLayer, ReorderedDecoderStateThenAStepEqualsRecomputing) {
  for (const FeedForwardKind ffn : {FeedForwardKind::Relu, FeedForwardKind::Sru}) {
    Generator gen(25);
    TransformerLayer layer(decoder_options(true, ffn), gen);
    layer.eval();
    autograd::NoGradGuard no_grad;
    const Tensor x = random({5, 3, 8}, 26), memory = random({4, 3, 8}, 27), next = random({1, 4, 8}, 28);
    const Tensor rows = Tensor::from_vector(std::vector<int64_t>{2, 0, 0, 1}, {4});
    TransformerLayerState state, fresh;
    decode_with_memory(layer, x, memory, Tensor(), {3, 1, 1}, state);
    state.reorder(rows, 2);
    decode_with_memory(layer, index_select(x, 1, rows), index_select(memory, 1, rows), Tensor(), {5}, fresh);
    EXPECT_TRUE(tensors_near(layer.forward_incremental(next, state), layer.forward_incremental(next, fresh), 1e-12,
                             1e-12))
        << "sru " << (ffn == FeedForwardKind::Sru);
  }
}

TEST(SinusoidalPositions, SinAtEvenAndCosAtOddColumnsForEveryBatchRow) {
  const auto p = sinusoidal_positions(2, 2, 3, 4, DType::F64, Device::cpu()).to_vector<double>();
  ASSERT_EQ(p.size(), 2u * 3 * 4);
  // Position 2: sin(2), cos(2), sin(2 / 100), cos(2 / 100); every batch row the same.
  const std::vector<double> row2 = {std::sin(2.0), std::cos(2.0), std::sin(0.02), std::cos(0.02)};
  for (int b = 0; b < 3; ++b)
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(p[b * 4 + i], row2[i], 1e-15);
  EXPECT_NEAR(p[3 * 4], std::sin(3.0), 1e-15);
  // One batch row, and no positions or no batch rows: the shapes asked for.
  EXPECT_EQ(sinusoidal_positions(2, 2, 1, 4, DType::F64, Device::cpu()).to_vector<double>(),
            (std::vector<double>{p[0], p[1], p[2], p[3], p[12], p[13], p[14], p[15]}));
  EXPECT_EQ(sinusoidal_positions(0, 0, 3, 4, DType::F32, Device::cpu()).shape(), (Shape{0, 3, 4}));
  EXPECT_EQ(sinusoidal_positions(0, 2, 0, 4, DType::F32, Device::cpu()).shape(), (Shape{2, 0, 4}));
  // Any position: 100000 is as good as 0.
  EXPECT_NEAR(sinusoidal_positions(100000, 1, 1, 4, DType::F64, Device::cpu()).to_vector<double>()[0],
              std::sin(100000.0), 1e-9);
}
