// A Transformer layer (Vaswani et al. 2017) on the shared multi-head attention module (nn/attention.h),
// with OpenNMT-py's parameter names so a checkpoint maps onto its TransformerEncoderLayer:
//   self_attn.linear_query / linear_keys / linear_values / final_linear.{weight,bias}  (w, w) / (w)
//   feed_forward.w_1 (ff, w), feed_forward.w_2 (w, ff), feed_forward.layer_norm (w), layer_norm (w)
// Pre-norm (OpenNMT-py's layout, the default):
//   y = x + dropout(Attn(LN(x))),  out = y + dropout(W2 dropout(relu(W1 LN_ff(y))))
// post-norm (Vaswani et al.; the 2018 OpenNMT-py the SRU paper used):
//   y = LN(x + dropout(Attn(x))),   out = LN_ff(y + dropout(W2 dropout(relu(W1 y))))
// Self-attention is causal (language models, decoders) or sees the whole sequence with an optional key
// padding mask (encoders). Decoding runs token by token through a key/value cache (unbounded: a decoder
// attends to every earlier position). Shapes time-major: x (L, B, w). 12 w^2 + 13 w parameters when
// ff = 4w.
#pragma once

#include <memory>

#include "core/rng.h"
#include "nn/attention.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace sru::nn {

struct TransformerLayerOptions {
  int64_t width = 0;
  int64_t heads = 1;
  int64_t ff_size = 0;  // 0 = 4 * width
  double dropout = 0.0;
  double attn_dropout = 0.0;
  bool pre_norm = true;
  bool causal = true;
  DType dtype = DType::F32;
};

class TransformerLayer : public Module {
 public:
  explicit TransformerLayer(const TransformerLayerOptions& options, Generator& gen = default_generator());
  // A whole sequence; key_padding (B, L), nonzero = padded, or undefined.
  Tensor forward(const Tensor& x, const Tensor& key_padding = Tensor()) const;
  // Decoding (causal layers): the next positions x (Lq, B, w) given the cache of earlier ones, which they
  // join; equals forward() over [earlier | new] for the new rows.
  Tensor forward_incremental(const Tensor& x, KeyValueCache& cache) const;

  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<Linear> w_1, w_2;
  std::shared_ptr<LayerNorm> layer_norm, ff_layer_norm;

 private:
  Tensor feed_forward(const Tensor& y) const;  // the residual block after attention, norms included
  Tensor drop(const Tensor& t) const;

  TransformerLayerOptions options_;
  Generator* gen_;
};

}  // namespace sru::nn
