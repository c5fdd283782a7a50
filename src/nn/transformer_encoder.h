// The Transformer as a sequence encoder (registry name `transformer`): a stack of Transformer layers
// (nn/transformer.h) over the task's embeddings, scaled by sqrt(w) and added to sinusoidal position
// encodings (OpenNMT-py's embeddings), with a final layer norm when pre-norm. Self-attention sees the
// whole sequence (encoders: classify, squad, translation's source; padded keys hidden) or, with
// model.causal, only earlier positions (language models). model.ffn picks the feed-forward sublayer:
// relu, or the SRU paper's W SRU(x) + b.
//
// Names: layers.{i}.* as TransformerLayer's (self_attn.*, feed_forward.*, layer_norm), layer_norm.* (the
// final norm, pre-norm only). Shapes: x (L, B, w) with w = hidden_size = the task's input size.
// Carried state: none in training (each call is a whole sequence); in evaluation a causal encoder
// decodes incrementally: a TransformerEncoderState, the position reached and per layer its
// TransformerLayerState (K and V (B*H, capacity, w/H) of every earlier position and, with the SRU block,
// its c (1, B, ff)), so chunks and single tokens equal one pass over the stream (streams()). The cache is
// unbounded: attention cost grows with the stream, as a decoder's does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "nn/encoder.h"
#include "nn/transformer.h"

namespace sru::nn {

struct TransformerEncoderOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;   // w
  int64_t num_layers = 2;
  double dropout = 0.0;      // on every sublayer's output and on the embeddings
  bool bidirectional = false;  // refused: non-causal self-attention already sees both sides
  int64_t num_heads = 4;
  int64_t ff_size = 0;       // 0 = 4 w
  std::string ffn = "relu";  // relu | sru
  bool pre_norm = true;
  double attn_dropout = 0.0;
  double sru_dropout = -1.0;  // on the SRU block's output (-1 = dropout)
  bool sru_bidirectional = false;
  bool causal = false;
  DType dtype = DType::F32;

  // The layer options these keys describe (decoder layers add cross_attention and causal).
  TransformerLayerOptions layer_options() const;
};

// A causal encoder's decoding state (evaluation): the next position and each layer's caches. The next
// step writes its rows into the caches' buffers in place; reordered() copies them.
struct TransformerEncoderState : EncoderState {
  int64_t position = 0;
  std::vector<TransformerLayerState> layers;
  int64_t heads = 1;
  EncoderStatePtr reordered(const Tensor& rows) const override;
  EncoderStatePtr on(Device device) const override;
  EncoderStatePtr detached() const override;
  std::vector<Tensor> tensors() const override;  // refused: decoding state, not checkpointed
};

class TransformerEncoder : public SequenceEncoder {
 public:
  explicit TransformerEncoder(const TransformerEncoderOptions& options, Generator& gen = default_generator());
  Tensor forward_sequence(const EncoderInput& input, EncoderStatePtr& state) const override;
  EncoderStatePtr state_from(const std::vector<Tensor>& tensors) const override;
  int64_t output_size() const override { return options.hidden_size; }
  int64_t directions() const override { return 1; }
  bool streams() const override { return options.causal; }

  // sqrt(w) x + PE(positions start ..): what the first layer reads (time-major (L, B, w)).
  Tensor embed(const Tensor& x, int64_t start) const;

  TransformerEncoderOptions options;
  std::vector<std::shared_ptr<TransformerLayer>> layers;
  std::shared_ptr<LayerNorm> layer_norm;  // pre-norm only

 private:
  Generator* gen_;
};

EncoderSpec transformer_encoder();

}  // namespace sru::nn
