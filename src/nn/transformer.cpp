// The Transformer layer (see nn/transformer.h): self-attention through the shared module, the ReLU
// feed-forward block, residuals and layer norms in pre- or post-norm order.
#include "nn/transformer.h"

#include "ops/dropout.h"
#include "ops/elementwise.h"

namespace sru::nn {

namespace {

// The feed-forward block's own module, so its names nest as OpenNMT-py's PositionwiseFeedForward.
class FeedForwardNames : public Module {
 public:
  FeedForwardNames(std::shared_ptr<Linear> w1, std::shared_ptr<Linear> w2, std::shared_ptr<LayerNorm> norm) {
    register_module("w_1", std::move(w1));
    register_module("w_2", std::move(w2));
    register_module("layer_norm", std::move(norm));
  }
};

}  // namespace

TransformerLayer::TransformerLayer(const TransformerLayerOptions& o, Generator& gen) : options_(o), gen_(&gen) {
  SRU_CHECK(o.width > 0 && o.heads > 0 && o.width % o.heads == 0, "Transformer layer: width (", o.width,
            ") must be positive and divisible by the heads (", o.heads, ")");
  SRU_CHECK(o.dropout >= 0 && o.dropout < 1 && o.attn_dropout >= 0 && o.attn_dropout < 1,
            "Transformer layer: dropouts must be in [0, 1), got ", o.dropout, " and ", o.attn_dropout);
  if (options_.ff_size == 0) options_.ff_size = 4 * o.width;
  MultiHeadAttentionOptions mo;
  mo.query_size = mo.model_size = mo.output_size = o.width;
  mo.heads = o.heads;
  mo.attn_dropout = o.attn_dropout;
  mo.dtype = o.dtype;
  self_attn = register_module("self_attn", std::make_shared<MultiHeadAttention>(mo, gen));
  w_1 = std::make_shared<Linear>(o.width, options_.ff_size, true, o.dtype, gen);
  w_2 = std::make_shared<Linear>(options_.ff_size, o.width, true, o.dtype, gen);
  ff_layer_norm = std::make_shared<LayerNorm>(o.width, 1e-6, o.dtype);
  register_module("feed_forward", std::make_shared<FeedForwardNames>(w_1, w_2, ff_layer_norm));
  layer_norm = register_module("layer_norm", std::make_shared<LayerNorm>(o.width, 1e-6, o.dtype));
}

Tensor TransformerLayer::drop(const Tensor& t) const {
  return dropout(t, options_.dropout, is_training(), *gen_, 1);  // time-major: the batch is dim 1
}

Tensor TransformerLayer::feed_forward(const Tensor& y) const {
  const Tensor in = options_.pre_norm ? ff_layer_norm->forward(y) : y;
  const Tensor out = y + drop(w_2->forward(drop(relu(w_1->forward(in)))));
  return options_.pre_norm ? out : ff_layer_norm->forward(out);
}

Tensor TransformerLayer::forward(const Tensor& x, const Tensor& key_padding) const {
  SRU_CHECK(x.defined() && x.dim() == 3 && x.size(2) == options_.width, "Transformer layer: input must be (L, B, ",
            options_.width, "), got ", x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  const AttentionMask mask = options_.causal ? AttentionMask::causal(0, -1, key_padding)
                             : key_padding.defined() ? AttentionMask::padding(key_padding)
                                                     : AttentionMask::none();
  const Tensor in = options_.pre_norm ? layer_norm->forward(x) : x;
  Tensor y = x + drop(self_attn->forward(in, Tensor(), mask));
  if (!options_.pre_norm) y = layer_norm->forward(y);
  return feed_forward(y);
}

Tensor TransformerLayer::forward_incremental(const Tensor& x, KeyValueCache& cache) const {
  SRU_CHECK(options_.causal, "Transformer layer: decoding step by step needs causal self-attention");
  SRU_CHECK(x.defined() && x.dim() == 3 && x.size(2) == options_.width, "Transformer layer: input must be (L, B, ",
            options_.width, "), got ", x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  const Tensor in = options_.pre_norm ? layer_norm->forward(x) : x;
  const Tensor q = self_attn->project_queries(in);
  Tensor y = x + drop(self_attn->project_output(self_attn->attend_incremental(q, in, cache)));
  if (!options_.pre_norm) y = layer_norm->forward(y);
  return feed_forward(y);
}

}  // namespace sru::nn
