// nn attention (nn/attention.h): scaled dot-product attention against a hand computation and a
// scalar reference, dropout on the weights, causality (later keys never change earlier outputs, with
// and without memory), padding (padded keys never change the output), head split/merge, the mask
// builders, DrQA's layers against scalar loops with their PyTorch parameter names, and shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "autograd/engine.h"
#include "nn/attention.h"
#include "ops/ops.h"
#include "testing.h"

using namespace sru;
using namespace sru::nn;
using sru::testing::error_of;
using sru::testing::f64;
using sru::testing::tensors_near;
using sru::testing::values_near;

namespace {

Tensor random(const Shape& s, uint64_t seed) {
  Generator gen(seed);
  return Tensor::uniform(s, -1, 1, DType::F64, gen);
}

using Hidden = std::function<bool(int64_t batch, int64_t i, int64_t j)>;

// Attention one scalar at a time: q (Bt, Lq, d), k (Bt, Lk, d), v (Bt, Lk, dv) -> (Bt, Lq, dv).
std::vector<double> attend_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Hidden& hidden,
                                     double scale) {
  const int64_t Bt = q.size(0), Lq = q.size(1), d = q.size(2), Lk = k.size(1), dv = v.size(2);
  const auto qv = q.to_vector<double>(), kv = k.to_vector<double>(), vv = v.to_vector<double>();
  std::vector<double> out(Bt * Lq * dv, 0.0);
  for (int64_t b = 0; b < Bt; ++b)
    for (int64_t i = 0; i < Lq; ++i) {
      std::vector<double> w(Lk, 0.0);
      double total = 0.0;
      for (int64_t j = 0; j < Lk; ++j) {
        if (hidden(b, i, j)) continue;
        double s = 0.0;
        for (int64_t e = 0; e < d; ++e) s += qv[(b * Lq + i) * d + e] * kv[(b * Lk + j) * d + e];
        w[j] = std::exp(s * scale);
        total += w[j];
      }
      for (int64_t j = 0; j < Lk; ++j)
        for (int64_t e = 0; e < dv; ++e) out[(b * Lq + i) * dv + e] += w[j] / total * vv[(b * Lk + j) * dv + e];
    }
  return out;
}

// A copy of t (B, L, d) with position `pos` of every batch row set to new random values.
Tensor with_changed_position(const Tensor& t, int64_t pos, uint64_t seed, int64_t batch = -1) {
  std::vector<double> v = t.to_vector<double>();
  const int64_t L = t.size(1), d = t.size(2);
  Generator gen(seed);
  const auto fresh = Tensor::uniform({d}, -5, 5, DType::F64, gen).to_vector<double>();
  for (int64_t b = 0; b < t.size(0); ++b)
    if (batch < 0 || b == batch)
      for (int64_t e = 0; e < d; ++e) v[(b * L + pos) * d + e] = fresh[e];
  return f64(v, t.shape());
}

// Rows [0, rows) of dim 1 of t (B, L, d), flattened.
std::vector<double> first_rows(const Tensor& t, int64_t rows) {
  return slice(t, 1, 0, rows).to_vector<double>();
}

}  // namespace

TEST(Attention, ScaledDotProductByHand) {
  const Tensor q = f64({1, 0}, {1, 1, 2}), k = f64({1, 0, 0, 1}, {1, 2, 2}), v = f64({1, 2, 3, 4}, {1, 2, 2});
  const double a = std::exp(1 / std::sqrt(2.0)), p = a / (a + 1);
  const AttentionResult r = scaled_dot_product_attention_with_weights(q, k, v, Tensor());
  EXPECT_TRUE(values_near(r.output, {1, 1, 2}, {p * 1 + (1 - p) * 3, p * 2 + (1 - p) * 4}, 1e-14, 1e-14));
  EXPECT_TRUE(values_near(r.weights, {1, 1, 2}, {p, 1 - p}, 1e-14, 1e-14));
  // Key 0 hidden: all weight on key 1.
  const Tensor hide0 = f64({1, 0}, {2});
  EXPECT_TRUE(values_near(scaled_dot_product_attention(q, k, v, hide0), {1, 1, 2}, {3, 4}, 0, 0));
  // An explicit scale of 2: scores (2, 0).
  const double b = std::exp(2.0), pb = b / (b + 1);
  EXPECT_TRUE(values_near(scaled_dot_product_attention(q, k, v, Tensor(), 0.0, false, default_generator(), 2.0),
                          {1, 1, 2}, {pb + (1 - pb) * 3, 2 * pb + (1 - pb) * 4}, 1e-14, 1e-14));
}

TEST(Attention, MatchesScalarReferenceWithLeadingDimsAndMasks) {
  // (B, H) = (2, 3) leading dims, a per-batch key-padding mask (B, 1, 1, Lk).
  const Tensor q = random({2, 3, 4, 5}, 1), k = random({2, 3, 6, 5}, 2), v = random({2, 3, 6, 7}, 3);
  const std::vector<int64_t> lengths = {6, 2};
  const Tensor mask = padding_mask(lengths, 6).view({2, 1, 1, 6});
  const Tensor out = scaled_dot_product_attention(q, k, v, mask);
  const auto expected = attend_reference(q.view({6, 4, 5}), k.view({6, 6, 5}), v.view({6, 6, 7}),
                                         [&](int64_t bh, int64_t, int64_t j) { return j >= lengths[bh / 3]; },
                                         1 / std::sqrt(5.0));
  EXPECT_TRUE(values_near(out, {2, 3, 4, 7}, expected, 1e-13, 1e-13));
  // (B*H, Lq, Lk) scores with a causal mask with memory 2, scale 0.5.
  const Tensor q3 = q.view({6, 4, 5}), k3 = k.view({6, 6, 5}), v3 = v.view({6, 6, 7});
  const Tensor causal = causal_mask(4, 6, 2);
  const auto expected_causal =
      attend_reference(q3, k3, v3, [](int64_t, int64_t i, int64_t j) { return j > i + 2; }, 0.5);
  EXPECT_TRUE(values_near(scaled_dot_product_attention(q3, k3, v3, causal, 0.0, false, default_generator(), 0.5),
                          {6, 4, 7}, expected_causal, 1e-13, 1e-13));
}

TEST(Attention, DropoutAppliesToTheWeightsInTrainingOnly) {
  const Tensor q = random({2, 3, 4}, 4), k = random({2, 5, 4}, 5), v = random({2, 5, 3}, 6);
  Generator g1(9), g2(9);
  const AttentionResult r = scaled_dot_product_attention_with_weights(q, k, v, Tensor(), 0.4, true, g1);
  const Tensor expected = bmm(dropout(r.weights, 0.4, true, g2), v);
  EXPECT_TRUE(tensors_near(r.output, expected, 1e-15, 1e-15));
  EXPECT_FALSE(tensors_near(r.output, bmm(r.weights, v), 1e-6, 1e-6)) << "dropout changed nothing";
  EXPECT_TRUE(tensors_near(scaled_dot_product_attention(q, k, v, Tensor(), 0.4, false, g1), bmm(r.weights, v), 0, 0));
}

TEST(Attention, LaterKeysNeverChangeEarlierOutputs) {
  const int64_t B = 2, L = 5, d = 4;
  for (int64_t memory : {0, 3}) {
    SCOPED_TRACE(memory);
    const int64_t Lk = memory + L;
    const Tensor q = random({B, L, d}, 11), k = random({B, Lk, d}, 12), v = random({B, Lk, d}, 13);
    const Tensor mask = causal_mask(L, Lk, memory);
    const Tensor base = scaled_dot_product_attention(q, k, v, mask);
    for (int64_t t = 0; t < L; ++t) {
      // The key/value of position t (after the memory) and the query of position t all change.
      const Tensor k2 = with_changed_position(k, memory + t, 20 + t), v2 = with_changed_position(v, memory + t, 30 + t);
      const Tensor q2 = with_changed_position(q, t, 40 + t);
      const Tensor out = scaled_dot_product_attention(q2, k2, v2, mask);
      EXPECT_EQ(first_rows(out, t), first_rows(base, t)) << "position " << t << " leaked into earlier outputs";
      EXPECT_NE(first_rows(out, t + 1), first_rows(base, t + 1)) << "position " << t << " had no effect at all";
    }
  }
}

TEST(Attention, PaddedKeysNeverChangeTheOutput) {
  const Tensor q = random({2, 3, 4}, 14), k = random({2, 5, 4}, 15), v = random({2, 5, 6}, 16);
  const Tensor mask = padding_mask({3, 5}, 5).view({2, 1, 5});
  const Tensor base = scaled_dot_product_attention(q, k, v, mask);
  Tensor k2 = k, v2 = v;
  for (int64_t pos : {3, 4}) {
    k2 = with_changed_position(k2, pos, 50 + pos, 0);
    v2 = with_changed_position(v2, pos, 60 + pos, 0);
  }
  EXPECT_EQ(scaled_dot_product_attention(q, k2, v2, mask).to_vector<double>(), base.to_vector<double>());
  const Tensor v3 = with_changed_position(v, 2, 70, 0);
  EXPECT_NE(scaled_dot_product_attention(q, k, v3, mask).to_vector<double>(), base.to_vector<double>());
}

TEST(Attention, SplitAndMergeHeads) {
  const int64_t L = 3, B = 2, H = 4, dh = 5;
  const Tensor x = random({L, B, H * dh}, 17);
  const Tensor heads = split_heads(x, H);
  ASSERT_EQ(heads.shape(), (Shape{B * H, L, dh}));
  const auto xv = x.to_vector<double>(), hv = heads.to_vector<double>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t e = 0; e < dh; ++e)
          ASSERT_EQ(hv[((b * H + h) * L + l) * dh + e], xv[(l * B + b) * H * dh + h * dh + e]);
  EXPECT_TRUE(tensors_near(merge_heads(heads, H), x, 0, 0));
  EXPECT_TRUE(tensors_near(merge_heads(heads.view({B, H, L, dh}), H), x, 0, 0));
  EXPECT_NE(error_of([&] { split_heads(x, 3); }).find("split_heads: x must be (L, B, H*dh) with H = 3"),
            std::string::npos);
  EXPECT_NE(error_of([&] { merge_heads(heads, 3); }).find("merge_heads"), std::string::npos);
}

// head_scores / head_mix (ops/matmul.h) are bmm over split_heads' copies and merge_heads of the result,
// without the copies: the same values to the bit (the same products), forward and every gradient, in
// float32 and float64; shapes are checked by name.
TEST(Attention, HeadProductsEqualBmmOverSplitHeadsBitForBit) {
  const int64_t Lq = 3, Lk = 4, B = 2, H = 3, dh = 5, dv = 2;
  for (DType dt : {DType::F32, DType::F64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor q = random({Lq, B, H * dh}, 31).to(dt).set_requires_grad(true);
    const Tensor k = random({Lk, B, H * dh}, 32).to(dt).set_requires_grad(true);
    const Tensor v = random({Lk, B, H * dv}, 33).to(dt).set_requires_grad(true);
    const Tensor cotangent = random({Lq, B, H * dv}, 34).to(dt);
    std::vector<std::vector<double>> values[2];
    for (int path = 0; path < 2; ++path) {
      for (const Tensor* t : {&q, &k, &v}) t->impl()->grad.reset();
      const Tensor s = path == 0 ? bmm(split_heads(q, H), split_heads(k, H), false, true) : head_scores(q, k, H);
      const Tensor p = softmax(s);
      const Tensor o = path == 0 ? merge_heads(bmm(p, split_heads(v, H)), H) : head_mix(p, v, H);
      ASSERT_EQ(o.shape(), (Shape{Lq, B, H * dv}));
      sru::autograd::backward(sum(o * cotangent));
      values[path] = {s.to_vector<double>(), o.to_vector<double>(), q.grad().to_vector<double>(),
                      k.grad().to_vector<double>(), v.grad().to_vector<double>()};
    }
    for (size_t i = 0; i < values[0].size(); ++i) EXPECT_EQ(values[1][i], values[0][i]) << "value " << i;
  }
  const Tensor q = Tensor::zeros({3, 2, 6});
  EXPECT_NE(error_of([&] { head_scores(q, Tensor::zeros({4, 2, 6}), 4); }).find("head_scores: q must be (L, B, H*d)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { head_scores(q, Tensor::zeros({4, 3, 6}), 2); }).find("differ in batch or width"),
            std::string::npos);
  EXPECT_NE(error_of([&] { head_mix(Tensor::zeros({4, 3, 5}), Tensor::zeros({4, 2, 6}), 2); })
                .find("head_mix: p must be (B*H, Lq, Lk) = (4, Lq, 4)"),
            std::string::npos);
}

TEST(Attention, MaskBuilders) {
  EXPECT_TRUE(values_near(causal_mask(3, 3), {3, 3}, {0, 1, 1, 0, 0, 1, 0, 0, 0}, 0, 0));
  EXPECT_TRUE(values_near(causal_mask(2, 4, 2), {2, 4}, {0, 0, 0, 1, 0, 0, 0, 0}, 0, 0));
  const Tensor pad = padding_mask({2, 0, 3}, 3, DType::I64);
  EXPECT_EQ(pad.dtype(), DType::I64);
  EXPECT_TRUE(values_near(pad, {3, 3}, {0, 0, 1, 1, 1, 1, 0, 0, 0}, 0, 0));
  EXPECT_NE(error_of([] { padding_mask({4}, 3); }).find("length 4 of sequence 0 is outside [0, 3]"), std::string::npos);
  EXPECT_NE(error_of([] { causal_mask(2, 2, -1); }).find("causal_mask"), std::string::npos);
}

TEST(Attention, RefusesMismatchedShapes) {
  const Tensor q = Tensor::zeros({2, 3, 4}), k = Tensor::zeros({2, 5, 4}), v = Tensor::zeros({2, 5, 6});
  std::string m = error_of([&] { scaled_dot_product_attention(q, Tensor::zeros({2, 5, 3}), v, Tensor()); });
  EXPECT_NE(m.find("q and k have different feature sizes: q (2, 3, 4), k (2, 5, 3), v (2, 5, 6)"), std::string::npos)
      << m;
  m = error_of([&] { scaled_dot_product_attention(q, k, Tensor::zeros({2, 4, 6}), Tensor()); });
  EXPECT_NE(m.find("k and v have different lengths"), std::string::npos) << m;
  m = error_of([&] { scaled_dot_product_attention(q, Tensor::zeros({3, 5, 4}), v, Tensor()); });
  EXPECT_NE(m.find("batch dims"), std::string::npos) << m;
  m = error_of([&] { scaled_dot_product_attention(q.view({6, 4}), k, v, Tensor()); });
  EXPECT_NE(m.find("rank >= 3"), std::string::npos) << m;
  m = error_of([&] { scaled_dot_product_attention(q, k, v, Tensor::zeros({2, 5})); });
  EXPECT_NE(m.find("mask of shape (2, 5) does not broadcast to x of shape (2, 3, 5)"), std::string::npos) << m;
}

TEST(DrQALayers, ParameterNamesAndShapesFollowDrQA) {
  const SeqAttnMatch match(6);
  const LinearSeqAttn pool(6);
  const BilinearSeqAttn bilinear(6, 4);
  auto names = [](const Module& m) {
    std::vector<std::pair<std::string, Shape>> out;
    for (const auto& [name, t] : m.state()) out.emplace_back(name, t.shape());
    return out;
  };
  using Named = std::vector<std::pair<std::string, Shape>>;
  EXPECT_EQ(names(match), (Named{{"linear.weight", {6, 6}}, {"linear.bias", {6}}}));
  EXPECT_EQ(names(pool), (Named{{"linear.weight", {1, 6}}, {"linear.bias", {1}}}));
  EXPECT_EQ(names(bilinear), (Named{{"linear.weight", {6, 4}}, {"linear.bias", {6}}}));
}

TEST(DrQALayers, SeqAttnMatchMatchesScalarLoops) {
  const int64_t B = 2, Lx = 3, Ly = 4, d = 5;
  Generator gen(21);
  const SeqAttnMatch match(d, DType::F64, gen);
  const Tensor x = random({B, Lx, d}, 22), y = random({B, Ly, d}, 23);
  const std::vector<int64_t> lengths = {4, 2};
  const Tensor y_mask = padding_mask(lengths, Ly, DType::I32);
  // relu(W . + b) by hand, then attention with scale 1 by the scalar reference.
  const auto W = match.linear->weight.to_vector<double>(), bias = match.linear->bias.to_vector<double>();
  auto project = [&](const Tensor& t) {
    std::vector<double> in = t.to_vector<double>(), out(in.size());
    for (size_t r = 0; r < in.size() / d; ++r)
      for (int64_t o = 0; o < d; ++o) {
        double s = bias[o];
        for (int64_t e = 0; e < d; ++e) s += W[o * d + e] * in[r * d + e];
        out[r * d + o] = std::max(s, 0.0);
      }
    return f64(out, t.shape());
  };
  const auto expected = attend_reference(project(x), project(y), y,
                                         [&](int64_t b, int64_t, int64_t j) { return j >= lengths[b]; }, 1.0);
  EXPECT_TRUE(values_near(match.forward(x, y, y_mask), {B, Lx, d}, expected, 1e-13, 1e-13));
  const auto unmasked =
      attend_reference(project(x), project(y), y, [](int64_t, int64_t, int64_t) { return false; }, 1.0);
  EXPECT_TRUE(values_near(match.forward(x, y, Tensor()), {B, Lx, d}, unmasked, 1e-13, 1e-13));
  const std::string m = error_of([&] { match.forward(x, y, Tensor::zeros({B, Lx})); });
  EXPECT_NE(m.find("SeqAttnMatch: y_mask must be (B, L) = (2, 4) for input (2, 4, 5), got (2, 3)"), std::string::npos)
      << m;
}

TEST(DrQALayers, LinearSeqAttnAndWeightedAverage) {
  const int64_t B = 2, L = 4, d = 3;
  Generator gen(24);
  const LinearSeqAttn pool(d, DType::F64, gen);
  const Tensor x = random({B, L, d}, 25);
  const Tensor x_mask = padding_mask({3, 4}, L);
  const Tensor alpha = pool.forward(x, x_mask);
  const auto w = pool.linear->weight.to_vector<double>(), xv = x.to_vector<double>();
  const double bias = pool.linear->bias.item<double>();
  std::vector<double> expected(B * L, 0.0), average(B * d, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = b == 0 ? 3 : 4;
    double total = 0.0;
    for (int64_t i = 0; i < len; ++i) {
      double s = bias;
      for (int64_t e = 0; e < d; ++e) s += w[e] * xv[(b * L + i) * d + e];
      expected[b * L + i] = std::exp(s);
      total += expected[b * L + i];
    }
    for (int64_t i = 0; i < L; ++i) expected[b * L + i] /= total;
    for (int64_t i = 0; i < L; ++i)
      for (int64_t e = 0; e < d; ++e) average[b * d + e] += expected[b * L + i] * xv[(b * L + i) * d + e];
  }
  EXPECT_TRUE(values_near(alpha, {B, L}, expected, 1e-14, 1e-13));
  EXPECT_EQ(alpha.to_vector<double>()[3], 0.0);
  EXPECT_TRUE(values_near(weighted_average(x, alpha), {B, d}, average, 1e-14, 1e-13));
  EXPECT_NE(error_of([&] { weighted_average(x, Tensor::zeros({B, L + 1}, DType::F64)); }).find("weighted_average"),
            std::string::npos);
}

TEST(DrQALayers, BilinearSeqAttnScoresAndLogProbabilities) {
  const int64_t B = 2, L = 4, dx = 3, dy = 2;
  Generator gen(26);
  const BilinearSeqAttn bilinear(dx, dy, DType::F64, gen);
  const Tensor x = random({B, L, dx}, 27), y = random({B, dy}, 28);
  const Tensor x_mask = padding_mask({4, 2}, L);
  const auto W = bilinear.linear->weight.to_vector<double>(), bias = bilinear.linear->bias.to_vector<double>();
  const auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> raw(B * L), masked(B * L), logp(B * L);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> wy(dx);
    for (int64_t o = 0; o < dx; ++o) {
      wy[o] = bias[o];
      for (int64_t e = 0; e < dy; ++e) wy[o] += W[o * dy + e] * yv[b * dy + e];
    }
    double total = 0.0;
    const int64_t len = b == 0 ? 4 : 2;
    for (int64_t i = 0; i < L; ++i) {
      raw[b * L + i] = 0.0;
      for (int64_t o = 0; o < dx; ++o) raw[b * L + i] += xv[(b * L + i) * dx + o] * wy[o];
      masked[b * L + i] = i < len ? raw[b * L + i] : -inf;
      if (i < len) total += std::exp(raw[b * L + i]);
    }
    for (int64_t i = 0; i < L; ++i) logp[b * L + i] = i < len ? raw[b * L + i] - std::log(total) : -inf;
  }
  const Tensor scores = bilinear.forward(x, y, x_mask), lp = bilinear.log_probs(x, y, x_mask);
  const auto sv = scores.to_vector<double>(), lv = lp.to_vector<double>();
  ASSERT_EQ(scores.shape(), (Shape{B, L}));
  for (int64_t i = 0; i < B * L; ++i) {
    if (std::isinf(masked[i])) {
      EXPECT_EQ(sv[i], -inf);
      EXPECT_EQ(lv[i], -inf);
    } else {
      EXPECT_NEAR(sv[i], masked[i], 1e-14);
      EXPECT_NEAR(lv[i], logp[i], 1e-14);
    }
  }
  EXPECT_TRUE(values_near(bilinear.forward(x, y, Tensor()), {B, L}, raw, 1e-14, 1e-14));
  EXPECT_NE(error_of([&] { bilinear.forward(x, Tensor::zeros({B, dx}, DType::F64), x_mask); })
                .find("BilinearSeqAttn: y must be (B, 2) = (2, 2), got (2, 3)"),
            std::string::npos);
}
