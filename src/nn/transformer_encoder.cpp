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

Tensor TransformerEncoder::forward_sequence(const EncoderInput& input, EncoderStatePtr& state) const {
  const Tensor& x = input.x;
  SRU_CHECK(x.defined() && x.dim() == 3 && x.size(2) == options.input_size, "Transformer: input must be (L, B, ",
            options.input_size, "), got ", x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  const int64_t n = static_cast<int64_t>(layers.size());
  // A causal stack in evaluation continues the stream through its caches (a padded batch is one pass).
  const bool decoding = options.causal && !is_training() && !input.mask_pad.defined();
  if (!decoding) {
    const Tensor pad = input.mask_pad.defined() ? transpose(input.mask_pad.to(x.device()), 0, 1) : Tensor();
    Tensor h = embed(x, 0);
    for (const auto& layer : layers) h = layer->forward(h, pad);
    state = nullptr;
    return layer_norm ? layer_norm->forward(h) : h;
  }
  const TransformerEncoderState* carried = state_as<TransformerEncoderState>(state, "Transformer");
  SRU_CHECK(!carried || static_cast<int64_t>(carried->layers.size()) == n, "Transformer: the carried state has ",
            carried ? carried->layers.size() : 0, " layers, this stack ", n);
  const int64_t position = carried ? carried->position : 0;
  Tensor h = embed(x, position);
  auto next = std::make_shared<TransformerEncoderState>();
  next->position = position + x.size(0);
  next->heads = options.num_heads;
  // The carried caches on x's device; each layer's state continues into `next`.
  const EncoderStatePtr moved = carried ? carried->on(x.device()) : nullptr;
  const auto* here = static_cast<const TransformerEncoderState*>(moved.get());
  for (int64_t i = 0; i < n; ++i) {
    TransformerLayerState layer_state = here ? here->layers[static_cast<size_t>(i)] : TransformerLayerState{};
    h = layers[i]->forward_incremental(h, layer_state);
    next->layers.push_back(std::move(layer_state));
  }
  state = next;
  return layer_norm ? layer_norm->forward(h) : h;
}

EncoderStatePtr TransformerEncoder::state_from(const std::vector<Tensor>& tensors) const {
  SRU_CHECK(tensors.empty(), "Transformer: the encoder carries no state in training, so a checkpoint holds none; got ",
            tensors.size(), " tensors");
  return nullptr;
}

namespace {

// A copy of `state` with f applied to every tensor of every layer.
template <typename F>
std::shared_ptr<TransformerEncoderState> map_layers(const TransformerEncoderState& state, F&& f) {
  auto copy = std::make_shared<TransformerEncoderState>(state);
  for (TransformerLayerState& layer : copy->layers)
    for (Tensor* t : {&layer.self.keys, &layer.self.values, &layer.ffn_c})
      if (t->defined()) *t = f(*t);
  return copy;
}

}  // namespace

EncoderStatePtr TransformerEncoderState::reordered(const Tensor& rows) const {
  auto copy = std::make_shared<TransformerEncoderState>(*this);
  for (TransformerLayerState& layer : copy->layers) layer.reorder(rows, heads);
  return copy;
}

EncoderStatePtr TransformerEncoderState::on(Device device) const {
  return map_layers(*this, [&](const Tensor& t) { return t.to(device); });
}

EncoderStatePtr TransformerEncoderState::detached() const {
  return map_layers(*this, [](const Tensor& t) { return t.detach(); });
}

std::vector<Tensor> TransformerEncoderState::tensors() const {
  SRU_FAIL("Transformer: a decoding state (evaluation) is not checkpointed");
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
