// Backward of the nn attention pieces against central finite differences in float64: attention
// with padding and causal masks and dropout, multi-head attention with a causal mask over memory and
// with a per-batch padding mask, and DrQA's layers (inputs and parameters).
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "nn/attention.h"
#include "nn/transformer.h"
#include "ops/ops.h"
#include "testing.h"

using namespace sru;
using namespace sru::nn;
using sru::testing::expect_gradients_match;
using sru::testing::leaf;
using Inputs = std::vector<Tensor>;

TEST(GradcheckAttention, ScaledDotProductWithMasks) {
  const Tensor pad = padding_mask({4, 2}, 4).view({2, 1, 4});
  expect_gradients_match([=](const Inputs& x) { return scaled_dot_product_attention(x[0], x[1], x[2], pad); },
                         {leaf({2, 3, 5}, 1), leaf({2, 4, 5}, 2), leaf({2, 4, 3}, 3)});
  const Tensor causal = causal_mask(3, 5, 2);
  expect_gradients_match(
      [=](const Inputs& x) {
        return scaled_dot_product_attention(x[0], x[1], x[2], causal, 0.0, false, default_generator(), 0.7);
      },
      {leaf({2, 3, 4}, 4), leaf({2, 5, 4}, 5), leaf({2, 5, 2}, 6)});
  // Dropout on the weights, the same mask at every evaluation (fresh generator of one seed).
  expect_gradients_match(
      [=](const Inputs& x) {
        Generator gen(8);
        return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.3, true, gen);
      },
      {leaf({2, 3, 4}, 7), leaf({2, 4, 4}, 8), leaf({2, 4, 3}, 9)});
}

TEST(GradcheckAttention, MultiHeadCausalWithMemoryAndPerBatchPadding) {
  const int64_t L = 3, M = 2, B = 2, H = 2, dh = 2;
  // Time-major (L, B, H*dh) queries, keys and values over [memory | current] as SRU++ uses them.
  const Tensor causal = causal_mask(L, M + L, M);
  expect_gradients_match(
      [=](const Inputs& x) {
        const Tensor kv = concat({x[1], x[0]}, 0);  // memory then the current segment
        return merge_heads(scaled_dot_product_attention(split_heads(x[0], H), split_heads(kv, H), split_heads(kv, H),
                                                        causal),
                           H);
      },
      {leaf({L, B, H * dh}, 10), leaf({M, B, H * dh}, 11)});
  // Heads viewed as (B, H, L, dh) to take a per-batch (B, 1, 1, Lk) padding mask.
  const Tensor pad = padding_mask({3, 1}, L).view({B, 1, 1, L});
  expect_gradients_match(
      [=](const Inputs& x) {
        auto heads = [&](const Tensor& t) { return reshape(split_heads(t, H), {B, H, L, dh}); };
        return merge_heads(scaled_dot_product_attention(heads(x[0]), heads(x[1]), heads(x[2]), pad), H);
      },
      {leaf({L, B, H * dh}, 12), leaf({L, B, H * dh}, 13), leaf({L, B, H * dh}, 14)});
}

TEST(GradcheckAttention, DrQALayersInputsAndParameters) {
  const int64_t B = 2, L = 4, Lq = 3, d = 3;
  Generator gen(30);
  const SeqAttnMatch match(d, DType::F64, gen);
  const Tensor q_mask = padding_mask({3, 1}, Lq);
  // Inputs kept positive-ish and away from relu's kink by the random draw; a kink crossing would show
  // as one large mismatch.
  expect_gradients_match([&](const Inputs& x) { return match.forward(x[0], x[1], q_mask); },
                         {leaf({B, L, d}, 31), leaf({B, Lq, d}, 32), match.linear->weight, match.linear->bias});
  const LinearSeqAttn pool(d, DType::F64, gen);
  const Tensor p_mask = padding_mask({4, 2}, L);
  expect_gradients_match([&](const Inputs& x) { return weighted_average(x[0], pool.forward(x[0], p_mask)); },
                         {leaf({B, L, d}, 33), pool.linear->weight, pool.linear->bias});
  const BilinearSeqAttn bilinear(d, 2, DType::F64, gen);
  const Tensor target = Tensor::from_vector(std::vector<int64_t>{3, 1}, {2});
  expect_gradients_match([&](const Inputs& x) { return cross_entropy(bilinear.log_probs(x[0], x[1], p_mask), target); },
                         {leaf({B, L, d}, 34), leaf({B, 2}, 35), bilinear.linear->weight, bilinear.linear->bias});
  expect_gradients_match([&](const Inputs& x) { return exp(bilinear.forward(x[0], x[1], p_mask)); },
                         {leaf({B, L, d}, 36), leaf({B, 2}, 37), bilinear.linear->weight, bilinear.linear->bias});
}

TEST(GradcheckAttention, TransformerLayerPreAndPostNormCausalAndPadded) {
  for (const bool pre_norm : {true, false})
    for (const bool causal : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "pre_norm " << pre_norm << " causal " << causal);
      TransformerLayerOptions o;
      o.width = 4;
      o.heads = 2;
      o.ff_size = 6;
      o.pre_norm = pre_norm;
      o.causal = causal;
      o.dtype = DType::F64;
      Generator gen(40);
      const TransformerLayer layer(o, gen);
      const Tensor pad = causal ? Tensor() : padding_mask({3, 2}, 3);
      Inputs inputs = {leaf({3, 2, 4}, 41)};
      for (const auto& [name, p] : layer.named_parameters()) inputs.push_back(p);
      expect_gradients_match([&](const Inputs& x) { return layer.forward(x[0], pad); }, inputs);
    }
}

namespace {

// A decoder layer (context attention over a padded memory) of width 4, pre- and post-norm: gradients
// of the input, the memory and every parameter against finite differences; target_padding (B, L) or
// undefined.
void check_decoder_layer(TransformerLayerOptions o, uint64_t seed, const Tensor& target_padding) {
  for (const bool pre_norm : {true, false}) {
    SCOPED_TRACE(::testing::Message() << "pre_norm " << pre_norm);
    o.width = 4;
    o.heads = 2;
    o.ff_size = 5;
    o.pre_norm = pre_norm;
    o.cross_attention = true;
    o.dtype = DType::F64;
    Generator gen(seed);
    const TransformerLayer layer(o, gen);
    const Tensor memory_padding = padding_mask({3, 2}, 3);
    const int64_t L = target_padding.defined() ? target_padding.size(1) : 3;
    Inputs inputs = {leaf({L, 2, 4}, seed + 1), leaf({3, 2, 4}, seed + 2)};
    for (const auto& [name, p] : layer.named_parameters())
      if (p.requires_grad()) inputs.push_back(p);
    expect_gradients_match(
        [&](const Inputs& x) { return layer.forward(x[0], target_padding, x[1], memory_padding); }, inputs);
  }
}

}  // namespace

TEST(GradcheckAttention, DecoderLayerWithContextAttentionAndTheSruFeedForward) {
  TransformerLayerOptions o;
  o.ffn = FeedForwardKind::Sru;
  check_decoder_layer(o, 50, Tensor());
}

TEST(GradcheckAttention, SsruDecoderLayerWithTargetPadding) {
  TransformerLayerOptions o;
  o.self_sublayer = SelfSublayerKind::Ssru;
  check_decoder_layer(o, 60, padding_mask({4, 2}, 4));
}
