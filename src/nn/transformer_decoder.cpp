// The Transformer and SSRU-Transformer decoder stacks (see nn/transformer_decoder.h) and their registry
// entries.
#include "nn/transformer_decoder.h"

#include "ops/shape_ops.h"

namespace sru::nn {

namespace {

TransformerLayerOptions decoder_layer_options(TransformerLayerOptions o, SelfSublayerKind self_sublayer) {
  o.causal = true;
  o.cross_attention = true;
  o.sru_bidirectional = false;
  o.self_sublayer = self_sublayer;
  return o;
}

}  // namespace

void TransformerDecoderState::reorder(const Tensor& rows) {
  for (TransformerLayerState& s : layers) s.reorder(rows, heads);
}

TransformerDecoder::TransformerDecoder(const DecoderArgs& args, SelfSublayerKind self_sublayer, Generator& gen)
    : options_(decoder_layer_options(args.layer, self_sublayer)) {
  SRU_CHECK(args.num_layers >= 1, "decoder: at least one layer, got ", args.num_layers);
  for (int64_t i = 0; i < args.num_layers; ++i) {
    layers.push_back(std::make_shared<TransformerLayer>(options_, gen));
    register_module("layers." + std::to_string(i), layers.back());
  }
  if (options_.pre_norm)
    layer_norm = register_module("layer_norm", std::make_shared<LayerNorm>(options_.width, 1e-6, options_.dtype));
}

Tensor TransformerDecoder::finish(const Tensor& h) const { return layer_norm ? layer_norm->forward(h) : h; }

Tensor TransformerDecoder::forward(const Tensor& x, const Tensor& self_padding, const Tensor& memory,
                                   const Tensor& memory_padding) const {
  Tensor h = x;
  for (const auto& layer : layers) h = layer->forward(h, self_padding, memory, memory_padding);
  return finish(h);
}

std::unique_ptr<DecoderState> TransformerDecoder::start_decoding(const Tensor& memory,
                                                                 const Tensor& memory_padding) const {
  auto state = std::make_unique<TransformerDecoderState>();
  state->heads = options_.heads;
  state->layers.resize(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) layers[i]->start_decoding(state->layers[i], memory, memory_padding);
  return state;
}

Tensor TransformerDecoder::forward_step(const Tensor& x, DecoderState& state) const {
  auto* s = dynamic_cast<TransformerDecoderState*>(&state);
  SRU_CHECK(s && s->layers.size() == layers.size(), "decoder: a state this decoder did not start");
  Tensor h = x;
  for (size_t i = 0; i < layers.size(); ++i) h = layers[i]->forward_incremental(h, s->layers[i]);
  return finish(h);
}

DecoderSpec transformer_decoder() {
  return {"transformer",
          "Transformer decoder layers (Vaswani et al. 2017): causal self-attention, attention over the encoder's "
          "output, the feed-forward block of model.ffn (relu, or the SRU paper's sru), with the model's Transformer "
          "keys (heads, ff_size, pre_norm, attn_dropout). Parameters decoder.layers.{i}.*, decoder.layer_norm.",
          [](const DecoderArgs& a, Generator& gen) -> std::shared_ptr<Decoder> {
            return std::make_shared<TransformerDecoder>(a, SelfSublayerKind::Attention, gen);
          }};
}

DecoderSpec ssru_transformer_decoder() {
  return {"ssru-transformer",
          "Marian's SSRU decoder (Kim et al. 2019): as transformer with each layer's self-attention replaced by a "
          "simplified SRU (f = sigmoid(W_f x + b_f), c = f c + (1 - f) W x, h = relu(c)), so a decoding step costs "
          "O(1) in the target length. Parameters decoder.layers.{i}.ssru.{weight,forget_bias} in place of "
          "self_attn.*.",
          [](const DecoderArgs& a, Generator& gen) -> std::shared_ptr<Decoder> {
            return std::make_shared<TransformerDecoder>(a, SelfSublayerKind::Ssru, gen);
          }};
}

}  // namespace sru::nn
