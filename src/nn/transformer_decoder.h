// The Transformer decoder stack of the translation model (Vaswani et al. 2017; OpenNMT-py's names) and,
// with the SSRU in place of causal self-attention, Marian's SSRU decoder (Kim et al. 2019): the two
// registry entries `transformer` and `ssru-transformer` (nn/decoder.h).
//
// Names: layers.{i}.* (nn/transformer.h's decoder layers: self_attn or ssru, context_attn,
// feed_forward, layer_norm_1, layer_norm_2), layer_norm (w) after the last layer (pre-norm only).
// State: per layer a TransformerLayerState (the self-attention's key/value cache or the SSRU's c, the
// context attention's projected memory, the SRU feed-forward's c).
#pragma once

#include <memory>
#include <vector>

#include "nn/decoder.h"
#include "nn/layers.h"

namespace sru::nn {

struct TransformerDecoderState : DecoderState {
  std::vector<TransformerLayerState> layers;
  int64_t heads = 1;
  void reorder(const Tensor& rows) override;
};

class TransformerDecoder : public Decoder {
 public:
  // args.layer with causal and cross_attention set here; self_sublayer chooses the first sublayer.
  TransformerDecoder(const DecoderArgs& args, SelfSublayerKind self_sublayer, Generator& gen);
  Tensor forward(const Tensor& x, const Tensor& self_padding, const Tensor& memory,
                 const Tensor& memory_padding) const override;
  std::unique_ptr<DecoderState> start_decoding(const Tensor& memory, const Tensor& memory_padding) const override;
  Tensor forward_step(const Tensor& x, DecoderState& state) const override;

  std::vector<std::shared_ptr<TransformerLayer>> layers;
  std::shared_ptr<LayerNorm> layer_norm;  // pre-norm only

 private:
  Tensor finish(const Tensor& h) const;
  TransformerLayerOptions options_;
};

DecoderSpec transformer_decoder();
DecoderSpec ssru_transformer_decoder();

}  // namespace sru::nn
