// Attention shared by the SQuAD Document Reader (DrQA, Chen et al. 2017), SRU++ (Lei 2021) and the
// Transformer layers (nn/transformer.h): the multi-head attention module with its key/value cache for
// decoding, masks as kinds dispatched to the fused softmax kernels, scaled dot-product attention on
// batched matrix products and the masked softmax, multi-head split/merge, mask builders, and DrQA's attention layers with the parameter names of DrQA's
// layers.py (`linear.weight`, `linear.bias`), so checkpoints map onto the PyTorch modules.
//
// Mask convention (as the SRU's mask_pad): nonzero = masked / padded / hidden. Masks broadcast to
// the scores by right-aligned numpy rules (ops/masked_softmax.h) and are never copied.
// Shapes: B batch, L / Lq / Lk lengths, d features, H heads, dh = d / H features per head.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
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

// Which keys each query may not see, as a kind rather than a tensor, so the softmax runs through the
// fused kernels (ops/masked_softmax.h) with no mask built on the host:
//   None        every key visible;
//   KeyPadding  key_padding (B, Lk), nonzero = a padded key, hidden from every query (masked_softmax);
//   Causal      query i (of Lq) sees keys j <= i + offset, and with window >= 0 only j >= i + offset -
//               window (causal_softmax: the keys are [offset earlier positions | the queries' own]);
//               with key_padding as well, padded keys are hidden too (the same kernel reads both).
struct AttentionMask {
  enum class Kind { None, KeyPadding, Causal };
  Kind kind = Kind::None;
  Tensor key_padding;
  int64_t offset = 0;
  int64_t window = -1;

  static AttentionMask none() { return {}; }
  static AttentionMask padding(Tensor key_padding) { return {Kind::KeyPadding, std::move(key_padding), 0, -1}; }
  static AttentionMask causal(int64_t offset = 0, int64_t window = -1, Tensor key_padding = Tensor()) {
    return {Kind::Causal, std::move(key_padding), offset, window};
  }
};

// softmax(scale q k^T, mask) v over heads, head-major: qh (B*H, Lq, dh), kh (B*H, Lk, dh), vh (B*H, Lk,
// dv) -> (B*H, Lq, dv), batch row b*H + h (split_heads' layout). Dropout (training only) applies to the
// weights, drawn with the batch as dim 0 of (B, H, Lq, Lk), so a data-parallel rank draws its rows of
// the single process's mask.
// How the attention over projected heads is computed: Composed (head products, the fused softmax kernels,
// dropout, head products: ops/matmul.h, ops/masked_softmax.h), Fused (one op each way, no (Lq, Lk) matrix
// in memory: ops/attention.h), or Auto: composed on every device. Measured (docs/results.md): on the CPU
// as fast as the fused op's blocked kernels at translation sizes, keeping the CPU's numbers; on an H200
// (2026-11-29) the wmt-base step 1.27x faster at bf16 (1.29x at tf32) composed, and the fused op 4.5x
// F.scaled_dot_product_attention's time at L 512. Fused saves memory at long lengths (train.attention).
// Both draw the same dropout and agree within float rounding.
enum class AttentionKernel { Auto, Composed, Fused };
// What Auto means in this process (default Auto: the rule above; Fused: the fused op wherever it takes
// the heads, on any device; Composed: never), as PyTorch's sdpa_kernel context chooses a backend:
// `srubench --attention composed|fused` compares the two on one machine; train.attention sets it for a
// run (train/trainer.h apply_attention_kernel). A call's own Fused or Composed
// is kept (Fused with heads it cannot take is an error). Names:
// attention_kernel_names() ("auto", "composed", "fused"); parse refuses others naming `what`.
void set_attention_kernel(AttentionKernel kernel);
AttentionKernel attention_kernel();
const std::vector<std::string>& attention_kernel_names();
AttentionKernel parse_attention_kernel(const std::string& name, const std::string& what);

Tensor attend_heads(const Tensor& qh, const Tensor& kh, const Tensor& vh, int64_t heads, const AttentionMask& mask,
                    double scale, double dropout = 0.0, bool training = false, Generator& gen = default_generator(),
                    AttentionKernel kernel = AttentionKernel::Auto);

// softmax(scale q k^T, mask) v per head on the projections' layout: q (Lq, B, H*dh), k (Lk, B, H*dh),
// v (Lk, B, H*dv) -> (Lq, B, H*dv); mask.key_padding, if any, (B, Lk). Dropout (training) applies to
// the weights, drawn as dropout() over (B, H, Lq, Lk) with the batch first.
Tensor attend_projected(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const AttentionMask& mask,
                        double scale, double dropout = 0.0, bool training = false, Generator& gen = default_generator(),
                        AttentionKernel kernel = AttentionKernel::Auto);

// Projected keys and values of earlier positions, for decoding step by step. Head-major (B*H, capacity,
// dh) buffers used as a ring: `length` valid rows starting at slot `start`, in time order. A bounded
// cache (max_length >= 0, SRU++'s attention memory) keeps the last max_length rows in max_length + 1
// slots, so that one new position and every kept row fit together: a decoding step writes one row per
// buffer in place and attends over all slots (attention does not depend on the order of its keys), so a
// step costs the same however many tokens came before. An unbounded cache (-1, a Transformer decoder)
// doubles its capacity when full (amortised O(1) per row). Rows of a batch are reordered (beam search)
// by gathering dim 0 of (B, H*capacity*dh) views (KeyValueCache::reorder).
struct KeyValueCache {
  Tensor keys, values;  // (B*H, capacity, dh); undefined until the first rows arrive
  int64_t start = 0, length = 0, max_length = -1;

  int64_t capacity() const { return keys.defined() ? keys.size(1) : 0; }
  // The valid rows in time order: (B*H, length, dh) each.
  std::pair<Tensor, Tensor> ordered() const;
  // New row i of the batch continues old row rows[i] (rows: I64 indices into the batch, any device).
  void reorder(const Tensor& rows, int64_t heads);
  // Replaces the contents with kh, vh (B*H, n, dh) in time order: their last max_length rows when bounded.
  void assign(const Tensor& kh, const Tensor& vh);

};

// Multi-head attention with the projections it needs, named by the owner so that every model keeps its
// checkpoint names (SRU++: linear1 / linear2 as the reference; a Transformer: OpenNMT-py's names):
//   q = W_q x                                 query.weight (d, query_size) [+ bias]
//   K = W_k s, V = W_v s                      key.weight, value.weight (d, key_size): s the source
//   or, keys_from_queries (SRU++): [K | V] = W_kv q, one key_value.weight (2d, d), no bias
//   A = softmax(q K^T / sqrt(d / H), mask) V per head      (Lq, B, d)
//   y = W_o A [+ b_o] when output_size > 0, else A (the owner projects; SRU++ adds q + alpha A first)
// Time-major: x (Lq, B, query_size), source (Lk, B, key_size). Scores go through attend_heads (the
// fused softmax kernels); K is never transposed by a copy (bmm with transpose flags).
struct MultiHeadAttentionOptions {
  int64_t query_size = 0;
  int64_t key_size = 0;            // 0 = query_size
  int64_t model_size = 0;          // d, split over the heads
  int64_t heads = 1;
  int64_t output_size = 0;         // > 0: an output projection to this width
  bool bias = true;
  bool keys_from_queries = false;
  double attn_dropout = 0.0;       // on the attention weights (training)
  struct Names {
    std::string query = "linear_query", key = "linear_keys", value = "linear_values", key_value = "linear_kv",
                output = "final_linear";
  } names;
  DType dtype = DType::F32;
};

class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(const MultiHeadAttentionOptions& options, Generator& gen = default_generator());

  Tensor project_queries(const Tensor& x) const;  // (L, B, d)
  // K, V (L, B, d) of `source`: the source rows, or projected queries with keys_from_queries.
  std::pair<Tensor, Tensor> project_keys_values(const Tensor& source) const;
  // Attention of projected queries q (Lq, B, d) over projected k, v (Lk, B, d) -> (Lq, B, d), before the
  // output projection. mask.key_padding, if any, is (B, Lk).
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask) const;
  Tensor project_output(const Tensor& attended) const;  // W_o A + b_o, or A itself without a projection
  // The whole computation: self-attention when `source` is undefined (its keys from x, or from q with
  // keys_from_queries), else attention over `source`.
  Tensor forward(const Tensor& x, const Tensor& source, const AttentionMask& mask) const;

  // Decoding: q (Lq, B, d) are the projected queries of the next Lq positions; `source` (what
  // project_keys_values takes) gives their keys and values. Each query sees the cached rows and the new
  // positions up to itself (with window >= 0 only the last `window` earlier positions), then the new
  // rows join the cache (from `cache_source` instead when defined: SRU++'s reference convention caches
  // rows projected from un-normalised inputs). Equals forward() over [earlier | new] with a causal mask.
  // Returns (Lq, B, d) before the output projection. No autograd through the cache (decoding).
  Tensor attend_incremental(const Tensor& q, const Tensor& source, KeyValueCache& cache, int64_t window = -1,
                            const Tensor& cache_source = Tensor()) const;

  int64_t model_size() const { return options_.model_size; }
  int64_t heads() const { return options_.heads; }
  const MultiHeadAttentionOptions& options() const { return options_; }

  std::shared_ptr<Linear> query, key, value, key_value, output;

 private:
  MultiHeadAttentionOptions options_;
  Generator* gen_;
};

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
