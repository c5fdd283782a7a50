// Transformer layers (Vaswani et al. 2017) on the shared multi-head attention module (nn/attention.h),
// with OpenNMT-py's parameter names, and the feed-forward sublayer of the SRU paper's translation model
// (Lei et al. 2018, section 4.3): W SRU(x) + b in place of W2 relu(W1 x + b1) + b2.
//
// Names (w = width, ff = ff_size):
//   self_attn.linear_query / linear_keys / linear_values / final_linear.{weight,bias}   (w, w) / (w)
//   context_attn.*  (decoder layers: attention over the encoder's output, the same shapes)
//   feed_forward.w_1 (ff, w), feed_forward.w_2 (w, ff), feed_forward.layer_norm (w)      ffn: relu
//   feed_forward.sru.rnn_lst.0.* (an SRU layer w -> ff, no skip term), feed_forward.w_2 (w, ff*D),
//   feed_forward.layer_norm (w)                                                            ffn: sru
//   layer_norm (w) (encoder layers), layer_norm_1, layer_norm_2 (w) (decoder layers)
//   ssru.weight (2w, w), ssru.forget_bias (w)  in place of self_attn.* with self_sublayer Ssru
// Pre-norm (OpenNMT-py's layout, the default), with A the self-attention, C the context attention, F the
// feed-forward block:
//   y = x + drop(A(LN1(x))),  [z = y + drop(C(LN2(y), memory))],  out = z + drop(F(LN_ff(z)))
// post-norm (Vaswani et al.; the 2018 OpenNMT-py the SRU paper used): each residual sum is normalised
// after it instead, y = LN1(x + drop(A(x))), ...
// F relu: W2 drop(relu(W1 z + b1)) + b2.  F sru: W2 drop_sru(h) + b2 with h the SRU's output over the
// sequence (its own dropout sru_dropout on h; bidirectional in encoders on request), so the sublayer
// reads the whole sequence (left to right in decoders).
// Shapes time-major: x (L, B, w); memory (Ls, B, w); padding masks (B, L), nonzero = padded.
// With self_sublayer Ssru (decoder layers of Marian's SSRU decoder) A is the SSRU sublayer below.
// Decoding (causal layers): forward_incremental takes the next positions and a TransformerLayerState
// (the self-attention's key/value cache or the SSRU's c, the context attention's projected memory, the
// SRU feed-forward's c), and
// equals forward() over [earlier | new] for the new rows. 12 w^2 + 13 w parameters for an encoder layer
// with ff = 4w and the ReLU block.
#pragma once

#include <memory>

#include "core/rng.h"
#include "nn/attention.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "nn/sru.h"

namespace sru::nn {

enum class FeedForwardKind { Relu, Sru };
// A layer's first sublayer: self-attention, or (decoder layers) Marian's simplified SRU (Kim et al. 2019).
enum class SelfSublayerKind { Attention, Ssru };

struct TransformerLayerOptions {
  int64_t width = 0;
  int64_t heads = 1;
  int64_t ff_size = 0;  // 0 = 4 * width
  double dropout = 0.0;
  double attn_dropout = 0.0;
  bool pre_norm = true;
  bool causal = true;            // self-attention: causal (decoders, language models) or over all positions
  bool cross_attention = false;  // a decoder layer: attention over the encoder's output after self-attention
  FeedForwardKind ffn = FeedForwardKind::Relu;
  double sru_dropout = -1.0;     // dropout on the SRU's output (-1 = dropout)
  bool sru_bidirectional = false;
  SelfSublayerKind self_sublayer = SelfSublayerKind::Attention;  // Ssru: causal layers only
  DType dtype = DType::F32;
};

// The SSRU sublayer of Marian's decoder (Kim et al. 2019, "From Research to Production and Back:
// Ludicrously Fast Neural Machine Translation"), in place of causal self-attention:
//   f = sigmoid(W_f x + b_f),  c = f c_prev + (1 - f) W x,  h = relu(c)
// one bias-free (2w, w) product [W; W_f] x, then the fused recurrence (ops/ssru_recurrence.h). A decoding
// step costs O(1) in the target length (a state c per row, no key/value cache). Names: weight (2w, w),
// forget_bias (w).
class SsruSublayer : public Module {
 public:
  SsruSublayer(int64_t width, DType dtype, Generator& gen);
  // x (L, B, w), mask_pad (L, B) or undefined (padded steps keep c, output 0); c (B, w): the state before
  // x (undefined = zeros), replaced by the state after it.
  Tensor forward(const Tensor& x, const Tensor& mask_pad, Tensor& c) const;

  Tensor weight, forget_bias;
};

// The feed-forward sublayer: W2 drop(relu(W1 z + b1)) + b2, or W2 drop(SRU(z)) + b2.
class FeedForward : public Module {
 public:
  FeedForward(const TransformerLayerOptions& options, Generator& gen);
  // z (L, B, w), mask_pad (L, B) or undefined (padded steps: the SRU keeps its state, outputs 0).
  Tensor forward(const Tensor& z, const Tensor& mask_pad = Tensor()) const;
  // The next positions, carrying the SRU's c (1, B, ff) across calls (undefined = zeros).
  Tensor forward_step(const Tensor& z, Tensor& c) const;

  FeedForwardKind kind;
  std::shared_ptr<Linear> w_1, w_2;
  std::shared_ptr<SRU> sru;
  std::shared_ptr<LayerNorm> layer_norm;

 private:
  Tensor drop_inner(const Tensor& t) const;
  double inner_dropout_;
  Generator* gen_;
};

// What a decoder layer carries from one decoding step to the next.
struct TransformerLayerState {
  KeyValueCache self;              // projected keys/values of the earlier target positions
  Tensor context_keys, context_values;  // (B*H, Ls, dh): the memory projected once
  Tensor memory_padding;           // (B, Ls) or undefined
  Tensor ffn_c;                    // the SRU feed-forward's c (1, B, ff) or undefined
  Tensor ssru_c;                   // the SSRU sublayer's c (B, w) or undefined (zeros)
  // New row i continues row rows[i] (I64 on the CPU or the state's device).
  void reorder(const Tensor& rows, int64_t heads);
};

class TransformerLayer : public Module {
 public:
  explicit TransformerLayer(const TransformerLayerOptions& options, Generator& gen = default_generator());
  // A whole sequence. key_padding (B, L): x's padded positions; memory (Ls, B, w) and memory_padding
  // (B, Ls) for decoder layers.
  Tensor forward(const Tensor& x, const Tensor& key_padding = Tensor(), const Tensor& memory = Tensor(),
                 const Tensor& memory_padding = Tensor()) const;
  // Decoding (causal layers): the next positions x (Lq, B, w). A decoder layer's state must have been
  // started with start_decoding (the memory's keys and values).
  Tensor forward_incremental(const Tensor& x, TransformerLayerState& state) const;
  // Projects the encoder's output for the context attention of every later step.
  void start_decoding(TransformerLayerState& state, const Tensor& memory, const Tensor& memory_padding) const;

  const TransformerLayerOptions& options() const { return options_; }

  std::shared_ptr<MultiHeadAttention> self_attn, context_attn;  // self_attn: undefined with the SSRU
  std::shared_ptr<SsruSublayer> ssru;                            // self_sublayer Ssru
  std::shared_ptr<FeedForward> feed_forward;
  std::shared_ptr<LayerNorm> layer_norm, layer_norm_2;  // layer_norm is layer_norm_1 in decoder layers
  // Kept for the tests and the benchmark: the ReLU block's linears and norm (undefined with the SRU).
  std::shared_ptr<Linear> w_1, w_2;
  std::shared_ptr<LayerNorm> ff_layer_norm;

 private:
  Tensor residual(const Tensor& x, const Tensor& sublayer_out, const std::shared_ptr<LayerNorm>& norm) const;
  Tensor drop(const Tensor& t) const;

  TransformerLayerOptions options_;
  Generator* gen_;
};

// The sinusoidal position encodings of Vaswani et al. (OpenNMT-py's PositionalEncoding), computed for
// any position: row p is sin(p / 10000^(2i/dim)) at column 2i and cos at 2i + 1. Rows start .. start + L
// - 1, gathered as (L, B, dim) on `device`, to add to time-major embeddings.
Tensor sinusoidal_positions(int64_t start, int64_t length, int64_t batch, int64_t dim, DType dtype, Device device);

// What a Transformer stack reads from its embeddings x (L, B, w) at positions start ..: sqrt(w) x plus the
// sinusoidal encodings (Vaswani et al.; OpenNMT-py's Embeddings), before the embedding dropout.
Tensor scaled_with_positions(const Tensor& x, int64_t start);

}  // namespace sru::nn
