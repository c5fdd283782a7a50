// The fused attention op (ops/attention.h) against the composed attention (nn/attention.h
// attend_projected with AttentionKernel::Composed: head products, the fused softmax kernels, dropout)
// on the CPU: every mask kind (none, key padding with a fully padded sequence, causal with memory and a
// window, causal with padding), lengths 1 to 200, one and several heads, dv != dh, float64 and float32;
// the same dropout as dropout() over the weights (batch shards too); argument errors; float32 against
// the float64 reference at L 64 and 200; the SQuAD reader's question attention on it where its width fits. Its float64
// gradient check and CPU/CUDA parity run through the op table (tests/unit/test_op_table.cpp,
// tests/parity/test_cuda_op_table.cpp). The pattern's tile rules that the CUDA kernels use to skip and
// unmask whole tiles, against every pair.
#include <gtest/gtest.h>

#include <string>

#include "autograd/engine.h"
#include "nn/attention.h"
#include "ops/attention.h"
#include "ops/ops.h"
#include "testing.h"
#include "train/trainer.h"

using namespace sru;
using namespace sru::nn;
using sru::testing::error_of;
using sru::testing::tensors_near;

namespace {

Tensor leaf_of(const Shape& shape, uint64_t seed, DType dtype) {
  Generator gen(seed);
  Tensor t = Tensor::uniform(shape, -1.5, 1.5, dtype, gen);
  t.set_requires_grad(true);
  return t;
}

struct Attended {
  Tensor out, gq, gk, gv;
  uint64_t offset_after = 0;
};

// One forward and backward (the loss: a fixed random weighting of the output) through `kernel`.
Attended run(AttentionKernel kernel, const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const AttentionMask& mask,
        double dropout_p, const BatchShard& shard = {}) {
  const Tensor lq = q.detach(), lk = k.detach(), lv = v.detach();
  for (Tensor t : {lq, lk, lv}) t.set_requires_grad(true);
  Generator gen(1234);
  gen.set_batch_shard(shard);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(2) / heads));
  const Tensor out = attend_projected(lq, lk, lv, heads, mask, scale, dropout_p, dropout_p > 0, gen, kernel);
  Generator weights_gen(99);
  const Tensor w = Tensor::uniform(out.shape(), -1, 1, out.dtype(), weights_gen);
  autograd::backward(sum(mul(out, w)));
  return {out.detach(), lq.grad(), lk.grad(), lv.grad(), gen.offset()};
}

void expect_same(const Attended& fused, const Attended& composed, double tol) {
  EXPECT_TRUE(tensors_near(fused.out, composed.out, tol, tol)) << "output";
  EXPECT_TRUE(tensors_near(fused.gq, composed.gq, tol, tol)) << "grad q";
  EXPECT_TRUE(tensors_near(fused.gk, composed.gk, tol, tol)) << "grad k";
  EXPECT_TRUE(tensors_near(fused.gv, composed.gv, tol, tol)) << "grad v";
  EXPECT_EQ(fused.offset_after, composed.offset_after) << "generator words reserved";
}

// (B, Lk) key padding: sequence 1 ends two keys early, sequence 2 (when B > 2) is padded everywhere
// (its queries see no key: zero outputs and gradients both ways).
Tensor key_padding(int64_t B, int64_t Lk) {
  std::vector<float> pad(static_cast<size_t>(B * Lk), 0.0f);
  for (int64_t j = std::max<int64_t>(0, Lk - 2); j < Lk && B > 1; ++j) pad[static_cast<size_t>(Lk + j)] = 1.0f;
  for (int64_t j = 0; j < Lk && B > 2; ++j) pad[static_cast<size_t>(2 * Lk + j)] = 1.0f;
  return Tensor::from_vector(pad, {B, Lk});
}

}  // namespace

TEST(FusedAttention, MatchesTheComposedAttentionForEveryMaskAndLength) {
  for (const DType dt : {DType::F64, DType::F32, DType::BF16})
    for (const int64_t L : {1, 7, 64, 200})
      for (const int64_t heads : {1, 3})
        for (int kind = 0; kind < 4; ++kind) {
          const int64_t B = 3, dh = 8, dv = 12, memory = kind == 2 ? 3 : 0, Lk = L + memory;
          AttentionMask mask;
          std::string name;
          switch (kind) {
            case 0: name = "none"; break;
            case 1: mask = AttentionMask::padding(key_padding(B, Lk)); name = "key padding"; break;
            case 2: mask = AttentionMask::causal(memory, 4); name = "causal, memory 3, window 4"; break;
            default: mask = AttentionMask::causal(0, -1, key_padding(B, Lk)); name = "causal with key padding";
          }
          SCOPED_TRACE(std::string(dtype_name(dt)) + ", L " + std::to_string(L) + ", " + std::to_string(heads) +
                       " heads, " + name);
          const Tensor q = leaf_of({L, B, heads * dh}, 1, dt), k = leaf_of({Lk, B, heads * dh}, 2, dt),
                       v = leaf_of({Lk, B, heads * dv}, 3, dt);
          // bf16: the composed path rounds the scores and the weights to bf16 between its ops, the fused
          // op keeps them in float32 (2^-8 relative per rounding, grown by the softmax's exponent: the largest
          // difference in these cases lies between 5e-3 and 1e-2).
          const double tol = dt == DType::F64 ? 1e-12 : dt == DType::F32 ? 2e-5 : 1.5e-2;
          expect_same(run(AttentionKernel::Fused, q, k, v, heads, mask, 0.0),
                      run(AttentionKernel::Composed, q, k, v, heads, mask, 0.0), tol);
        }
}

// Training: the fused op drops the weights dropout() drops over (B, H, Lq, Lk), so both kernels give the
// same result for a generator state, also for a data-parallel rank's rows (batch shard).
TEST(FusedAttention, DropsTheWeightsDropoutWouldDrop) {
  const int64_t L = 9, B = 2, heads = 2, dh = 4;
  for (const DType dt : {DType::F64, DType::F32})
  for (const bool shard : {false, true}) {
    SCOPED_TRACE(std::string(dtype_name(dt)) + (shard ? ", batch shard: rows 1..2 of 4" : ", one process"));
    const Tensor q = leaf_of({L, B, heads * dh}, 4, dt), k = leaf_of({L, B, heads * dh}, 5, dt),
                 v = leaf_of({L, B, heads * dh}, 6, dt);
    const BatchShard rows = shard ? BatchShard{4, 1, 2} : BatchShard{};
    for (const AttentionMask& mask : {AttentionMask::none(), AttentionMask::causal()}) {
      const Attended fused = run(AttentionKernel::Fused, q, k, v, heads, mask, 0.3, rows);
      expect_same(fused, run(AttentionKernel::Composed, q, k, v, heads, mask, 0.3, rows), dt == DType::F64 ? 1e-12 : 2e-5);
      EXPECT_FALSE(tensors_near(fused.out, run(AttentionKernel::Fused, q, k, v, heads, mask, 0.0).out, 1e-3, 1e-3))
          << "dropout changed nothing";
    }
  }
}

TEST(FusedAttention, RefusesWhatItCannotTakeNamingIt) {
  const Tensor q = Tensor::zeros({3, 2, 8}), kv = Tensor::zeros({4, 2, 8});
  EXPECT_NE(error_of([&] { fused_attention(q, kv, kv, 3, {}, Tensor(), 1.0); }).find("fused_attention: expected q"),
            std::string::npos);
  EXPECT_NE(error_of([&] { fused_attention(q, kv, kv, 2, {}, Tensor::zeros({2, 3}), 1.0); })
                .find("key_padding must be (B, Lk) = (2, 4)"),
            std::string::npos);
  const Tensor wide = Tensor::zeros({3, 2, 2 * 130});
  EXPECT_NE(error_of([&] { fused_attention(wide, wide, wide, 2, {}, Tensor(), 1.0); }).find("compose the attention"),
            std::string::npos);
  EXPECT_FALSE(fused_attention_supports(130, 64, DType::F32, Device::cpu()));
  EXPECT_TRUE(fused_attention_supports(64, 64, DType::BF16, Device::cpu()));
  EXPECT_FALSE(fused_attention_supports(64, 64, DType::I64, Device::cpu()));
}

// Split heads and the decoding cache (HeadsLayout::HeadMajor, through attend_heads): one query over a
// ring of 16 slots of which 6 are filled (causal offset 5), three queries at offset 7 with a window,
// key padding, none; forward and gradients against the composed attend_heads.
TEST(FusedAttention, HeadMajorHeadsAsTheDecodingCacheHoldsThem) {
  struct Case {
    const char* name;
    int64_t Lq, Lk;
    AttentionMask mask;
  };
  const int64_t B = 2, H = 3, dh = 8, dv = 5;
  const Case cases[] = {{"one query over a ring of 16, 6 filled", 1, 16, AttentionMask::causal(5)},
                        {"three queries, offset 7, window 4", 3, 10, AttentionMask::causal(7, 4)},
                        {"key padding", 4, 6, AttentionMask::padding(key_padding(B, 6))},
                        {"none", 4, 6, AttentionMask::none()}};
  for (const DType dt : {DType::F64, DType::F32})
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + ", " + c.name);
      const Tensor q = leaf_of({B * H, c.Lq, dh}, 7, dt), k = leaf_of({B * H, c.Lk, dh}, 8, dt),
                   v = leaf_of({B * H, c.Lk, dv}, 9, dt);
      std::vector<Attended> runs;
      for (const AttentionKernel kernel : {AttentionKernel::Fused, AttentionKernel::Composed}) {
        const Tensor lq = q.detach(), lk = k.detach(), lv = v.detach();
        for (Tensor t : {lq, lk, lv}) t.set_requires_grad(true);
        const Tensor out = attend_heads(lq, lk, lv, H, c.mask, 0.35, 0.0, false, default_generator(), kernel);
        Generator weights_gen(99);
        autograd::backward(sum(mul(out, Tensor::uniform(out.shape(), -1, 1, out.dtype(), weights_gen))));
        runs.push_back({out.detach(), lq.grad(), lk.grad(), lv.grad(), 0});
      }
      expect_same(runs[0], runs[1], dt == DType::F64 ? 1e-12 : 2e-5);
    }
}

// float32 through the fused op against the float64 composed attention at the longer lengths (the
// float32 comparisons above are against the composed float32 path, which rounds alike): the online
// softmax's rescaling and the blocked sums keep float32's own error: 1-3e-7 measured at outputs and
// gradients of ~0.1, against a bound of 2e-6 (absolute and relative; 1e-7 fails).
TEST(FusedAttention, Float32StaysNearTheFloat64Reference) {
  for (const int64_t L : {64, 200})
    for (const bool causal_with_padding : {false, true}) {
      SCOPED_TRACE("L " + std::to_string(L) + (causal_with_padding ? ", causal with key padding" : ", no mask"));
      const int64_t B = 3, heads = 3, dh = 8;
      const AttentionMask mask =
          causal_with_padding ? AttentionMask::causal(0, -1, key_padding(B, L)) : AttentionMask::none();
      const Tensor q = leaf_of({L, B, heads * dh}, 21, DType::F64), k = leaf_of({L, B, heads * dh}, 22, DType::F64),
                   v = leaf_of({L, B, heads * dh}, 23, DType::F64);
      const Attended reference = run(AttentionKernel::Composed, q, k, v, heads, mask, 0.0);
      const Attended fused =
          run(AttentionKernel::Fused, q.to(DType::F32), k.to(DType::F32), v.to(DType::F32), heads, mask, 0.0);
      expect_same(fused, reference, 2e-6);
    }
}

// The SQuAD reader's question attention (DrQA's SeqAttnMatch: one head of the layer's width over the
// question's projection, key padding) takes the fused op when train.attention is fused and its width
// fits the fused kernels (<= 128 features, configs/squad-small.yaml's 100), and stays composed above that
// (configs/squad.yaml's 300-d vectors): forward and every gradient, the layer's weights included.
TEST(FusedAttention, TheReadersQuestionAttentionTakesTheFusedOpWhereItsWidthFits) {
  for (const int64_t d : {16, 130}) {
    SCOPED_TRACE("width " + std::to_string(d));
    const int64_t B = 3, Lx = 11, Ly = 7;
    Generator gen(31);
    const SeqAttnMatch match(d, DType::F32, gen);
    const Tensor x = leaf_of({B, Lx, d}, 32, DType::F32), y = leaf_of({B, Ly, d}, 33, DType::F32);
    const Tensor y_mask = key_padding(B, Ly);
    std::vector<Attended> runs;
    for (const AttentionKernel kernel : {AttentionKernel::Fused, AttentionKernel::Composed}) {
      set_attention_kernel(kernel);
      const Tensor lx = x.detach(), ly = y.detach();
      for (Tensor t : {lx, ly}) t.set_requires_grad(true);
      match.linear->weight.set_grad(Tensor());
      const Tensor out = match.forward(lx, ly, y_mask);
      Generator weights_gen(99);
      autograd::backward(sum(mul(out, Tensor::uniform(out.shape(), -1, 1, out.dtype(), weights_gen))));
      runs.push_back({out.detach(), lx.grad(), ly.grad(), match.linear->weight.grad(), 0});
    }
    set_attention_kernel(AttentionKernel::Auto);
    expect_same(runs[0], runs[1], 2e-5);
    if (d <= kFusedAttentionMaxHead)
      EXPECT_NE(runs[0].out.to_vector<float>(), runs[1].out.to_vector<float>()) << "the fused op did not run";
    else
      EXPECT_EQ(runs[0].out.to_vector<float>(), runs[1].out.to_vector<float>()) << "too wide for the fused op";
  }
}

// The process-wide choice behind Auto (srubench --attention): fused makes Auto take the fused op on the
// CPU too (bit for bit the forced Fused), names are checked.
TEST(FusedAttention, TheProcessWideKernelDecidesAuto) {
  const Tensor q = leaf_of({5, 2, 8}, 11, DType::F32), k = leaf_of({6, 2, 8}, 12, DType::F32),
               v = leaf_of({6, 2, 8}, 13, DType::F32);
  const AttentionMask mask = AttentionMask::causal(1);
  const Tensor fused = attend_projected(q, k, v, 2, mask, 0.5, 0.0, false, default_generator(), AttentionKernel::Fused);
  const Tensor composed =
      attend_projected(q, k, v, 2, mask, 0.5, 0.0, false, default_generator(), AttentionKernel::Composed);
  ASSERT_NE(fused.to_vector<float>(), composed.to_vector<float>()) << "the paths should differ in rounding";
  set_attention_kernel(AttentionKernel::Fused);
  const Tensor automatic = attend_projected(q, k, v, 2, mask, 0.5);
  set_attention_kernel(AttentionKernel::Auto);
  EXPECT_EQ(automatic.to_vector<float>(), fused.to_vector<float>());
  EXPECT_EQ(attend_projected(q, k, v, 2, mask, 0.5).to_vector<float>(), composed.to_vector<float>());
  EXPECT_EQ(parse_attention_kernel("composed", "--attention"), AttentionKernel::Composed);
  EXPECT_NE(error_of([] { parse_attention_kernel("flash", "--attention"); }).find("--attention: 'flash' is not"),
            std::string::npos);
}

// train.attention sets the process's kernel for a run (srutrain, srueval, srubench train-epoch); auto
// leaves what the program chose (srubench --attention), and the default is the composed attention on
// every device.
TEST(FusedAttention, TheTrainAttentionKeySetsTheProcessKernel) {
  EXPECT_EQ(attention_kernel(), AttentionKernel::Auto);
  const Tensor q = leaf_of({5, 2, 8}, 11, DType::F32), k = leaf_of({6, 2, 8}, 12, DType::F32),
               v = leaf_of({6, 2, 8}, 13, DType::F32);
  const auto attend = [&] { return attend_projected(q, k, v, 2, AttentionMask::none(), 0.5).to_vector<float>(); };
  const std::vector<float> by_default = attend();
  config::TrainConfig train;
  train.attention = "fused";
  train::apply_attention_kernel(train);
  EXPECT_EQ(attention_kernel(), AttentionKernel::Fused);
  const std::vector<float> fused = attend();
  EXPECT_NE(fused, by_default);
  train.attention = "auto";
  train::apply_attention_kernel(train);
  EXPECT_EQ(attention_kernel(), AttentionKernel::Fused) << "auto overrode the program's choice";
  train.attention = "composed";
  train::apply_attention_kernel(train);
  EXPECT_EQ(attend(), by_default);
  set_attention_kernel(AttentionKernel::Auto);
  train.attention = "flash";
  EXPECT_NE(error_of([&] { train::apply_attention_kernel(train); }).find("train.attention: 'flash'"), std::string::npos);
}

// The tile rules of AttentionPattern (ops/attention_math.h) against sees() on every pair: sees_all (a
// tile the CUDA kernels compute without a mask), keys_seen_by (the key tiles a block of queries visits)
// and queries_seeing (the query tiles a block of keys visits), over patterns with offsets, windows and
// ranges crossing the diagonal both ways.
TEST(AttentionPattern, TileRulesAgreeWithEveryPair) {
  constexpr long long kL = 12;
  int unmasked = 0, masked = 0;
  for (const bool causal : {false, true})
    for (long long offset = 0; offset <= 3; ++offset)
      for (const long long window : {-1LL, 0LL, 2LL, 5LL}) {
        const AttentionPattern pattern{causal, offset, window};
        const long long Lq = kL, Lk = kL + offset;
        for (long long i0 = 0; i0 < Lq; ++i0)
          for (long long i1 = i0; i1 < Lq; ++i1) {
            for (long long j0 = 0; j0 < Lk; ++j0)
              for (long long j1 = j0; j1 < Lk; ++j1) {
                bool every = true;
                for (long long i = i0; i <= i1; ++i)
                  for (long long j = j0; j <= j1; ++j) every = every && pattern.sees(i, j);
                ASSERT_EQ(pattern.sees_all(i0, i1, j0, j1), every)
                    << "causal " << causal << " offset " << offset << " window " << window << " queries [" << i0
                    << ", " << i1 << "] keys [" << j0 << ", " << j1 << "]";
                (every ? unmasked : masked) += 1;
              }
            long long first = 0, last = 0;
            pattern.keys_seen_by(i0, i1, Lk, first, last);
            for (long long i = i0; i <= i1; ++i)
              for (long long j = 0; j < Lk; ++j)
                if (pattern.sees(i, j)) EXPECT_TRUE(first <= j && j <= last) << "key " << j << " of query " << i;
          }
        for (long long j0 = 0; j0 < Lk; ++j0)
          for (long long j1 = j0; j1 < Lk; ++j1) {
            long long first = 0, last = 0;
            pattern.queries_seeing(j0, j1, Lq, first, last);
            for (long long j = j0; j <= j1; ++j)
              for (long long i = 0; i < Lq; ++i)
                if (pattern.sees(i, j)) EXPECT_TRUE(first <= i && i <= last) << "query " << i << " of key " << j;
          }
      }
  EXPECT_GT(unmasked, 0);  // both answers occur
  EXPECT_GT(masked, 0);
}
