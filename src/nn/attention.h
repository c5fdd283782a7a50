// Attention pieces shared by the SQuAD Document Reader (DrQA, Chen et al. 2017) and SRU++ (Lei 2021):
// scaled dot-product attention on batched matrix products and the masked softmax, multi-head
// split/merge, mask builders, and DrQA's attention layers with the parameter names of DrQA's
// layers.py (`linear.weight`, `linear.bias`), so checkpoints map onto the PyTorch modules.
//
// Mask convention (as the SRU's mask_pad): nonzero = masked / padded / hidden. Masks broadcast to
// the scores by right-aligned numpy rules (ops/masked_softmax.h) and are never copied.
// Shapes: B batch, L / Lq / Lk lengths, d features, H heads, dh = d / H features per head.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/rng.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace sru::nn {

struct AttentionResult {
  Tensor output;   // (..., Lq, dv)
  Tensor weights;  // (..., Lq, Lk), the attention probabilities before dropout
};

// softmax(q k^T * scale, masked) v, batch-first:
//   q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv), the leading dims "..." equal (at least one: B,
//   or B*H after split_heads, or (B, H) to use a per-batch (B, 1, 1, Lk) mask with heads);
//   mask broadcastable to (..., Lq, Lk) or undefined; scale defaults to 1/sqrt(d).
// Dropout (probability `dropout`, training only) applies to the weights. The products are bmm calls
// with transpose flags: no transposed copy of k is made.
AttentionResult scaled_dot_product_attention_with_weights(const Tensor& q, const Tensor& k, const Tensor& v,
                                                          const Tensor& mask, double dropout = 0.0,
                                                          bool training = false,
                                                          Generator& gen = default_generator(),
                                                          std::optional<double> scale = std::nullopt);
// The same, output only: (..., Lq, dv).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                    double dropout = 0.0, bool training = false,
                                    Generator& gen = default_generator(), std::optional<double> scale = std::nullopt);

// Multi-head layout (one copy each way). split_heads: x (L, B, H*dh) time-major -> (B*H, L, dh),
// batch row b*H + h; merge_heads: (B*H, L, dh) or (B, H, L, dh) -> (L, B, H*dh).
Tensor split_heads(const Tensor& x, int64_t heads);
Tensor merge_heads(const Tensor& x, int64_t heads);

// Causal mask (Lq, Lk): query i may see key j when j <= i + memory_length, i.e. the keys are
// [memory_length keys of the previous segment | the Lq current positions]; nonzero = hidden.
Tensor causal_mask(int64_t query_length, int64_t key_length, int64_t memory_length = 0, DType dtype = DType::F32,
                   Device device = Device::cpu());
// Padding mask (B, max_length) from sequence lengths: 1 at positions >= lengths[b]. View it as
// (B, 1, Lk) for scores (B, Lq, Lk), or (B, 1, 1, Lk) for scores (B, H, Lq, Lk).
Tensor padding_mask(const std::vector<int64_t>& lengths, int64_t max_length, DType dtype = DType::F32,
                    Device device = Device::cpu());

// DrQA's SeqAttnMatch (aligned question embedding): for each x_i, attention over the y_j with scores
// relu(W x_i + b) . relu(W y_j + b), y's padding masked: out_i = sum_j alpha_ij y_j.
//   x (B, Lx, d), y (B, Ly, d), y_mask (B, Ly) -> (B, Lx, d).   Parameters linear.weight (d, d), linear.bias (d).
class SeqAttnMatch : public Module {
 public:
  explicit SeqAttnMatch(int64_t dim, DType dtype = DType::F32, Generator& gen = default_generator());
  Tensor forward(const Tensor& x, const Tensor& y, const Tensor& y_mask) const;
  std::shared_ptr<Linear> linear;
};

// DrQA's LinearSeqAttn (self-attentive pooling weights): alpha = masked softmax over i of w . x_i + b.
//   x (B, L, d), x_mask (B, L) -> (B, L).   Parameters linear.weight (1, d), linear.bias (1).
class LinearSeqAttn : public Module {
 public:
  explicit LinearSeqAttn(int64_t dim, DType dtype = DType::F32, Generator& gen = default_generator());
  Tensor forward(const Tensor& x, const Tensor& x_mask) const;
  std::shared_ptr<Linear> linear;
};

// sum_i w_i x_i per batch row: x (B, L, d), w (B, L) -> (B, d) (one bmm).
Tensor weighted_average(const Tensor& x, const Tensor& w);

// DrQA's BilinearSeqAttn (answer start/end scores): s_i = x_i . (W y + b).
//   x (B, L, dx), y (B, dy), x_mask (B, L).   Parameters linear.weight (dx, dy), linear.bias (dx).
// forward: the raw scores (B, L), -inf at masked positions; log_probs: masked log-softmax over i
// (B, L), -inf at masked positions, for the loss (cross_entropy(log_probs, target), ops/softmax.h).
class BilinearSeqAttn : public Module {
 public:
  BilinearSeqAttn(int64_t x_dim, int64_t y_dim, DType dtype = DType::F32, Generator& gen = default_generator());
  Tensor forward(const Tensor& x, const Tensor& y, const Tensor& x_mask) const;
  Tensor log_probs(const Tensor& x, const Tensor& y, const Tensor& x_mask) const;
  std::shared_ptr<Linear> linear;

 private:
  Tensor scores(const Tensor& x, const Tensor& y, const Tensor& x_mask) const;  // unmasked, checked
};

}  // namespace sru::nn
