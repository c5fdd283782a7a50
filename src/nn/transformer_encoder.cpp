// The Transformer sequence encoder (see nn/transformer_encoder.h): embeddings scaled and positioned, the
// layer stack, incremental decoding state for causal stacks, and the registry entry.
#include "nn/transformer_encoder.h"

#include <cmath>
#include <limits>

#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/shape_ops.h"

namespace sru::nn {

TransformerLayerOptions TransformerEncoderOptions::layer_options() const {
  TransformerLayerOptions o;
  o.width = hidden_size;
  o.heads = num_heads;
  o.ff_size = ff_size;
  o.dropout = dropout;
  o.attn_dropout = attn_dropout;
  o.pre_norm = pre_norm;
  o.causal = causal;
  o.ffn = ffn == "sru" ? FeedForwardKind::Sru : FeedForwardKind::Relu;
  o.sru_dropout = sru_dropout;
  o.sru_bidirectional = sru_bidirectional;
  o.dtype = dtype;
  return o;
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderOptions& given, Generator& gen)
    : options(given), gen_(&gen) {
  const TransformerEncoderOptions& o = options;
  SRU_CHECK(o.hidden_size > 0 && o.num_layers > 0, "Transformer: hidden_size and num_layers must be positive, got ",
            o.hidden_size, " and ", o.num_layers);
  SRU_CHECK(o.input_size == o.hidden_size, "Transformer: the input (model.embedding_size, ", o.input_size,
            ") must have the layers' width (model.hidden_size, ", o.hidden_size, ")");
  SRU_CHECK(!o.bidirectional, "Transformer: model.bidirectional does not apply (self-attention sees both sides "
            "unless model.causal is true)");
  SRU_CHECK(o.hidden_size % 2 == 0, "Transformer: model.hidden_size must be even (sinusoidal positions), got ",
            o.hidden_size);
  SRU_CHECK(o.hidden_size % o.num_heads == 0, "Transformer: model.num_heads (", o.num_heads,
            ") must divide model.hidden_size (", o.hidden_size, ")");
  for (int64_t i = 0; i < o.num_layers; ++i)
    layers.push_back(register_module("layers." + std::to_string(i), std::make_shared<TransformerLayer>(o.layer_options(), gen)));
  if (o.pre_norm) layer_norm = register_module("layer_norm", std::make_shared<LayerNorm>(o.hidden_size, 1e-6, o.dtype));
}

Tensor TransformerEncoder::embed(const Tensor& x, int64_t start) const {
  return dropout(scaled_with_positions(x, start), options.dropout, is_training(), *gen_, 1);  // batch dim 1
}

Tensor TransformerEncoder::forward_sequence(const EncoderInput& input, std::vector<Tensor>& state) const {
  const Tensor& x = input.x;
  SRU_CHECK(x.defined() && x.dim() == 3 && x.size(2) == options.input_size, "Transformer: input must be (L, B, ",
            options.input_size, "), got ", x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  const int64_t n = static_cast<int64_t>(layers.size());
  const bool sru_block = options.ffn == "sru";
  const size_t per_layer = sru_block ? 3 : 2;
  // A causal stack in evaluation continues the stream through its caches (a padded batch is one pass).
  const bool decoding = options.causal && !is_training() && !input.mask_pad.defined();
  if (!decoding) {
    const Tensor pad = input.mask_pad.defined() ? transpose(input.mask_pad.to(x.device()), 0, 1) : Tensor();
    Tensor h = embed(x, 0);
    for (const auto& layer : layers) h = layer->forward(h, pad);
    state.clear();
    return layer_norm ? layer_norm->forward(h) : h;
  }
  SRU_CHECK(state.empty() || state.size() == 1 + per_layer * n, "Transformer: the carried state must hold ",
            1 + per_layer * n, " tensors (the position, then K, V", sru_block ? ", c" : "", " of each layer), got ",
            state.size());
  const int64_t position = state.empty() ? 0 : state[0].to(Device::cpu()).to_vector<int64_t>().at(0);
  Tensor h = embed(x, position);
  std::vector<Tensor> out = {Tensor::from_vector(std::vector<int64_t>{position + x.size(0)}, {1})};
  for (int64_t i = 0; i < n; ++i) {
    TransformerLayerState layer_state;
    if (!state.empty()) {
      layer_state.self.load(state, 1 + per_layer * i, x.device());
      layer_state.self.length = position;
      if (sru_block) layer_state.ffn_c = state[3 + per_layer * i].to(x.device());
    }
    h = layers[i]->forward_incremental(h, layer_state);
    layer_state.self.store(out);
    if (sru_block) out.push_back(layer_state.ffn_c);
  }
  state = std::move(out);
  return layer_norm ? layer_norm->forward(h) : h;
}

void TransformerEncoder::reorder_state(std::vector<Tensor>& state, const Tensor& rows) const {
  if (state.empty()) return;
  const size_t per_layer = options.ffn == "sru" ? 3 : 2;
  for (size_t i = 0; i < layers.size(); ++i) {
    KeyValueCache::reorder_in_state(state, 1 + per_layer * i, rows, options.num_heads);
    if (per_layer == 3) state[3 + per_layer * i] = index_select(state[3 + per_layer * i], 1, rows.to(state[3 + per_layer * i].device()));
  }
}

namespace {

std::vector<config::Section> transformer_fields(TransformerEncoderOptions& o) {
  using namespace config;
  return {{"model", "", {
      int_field("num_heads", &o.num_heads, "Attention heads (must divide hidden_size)", 1),
      int_field("ff_size", &o.ff_size, "Inner size of the feed-forward sublayer (0 = 4 x hidden_size)", 0),
      string_field("ffn", &o.ffn, "Feed-forward sublayer: relu (W2 relu(W1 x)) or sru (W SRU(x) + b, the SRU paper's)",
                   {"relu", "sru"}),
      bool_field("pre_norm", &o.pre_norm, "Layer norm before each sublayer (false: after each residual sum)"),
      real_field("attn_dropout", &o.attn_dropout, "Dropout on the attention weights", 0, 0.99),
      real_field("sru_dropout", &o.sru_dropout, "Dropout on the SRU sublayer's output (-1 = model.dropout)", -1, 0.99),
      bool_field("sru_bidirectional", &o.sru_bidirectional, "The SRU sublayer reads both directions (non-causal stacks)"),
      bool_field("causal", &o.causal, "Each position attends to earlier ones only (language models)")}}};
}

}  // namespace

EncoderSpec transformer_encoder() {
  return {"transformer",
          "Transformer layers (Vaswani et al. 2017; OpenNMT-py's names, pre- or post-norm) over the embeddings with "
          "sinusoidal positions; model.ffn: sru gives the SRU paper's feed-forward sublayer W SRU(x) + b.",
          [] { return config::Options::of(TransformerEncoderOptions{}, &transformer_fields); },
          [](const EncoderArgs& a, const config::Options& options, Generator& gen) -> std::shared_ptr<SequenceEncoder> {
            return std::make_shared<TransformerEncoder>(with_common_args(options.as<TransformerEncoderOptions>(), a), gen);
          },
          {{"model.causal=true"},
           {"model.causal=true", "model.ffn=sru", "model.num_heads=2"},
           {"model.causal=true", "model.pre_norm=false", "model.ff_size=6"},
           {"model.ffn=sru", "model.sru_bidirectional=true"}}};
}

}  // namespace sru::nn
