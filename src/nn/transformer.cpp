// Transformer layers (see nn/transformer.h): self- and context attention through the shared module, the
// ReLU or SRU feed-forward block, residuals and layer norms in pre- or post-norm order, decoding state,
// and the sinusoidal position table.
#include "nn/transformer.h"

#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "ops/dropout.h"
#include "ops/matmul.h"
#include "ops/ssru_recurrence.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/shape_ops.h"

namespace sru::nn {

namespace {

MultiHeadAttentionOptions attention_options(const TransformerLayerOptions& o) {
  MultiHeadAttentionOptions mo;
  mo.query_size = mo.model_size = mo.output_size = o.width;
  mo.heads = o.heads;
  mo.attn_dropout = o.attn_dropout;
  mo.dtype = o.dtype;
  return mo;
}

}  // namespace

// ---- feed-forward ----

FeedForward::FeedForward(const TransformerLayerOptions& o, Generator& gen)
    : kind(o.ffn), inner_dropout_(o.ffn == FeedForwardKind::Sru && o.sru_dropout >= 0 ? o.sru_dropout : o.dropout),
      gen_(&gen) {
  const int64_t ff = o.ff_size;
  if (kind == FeedForwardKind::Relu) {
    w_1 = register_module("w_1", std::make_shared<Linear>(o.width, ff, true, o.dtype, gen));
    w_2 = register_module("w_2", std::make_shared<Linear>(ff, o.width, true, o.dtype, gen));
  } else {
    SRUOptions so;
    so.input_size = o.width;
    so.hidden_size = ff;
    so.num_layers = 1;
    so.bidirectional = o.sru_bidirectional;
    so.has_skip_term = false;  // W SRU(x) + b: the residual around the sublayer is the skip
    so.dtype = o.dtype;
    sru = register_module("sru", std::make_shared<SRU>(so, gen));
    w_2 = register_module("w_2", std::make_shared<Linear>(sru->output_size(), o.width, true, o.dtype, gen));
  }
  layer_norm = register_module("layer_norm", std::make_shared<LayerNorm>(o.width, 1e-6, o.dtype));
}

Tensor FeedForward::drop_inner(const Tensor& t) const {
  return dropout(t, inner_dropout_, is_training(), *gen_, 1);  // time-major: the batch is dim 1
}

Tensor FeedForward::forward(const Tensor& z, const Tensor& mask_pad) const {
  if (kind == FeedForwardKind::Relu) return w_2->forward(drop_inner(w_1->forward_relu(z)));
  return w_2->forward(drop_inner(sru->forward(z, Tensor(), mask_pad).first));
}

Tensor FeedForward::forward_step(const Tensor& z, Tensor& c) const {
  if (kind == FeedForwardKind::Relu) return forward(z);
  SRU_CHECK(!sru->options.bidirectional, "feed-forward: a bidirectional SRU cannot decode step by step");
  auto [h, c_last] = sru->forward(z, c);
  c = c_last;
  return w_2->forward(drop_inner(h));
}

// ---- SSRU sublayer ----

SsruSublayer::SsruSublayer(int64_t width, DType dtype, Generator& gen) {
  SRU_CHECK(width > 0, "SSRU sublayer: width must be positive, got ", width);
  // Glorot-uniform W and W_f (each (w, w): limit sqrt(6 / 2w)) and a zero forget bias, as Marian's.
  const double limit = std::sqrt(3.0 / static_cast<double>(width));
  weight = register_parameter("weight", Tensor::uniform({2 * width, width}, -limit, limit, dtype, gen));
  forget_bias = register_parameter("forget_bias", Tensor::zeros({width}, dtype));
}

Tensor SsruSublayer::forward(const Tensor& x, const Tensor& mask_pad, Tensor& c) const {
  // Under autocast the product answers bf16; the recurrence runs in the parameters' dtype.
  const Tensor U = cast(linear(x, weight, Tensor()), weight.dtype());
  const Tensor pad = mask_pad.defined() ? mask_pad.to(x.device()) : mask_pad;
  auto [h, c_last] = ssru_recurrence(U, forget_bias, c, pad);
  c = c_last;
  return h;
}

// ---- decoding state ----

void TransformerLayerState::reorder(const Tensor& rows, int64_t heads) {
  self.reorder(rows, heads);
  const Tensor index = rows.to(context_keys.defined() ? context_keys.device() : rows.device());
  const auto gather_heads = [&](const Tensor& t) {
    if (!t.defined()) return t;
    const int64_t B = t.size(0) / heads;
    return reshape(index_select(t.view({B, heads * t.size(1) * t.size(2)}), 0, index),
                   {index.numel() * heads, t.size(1), t.size(2)});
  };
  context_keys = gather_heads(context_keys);
  context_values = gather_heads(context_values);
  if (memory_padding.defined()) memory_padding = index_select(memory_padding, 0, index.to(memory_padding.device()));
  if (ffn_c.defined()) ffn_c = index_select(ffn_c, 1, index.to(ffn_c.device()));
  if (ssru_c.defined()) ssru_c = index_select(ssru_c, 0, index.to(ssru_c.device()));
}

// ---- layer ----

TransformerLayer::TransformerLayer(const TransformerLayerOptions& o, Generator& gen) : options_(o), gen_(&gen) {
  SRU_CHECK(o.width > 0 && o.heads > 0 && o.width % o.heads == 0, "Transformer layer: width (", o.width,
            ") must be positive and divisible by the heads (", o.heads, ")");
  SRU_CHECK(o.dropout >= 0 && o.dropout < 1 && o.attn_dropout >= 0 && o.attn_dropout < 1 && o.sru_dropout < 1,
            "Transformer layer: dropouts must be in [0, 1), got ", o.dropout, ", ", o.attn_dropout, " and ",
            o.sru_dropout);
  SRU_CHECK(!(o.causal && o.sru_bidirectional), "Transformer layer: a causal layer cannot have a bidirectional SRU");
  const bool ssru_self = o.self_sublayer == SelfSublayerKind::Ssru;
  SRU_CHECK(!ssru_self || o.causal, "Transformer layer: the SSRU sublayer reads left to right (causal layers only)");
  if (options_.ff_size == 0) options_.ff_size = 4 * o.width;
  if (ssru_self) ssru = register_module("ssru", std::make_shared<SsruSublayer>(o.width, o.dtype, gen));
  else self_attn = register_module("self_attn", std::make_shared<MultiHeadAttention>(attention_options(options_), gen));
  if (o.cross_attention)
    context_attn = register_module("context_attn", std::make_shared<MultiHeadAttention>(attention_options(options_), gen));
  feed_forward = register_module("feed_forward", std::make_shared<FeedForward>(options_, gen));
  if (o.cross_attention) {
    layer_norm = register_module("layer_norm_1", std::make_shared<LayerNorm>(o.width, 1e-6, o.dtype));
    layer_norm_2 = register_module("layer_norm_2", std::make_shared<LayerNorm>(o.width, 1e-6, o.dtype));
  } else {
    layer_norm = register_module("layer_norm", std::make_shared<LayerNorm>(o.width, 1e-6, o.dtype));
  }
  w_1 = feed_forward->w_1;
  w_2 = feed_forward->w_2;
  ff_layer_norm = feed_forward->layer_norm;
}

Tensor TransformerLayer::drop(const Tensor& t) const {
  return dropout(t, options_.dropout, is_training(), *gen_, 1);  // time-major: the batch is dim 1
}

// x + drop(sublayer) with the post-norm's normalisation after the sum (pre-norm normalised the input).
Tensor TransformerLayer::residual(const Tensor& x, const Tensor& sublayer_out, const std::shared_ptr<LayerNorm>& norm) const {
  const Tensor y = x + drop(sublayer_out);
  return options_.pre_norm ? y : norm->forward(y);
}

Tensor TransformerLayer::forward(const Tensor& x, const Tensor& key_padding, const Tensor& memory,
                                 const Tensor& memory_padding) const {
  SRU_CHECK(x.defined() && x.dim() == 3 && x.size(2) == options_.width, "Transformer layer: input must be (L, B, ",
            options_.width, "), got ", x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  SRU_CHECK(memory.defined() == options_.cross_attention, "Transformer layer: ",
            options_.cross_attention ? "a decoder layer needs the encoder's output" : "only decoder layers read a memory");
  const auto pre = [&](const std::shared_ptr<LayerNorm>& norm, const Tensor& t) {
    return options_.pre_norm ? norm->forward(t) : t;
  };
  // The recurrent sublayers (SSRU, SRU feed-forward) keep their state through padded steps and output 0
  // there; attention and the ReLU block read no (L, B) mask: no transposed copy for them.
  const bool reads_padding = options_.ffn == FeedForwardKind::Sru || ssru;
  const Tensor mask_pad = reads_padding && key_padding.defined() ? transpose(key_padding, 0, 1) : Tensor();
  Tensor y;
  if (ssru) {
    Tensor c;
    y = residual(x, ssru->forward(pre(layer_norm, x), mask_pad, c), layer_norm);
  } else {
    const AttentionMask self_mask = options_.causal ? AttentionMask::causal(0, -1, key_padding)
                                    : key_padding.defined() ? AttentionMask::padding(key_padding)
                                                            : AttentionMask::none();
    y = residual(x, self_attn->forward(pre(layer_norm, x), Tensor(), self_mask), layer_norm);
  }
  if (options_.cross_attention) {
    const AttentionMask context_mask = memory_padding.defined() ? AttentionMask::padding(memory_padding) : AttentionMask::none();
    y = residual(y, context_attn->forward(pre(layer_norm_2, y), memory, context_mask), layer_norm_2);
  }
  const Tensor ffn_pad = options_.ffn == FeedForwardKind::Sru ? mask_pad : Tensor();
  return residual(y, feed_forward->forward(pre(ff_layer_norm, y), ffn_pad), ff_layer_norm);
}

void TransformerLayer::start_decoding(TransformerLayerState& state, const Tensor& memory,
                                      const Tensor& memory_padding) const {
  SRU_CHECK(options_.cross_attention, "Transformer layer: only decoder layers read a memory");
  const auto [k, v] = context_attn->project_keys_values(memory);
  state.context_keys = split_heads(k, options_.heads);
  state.context_values = split_heads(v, options_.heads);
  state.memory_padding = memory_padding;
}

Tensor TransformerLayer::forward_incremental(const Tensor& x, TransformerLayerState& state) const {
  SRU_CHECK(options_.causal, "Transformer layer: decoding step by step needs causal self-attention");
  SRU_CHECK(x.defined() && x.dim() == 3 && x.size(2) == options_.width, "Transformer layer: input must be (L, B, ",
            options_.width, "), got ", x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  const auto pre = [&](const std::shared_ptr<LayerNorm>& norm, const Tensor& t) {
    return options_.pre_norm ? norm->forward(t) : t;
  };
  const Tensor in = pre(layer_norm, x);
  Tensor y;
  if (ssru) {
    y = residual(x, ssru->forward(in, Tensor(), state.ssru_c), layer_norm);
  } else {
    const Tensor attended = self_attn->attend_incremental(self_attn->project_queries(in), in, state.self);
    y = residual(x, self_attn->project_output(attended), layer_norm);
  }
  if (options_.cross_attention) {
    SRU_CHECK(state.context_keys.defined(), "Transformer layer: start_decoding before the first decoder step");
    const int64_t H = options_.heads;
    const Tensor q = context_attn->project_queries(pre(layer_norm_2, y));
    const AttentionMask mask = state.memory_padding.defined() ? AttentionMask::padding(state.memory_padding)
                                                              : AttentionMask::none();
    const double scale = 1.0 / std::sqrt(static_cast<double>(options_.width / H));
    const Tensor context = merge_heads(
        attend_heads(split_heads(q, H), state.context_keys, state.context_values, H, mask, scale), H);
    y = residual(y, context_attn->project_output(context), layer_norm_2);
  }
  return residual(y, feed_forward->forward_step(pre(ff_layer_norm, y), state.ffn_c), ff_layer_norm);
}

// ---- positions ----

namespace {

// The (length, dim) table of positions start, ..., start + length - 1, built on the host.
Tensor position_rows(int64_t start, int64_t length, int64_t dim, DType dtype, Device device) {
  std::vector<double> table(length * dim);
  for (int64_t t = 0; t < length; ++t)
    for (int64_t i = 0; i < dim; i += 2) {
      const double angle = static_cast<double>(start + t) * std::exp(-std::log(10000.0) * static_cast<double>(i) / dim);
      table[t * dim + i] = std::sin(angle);
      table[t * dim + i + 1] = std::cos(angle);
    }
  return Tensor::from_vector(table, {length, dim}, dtype).to(device);
}

// The row index t for each of (length, batch) positions: t repeated batch times, t = 0, ..., length - 1.
Tensor row_of_position(int64_t length, int64_t batch, Device device) {
  std::vector<int64_t> row_of(length * batch);
  for (int64_t t = 0; t < length; ++t)
    for (int64_t b = 0; b < batch; ++b) row_of[t * batch + b] = t;
  return Tensor::from_vector(row_of, {length * batch}, DType::I64).to(device);
}

// Tables of positions from 0 and row indices, made once per shape on their device and kept for the
// process: a training step's positions then cost no host-to-device copy, so that the step can be
// captured into a CUDA graph (train.cuda_graphs), whose replays read these tensors where they were.
// Nothing is ever freed (a graph may hold any of them): tables grow by doubling (predecessors kept;
// their sum is below twice the largest), and an index is L x B i64 per (L, B) met: training and
// evaluation batch shapes, which repeat (a few MB for a run's shapes).
class PositionCache {
 public:
  Tensor rows(int64_t length, int64_t dim, DType dtype, Device device) {
    const std::lock_guard<std::mutex> lock(mutex_);
    Tensor& table = tables_[std::make_tuple(dim, static_cast<int>(dtype), device.str())];
    if (!table.defined() || table.size(0) < length) {
      if (table.defined()) kept_.push_back(table);
      table = position_rows(0, std::max<int64_t>(length, table.defined() ? 2 * table.size(0) : 64), dim, dtype, device);
    }
    return table;
  }
  Tensor index(int64_t length, int64_t batch, Device device) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto key = std::make_tuple(length, batch, device.str());
    const auto found = indices_.find(key);
    if (found != indices_.end()) return found->second;
    return indices_.emplace(key, row_of_position(length, batch, device)).first->second;
  }

 private:
  std::mutex mutex_;
  std::map<std::tuple<int64_t, int, std::string>, Tensor> tables_;
  std::vector<Tensor> kept_;
  std::map<std::tuple<int64_t, int64_t, std::string>, Tensor> indices_;
};

PositionCache& position_cache() {
  static auto* cache = new PositionCache();  // never destroyed: CUDA tensors must not outlive the runtime's teardown
  return *cache;
}

}  // namespace

Tensor sinusoidal_positions(int64_t start, int64_t length, int64_t batch, int64_t dim, DType dtype, Device device) {
  SRU_CHECK(dim > 0 && dim % 2 == 0 && start >= 0 && length >= 0 && batch >= 0,
            "sinusoidal positions: dim must be even and positive, got ", dim);
  // The (length, dim) table, then its rows repeated over the batch where the tensor lives: building all
  // length x batch x dim values on the host held a GPU translation step's host for 15 ms of its 58 (an
  // H200, 2026-11-28, srubench train-epoch --host-profile). Whole sequences (start 0) take the cached
  // table and index; a decoding step's single position is built each time.
  if (length == 0 || batch == 0) return Tensor::zeros({length, batch, dim}, dtype, device);
  const Tensor rows = start == 0 ? position_cache().rows(length, dim, dtype, device)
                                 : position_rows(start, length, dim, dtype, device);
  if (batch == 1) return reshape(rows.narrow0(0, length), {length, 1, dim});
  const Tensor index =
      start == 0 ? position_cache().index(length, batch, device) : row_of_position(length, batch, device);
  return reshape(index_select(rows, 0, index), {length, batch, dim});
}

Tensor scaled_with_positions(const Tensor& x, int64_t start) {
  SRU_CHECK(x.defined() && x.dim() == 3, "Transformer embeddings: expected (L, B, w), got ",
            x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  const int64_t L = x.size(0), B = x.size(1), w = x.size(2);
  const Tensor scaled = x * std::sqrt(static_cast<double>(w));
  // A decoding step (one position) adds one (w) row, broadcast over the batch, rather than building B
  // copies on the host every step.
  if (L == 1) return scaled + reshape(sinusoidal_positions(start, 1, 1, w, x.dtype(), x.device()), {w});
  return scaled + sinusoidal_positions(start, L, B, w, x.dtype(), x.device());
}

}  // namespace sru::nn
