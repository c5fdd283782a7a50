// SRU++ layers and stack (see nn/srupp.h): the attention and projected-linear transforms that compute
// U, the layer around the fused SRU recurrence, the stack with its carried memory, and the registry entry.
#include "nn/srupp.h"

#include <cmath>
#include <limits>

#include "nn/attention.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/masked_softmax.h"
#include "ops/matmul.h"
#include "ops/select.h"
#include "ops/shape_ops.h"
#include "ops/sru_recurrence.h"

namespace sru::nn {

namespace {

// torch.nn.init.xavier_uniform_ of a (fan_out, fan_in) weight.
void xavier_uniform(Tensor w, Generator& gen) {
  const double bound = std::sqrt(6.0 / static_cast<double>(w.size(0) + w.size(1)));
  w.copy_(Tensor::uniform(w.shape(), -bound, bound, w.dtype(), gen));
}

std::shared_ptr<Linear> linear_without_bias(int64_t in, int64_t out, const SRUppOptions& o, Generator& gen) {
  return std::make_shared<Linear>(in, out, false, o.dtype, gen);
}

// Refuses x of the wrong rank or width, naming who reads it.
void check_input(const Tensor& x, int64_t width, const char* who) {
  SRU_CHECK(x.defined() && x.dim() == 3 && x.size(2) == width, who, ": input must be (L, B, ", width, "), got ",
            x.defined() ? shape_str(x.shape()) : std::string("undefined"));
}

}  // namespace

double srupp_proj_dropout(const SRUppOptions& o) { return o.proj_dropout < 0 ? o.dropout : o.proj_dropout; }

bool srupp_layer_attends(const SRUppOptions& o, int64_t i) {
  if (o.attention_last_n_layers >= 0) return o.num_layers - i <= o.attention_last_n_layers;
  return (i + 1) % o.attention_every_n_layers == 0;
}

// ---- attention transform ----

SRUppAttention::SRUppAttention(int64_t in_features, int64_t out_features, int64_t proj_features,
                               const SRUppOptions& o, Generator& gen)
    : num_heads(o.num_heads), dropout(srupp_proj_dropout(o)), attn_dropout(o.attn_dropout),
      init_alpha(o.rezero_init_alpha), gen_(&gen) {
  SRU_CHECK(proj_features % o.num_heads == 0, "SRU++: proj_size (", proj_features, ") must be divisible by num_heads (",
            o.num_heads, ")");
  alpha = register_parameter("alpha", Tensor::zeros({1}, o.dtype));
  MultiHeadAttentionOptions mo;
  mo.query_size = in_features;
  mo.model_size = proj_features;
  mo.heads = o.num_heads;
  mo.bias = false;
  mo.keys_from_queries = true;
  mo.attn_dropout = o.attn_dropout;
  mo.names.query = "linear1";
  mo.names.key_value = "linear2";
  mo.dtype = o.dtype;
  attention = register_module("", std::make_shared<MultiHeadAttention>(mo, gen));
  linear1 = attention->query;
  linear2 = attention->key_value;
  linear3 = register_module("linear3", linear_without_bias(proj_features, out_features, o, gen));
  if (o.attn_layer_norm) layer_norm = register_module("layer_norm", std::make_shared<LayerNorm>(proj_features, 1e-5, o.dtype));
  reset_parameters(gen);
}

void SRUppAttention::reset_parameters(Generator& gen) {
  for (const auto& linear : {linear1, linear2, linear3}) xavier_uniform(linear->weight, gen);
  alpha.fill_(init_alpha);
  if (dropout > 0) linear3->weight.mul_(std::sqrt(1.0 - dropout));
}

Tensor SRUppAttention::forward(const Tensor& x, const AttentionContext& ctx) const {
  check_input(x, linear1->weight.size(1), "SRU++ attention");
  const int64_t L = x.size(0), B = x.size(1);
  const int64_t M = ctx.memory.defined() ? ctx.memory.size(0) : 0;
  if (M > 0)
    SRU_CHECK(ctx.memory.dim() == 3 && ctx.memory.size(1) == B && ctx.memory.size(2) == x.size(2),
              "SRU++ attention: memory must be (M, B, n_in) = (M, ", B, ", ", x.size(2), ") for input ",
              shape_str(x.shape()), ", got ", shape_str(ctx.memory.shape()));
  const Tensor q = attention->project_queries(x);  // (L, B, d')
  Tensor attended;
  if (ctx.cache) {
    // Decoding: K and V of the new rows join the cache of earlier ones (no recomputation of the memory).
    const Tensor cache_source = ctx.cache_input.defined() ? attention->project_queries(ctx.cache_input) : Tensor();
    attended = attention->attend_incremental(q, q, *ctx.cache, ctx.window, cache_source);
  } else {
    // Keys and values come from [memory | x]; the queries are the rows of x. The memory's projection is
    // recomputed every segment (it is kept as the layer's input), as the reference does, so it follows
    // the weights as they train. It is projected apart from x: the memory is detached, so its product's
    // backward computes W1's gradient only, not an input gradient for M rows that would be dropped.
    const Tensor z = M > 0 ? concat({attention->project_queries(ctx.memory), q}, 0) : q;  // (M + L, B, d')
    const auto [k, v] = attention->project_keys_values(z);
    AttentionMask mask;
    if (ctx.causal) mask = AttentionMask::causal(M, ctx.window, ctx.key_padding);
    else if (ctx.key_padding.defined()) mask = AttentionMask::padding(ctx.key_padding);
    attended = attention->attend(q, k, v, mask);  // (L, B, d')
  }
  (void)L;
  Tensor y = q + attended * alpha;
  if (layer_norm) y = layer_norm->forward(y);
  return linear3->forward(sru::dropout(y, dropout, is_training(), *gen_, 1));  // (L, B, d'): batch dim 1
}

void SRUppAttention::prime_cache(const Tensor& memory, KeyValueCache& cache) const {
  check_input(memory, linear1->weight.size(1), "SRU++ attention memory");
  const auto [k, v] = attention->project_keys_values(attention->project_queries(memory));
  cache.assign(split_heads(k, num_heads), split_heads(v, num_heads));
}

// ---- projected linear transform (layers without attention) ----

SRUppProjectedLinear::SRUppProjectedLinear(int64_t in_features, int64_t out_features, int64_t proj_features,
                                           const SRUppOptions& o, Generator& gen)
    : dropout(srupp_proj_dropout(o)), gen_(&gen) {
  linear1 = register_module("linear1", linear_without_bias(in_features, proj_features, o, gen));
  linear2 = register_module("linear2", linear_without_bias(proj_features, out_features, o, gen));
  if (o.attn_layer_norm) layer_norm = register_module("layer_norm", std::make_shared<LayerNorm>(proj_features, 1e-5, o.dtype));
  reset_parameters(gen);
}

void SRUppProjectedLinear::reset_parameters(Generator& gen) {
  xavier_uniform(linear1->weight, gen);
  xavier_uniform(linear2->weight, gen);
  if (dropout > 0) linear2->weight.mul_(std::sqrt(1.0 - dropout));
}

Tensor SRUppProjectedLinear::forward(const Tensor& x, const AttentionContext&) const {
  check_input(x, linear1->weight.size(1), "SRU++ projected linear");
  Tensor y = linear1->forward(x);
  if (layer_norm) y = layer_norm->forward(y);
  return linear2->forward(sru::dropout(y, dropout, is_training(), *gen_, 1));  // (L, B, d'): batch dim 1
}

// ---- layer ----

SRUppLayer::SRUppLayer(int64_t n_in, const SRUppOptions& o, bool attention, double layer_dropout, Generator& gen)
    : input_size(n_in), dropout(layer_dropout), options(o), gen_(&gen) {
  output_size = (o.bidirectional ? 2 : 1) * o.hidden_size;
  k = n_in == output_size ? 3 : 4;
  const int64_t P = o.proj_size;
  // The transform is built first so that its weights draw from the generator before weight_c. (The
  // reference registers transform_module before weight_c too; a state_dict load matches names, not order.)
  if (attention)
    transform_module = std::make_shared<SRUppAttention>(n_in, output_size * k, P, o, gen);
  else
    transform_module = std::make_shared<SRUppProjectedLinear>(n_in, output_size * k, P, o, gen);
  weight_c = register_parameter("weight_c", Tensor::empty({2 * output_size}, o.dtype));
  bias = register_parameter("bias", Tensor::empty({2 * output_size}, o.dtype));
  scale_x = register_buffer("scale_x", Tensor::empty({1}, o.dtype));
  register_module("transform_module", transform_module);
  if (o.layer_norm)
    layer_norm = register_module("layer_norm", std::make_shared<LayerNorm>(o.normalize_after ? output_size : n_in,
                                                                           1e-5, o.dtype));
  reset_parameters();
}

void SRUppLayer::reset_parameters() {
  bias.zero_();
  bias.narrow0(output_size, output_size).fill_(options.highway_bias);
  scale_x.fill_(options.rescale ? std::sqrt(1.0 + 2.0 * std::exp(options.highway_bias)) : 1.0);
  weight_c.copy_(Tensor::uniform(weight_c.shape(), -options.weight_c_init, options.weight_c_init, weight_c.dtype(), *gen_));
}

void SRUppLayer::prime_cache(const Tensor& memory, KeyValueCache& cache) const {
  const auto* attention = dynamic_cast<const SRUppAttention*>(transform_module.get());
  SRU_CHECK(attention, "SRU++: prime_cache on a layer without attention");
  const bool normalize = layer_norm && !options.normalize_after && options.normalize_memory;
  attention->prime_cache(normalize ? layer_norm->forward(memory) : memory, cache);
}

std::pair<Tensor, Tensor> SRUppLayer::forward(const Tensor& x, const Tensor& c0, const Tensor& mask_pad,
                                              const AttentionContext& context) const {
  check_input(x, input_size, "SRU++ layer");
  const int64_t B = x.size(1);
  // The memory holds raw layer inputs; the layer's pre-norm applies to it as to the current input
  // (normalize_memory). The reference normalises only the current input, so with layer_norm and memory
  // its keys mix normalised and raw inputs; by default here a segmented stream computes what the whole
  // stream does, and normalize_memory false computes what the reference does.
  const bool pre_norm = layer_norm && !options.normalize_after;
  const Tensor input = pre_norm ? layer_norm->forward(x) : x;
  AttentionContext ctx = context;
  if (pre_norm && ctx.memory.defined() && options.normalize_memory) ctx.memory = layer_norm->forward(ctx.memory);
  if (pre_norm && ctx.cache && !options.normalize_memory) ctx.cache_input = x;
  // At train.precision bf16 the transform (Linear or attention) answers in bf16: the recurrence then reads
  // bf16 U and x (the skip term's x cast here, as the SRU layer does) with float32 state and dropout mask.
  const Tensor U = transform_module->forward(input, ctx);
  const bool bf16 = U.dtype() == DType::BF16;
  SruRecurrenceOptions ro;
  // The dropout mask on c, drawn by the recurrence's kernels (ops/dropout.h MaskDraw): no fill, no buffer.
  if (is_training() && dropout > 0) ro.mask_c_draw = draw_dropout_mask({B, output_size}, dropout, *gen_);
  ro.hidden_size = options.hidden_size;
  ro.bidirectional = options.bidirectional;
  ro.k = static_cast<int>(k);
  if (options.rescale) ro.scale_x_tensor = scale_x;  // read on the device by the kernel (no host wait)
  auto [h, c] = sru_recurrence(U, bf16 ? cast(x, DType::BF16) : x, weight_c, bias, c0, Tensor(), mask_pad, ro);
  if (layer_norm && options.normalize_after) h = layer_norm->forward(h);
  return {h, c};
}

// ---- stack ----

SRUpp::SRUpp(const SRUppOptions& given, Generator& gen) : options(given) {
  SRUppOptions& o = options;
  SRU_CHECK(o.input_size > 0 && o.hidden_size > 0 && o.num_layers > 0,
            "SRU++: input_size, hidden_size and num_layers must be positive, got ", o.input_size, ", ", o.hidden_size,
            ", ", o.num_layers);
  SRU_CHECK(o.dropout >= 0 && o.dropout < 1 && o.attn_dropout >= 0 && o.attn_dropout < 1,
            "SRU++: dropout and attn_dropout must be in [0, 1), got ", o.dropout, " and ", o.attn_dropout);
  SRU_CHECK(o.proj_dropout == -1 || (o.proj_dropout >= 0 && o.proj_dropout < 1),
            "SRU++: proj_dropout must be -1 (= dropout) or in [0, 1), got ", o.proj_dropout);
  SRU_CHECK(o.attention_every_n_layers >= 1, "SRU++: attention_every_n_layers must be >= 1, got ",
            o.attention_every_n_layers);
  SRU_CHECK(o.attention_every_n_layers == 1 || o.attention_last_n_layers == -1,
            "SRU++: set attention_every_n_layers or attention_last_n_layers, not both (as the reference)");
  SRU_CHECK(!(o.bidirectional && o.causal),
            "SRU++: a bidirectional encoder reads the whole sequence, so its attention cannot be causal "
            "(set model.causal: false)");
  SRU_CHECK(o.memory_length >= 0 && o.num_heads >= 1, "SRU++: memory_length must be >= 0 and num_heads >= 1, got ",
            o.memory_length, " and ", o.num_heads);
  if (o.proj_size == 0) o.proj_size = std::max<int64_t>(1, o.hidden_size / 4);
  const int64_t out = (o.bidirectional ? 2 : 1) * o.hidden_size;
  int64_t first_input = o.input_size;
  for (int64_t i = 0; i < o.num_layers; ++i) {
    const double layer_dropout = i + 1 != o.num_layers ? o.dropout : 0.0;
    if (i == 0 && o.proj_input_to_hidden_first && o.input_size != out) first_input = out;
    layers.push_back(std::make_shared<SRUppLayer>(i == 0 ? first_input : out, o, srupp_layer_attends(o, i),
                                                  layer_dropout, gen));
    register_module("rnn_lst." + std::to_string(i), layers.back());
  }
  if (first_input != o.input_size) {
    input_to_hidden = register_module("input_to_hidden", std::make_shared<Linear>(o.input_size, out, false, o.dtype, gen));
    xavier_uniform(input_to_hidden->weight, gen);
  }
}

int64_t SRUpp::attention_layers() const {
  int64_t n = 0;
  for (const auto& layer : layers) n += layer->transform_module->attends();
  return n;
}

namespace {

// A cache state's caches with f applied to every buffer.
template <typename F>
std::shared_ptr<SruppCacheState> map_caches(const SruppCacheState& state, F&& f) {
  auto copy = std::make_shared<SruppCacheState>(state);
  for (KeyValueCache& cache : copy->caches) {
    if (cache.keys.defined()) cache.keys = f(cache.keys);
    if (cache.values.defined()) cache.values = f(cache.values);
  }
  return copy;
}

// The A attention layers' key/value caches of a decoding pass, rings of M positions: the carried cache
// state's on `device`, or empty ones.
std::vector<KeyValueCache> decoding_caches(const SruppCacheState* carried, int64_t A, int64_t M, Device device) {
  if (carried) {
    SRU_CHECK(static_cast<int64_t>(carried->caches.size()) == A, "SRU++: the carried decoding cache has ",
              carried->caches.size(), " attention layers, this model ", A);
    return map_caches(*carried, [&](const Tensor& t) { return t.to(device); })->caches;
  }
  std::vector<KeyValueCache> caches(static_cast<size_t>(A));
  for (KeyValueCache& cache : caches) cache.max_length = M;
  return caches;
}

}  // namespace

EncoderStatePtr SruppCacheState::reordered(const Tensor& rows) const {
  auto copy = std::make_shared<SruppCacheState>(*this);
  if (c.defined()) copy->c = index_select(c, 1, rows.to(c.device()));
  for (KeyValueCache& cache : copy->caches) cache.reorder(rows, heads);
  return copy;
}

EncoderStatePtr SruppCacheState::on(Device device) const {
  auto copy = map_caches(*this, [&](const Tensor& t) { return t.to(device); });
  if (c.defined()) copy->c = c.to(device);
  return copy;
}

EncoderStatePtr SruppCacheState::detached() const {
  auto copy = map_caches(*this, [](const Tensor& t) { return t.detach(); });
  if (c.defined()) copy->c = c.detach();
  return copy;
}

std::vector<Tensor> SruppCacheState::tensors() const {
  SRU_FAIL("SRU++: a decoding cache (evaluation with a memory) is not checkpointed; the training state is");
}

namespace {

// What every attention layer of a pass shares: causality, the evaluation window, and the key padding
// of an (L, B) padding mask.
AttentionContext shared_attention_context(const SRUppOptions& options, bool training, const Tensor& pad, int64_t L,
                                          int64_t B) {
  AttentionContext context;
  context.causal = options.causal;
  context.window = !training && options.same_length && options.memory_length > 0 ? options.memory_length : -1;
  if (pad.defined()) {
    SRU_CHECK(pad.dim() == 2 && pad.size(0) == L && pad.size(1) == B, "SRU++: mask_pad must be (L, B) = (", L, ", ", B,
              "), got ", shape_str(pad.shape()));
    context.key_padding = transpose(pad, 0, 1);  // (B, L)
  }
  return context;
}

}  // namespace

Tensor SRUpp::forward_sequence(const EncoderInput& input, EncoderStatePtr& state) const {
  const Tensor& x0 = input.x;
  check_input(x0, options.input_size, "SRU++");
  const int64_t L = x0.size(0), B = x0.size(1), n = static_cast<int64_t>(layers.size()), M = options.memory_length;
  const int64_t A = attention_layers();
  const bool with_memory = M > 0;
  // Evaluation with a memory decodes through key/value caches (see nn/srupp.h); training keeps raw inputs,
  // whose projection follows the weights as they change.
  const bool decoding = with_memory && A > 0 && !is_training();
  const SruppState* raw = state ? dynamic_cast<const SruppState*>(state.get()) : nullptr;
  const SruppCacheState* cached = state ? dynamic_cast<const SruppCacheState*>(state.get()) : nullptr;
  SRU_CHECK(!state || raw || cached, "SRU++: the carried state is another encoder's (its type does not match)");
  SRU_CHECK(!cached || decoding, "SRU++: the carried state is a decoding cache, which only evaluation with a memory "
            "reads");
  const size_t memories = with_memory ? static_cast<size_t>(A) : 0;
  SRU_CHECK(!raw || raw->memories.empty() || raw->memories.size() == memories, "SRU++: the carried state holds ",
            raw ? raw->memories.size() : 0, " memories, this model keeps ", memories, " (one per attention layer",
            with_memory ? "" : "; model.memory_length is 0", ")");
  const Tensor c0 = raw ? raw->c : cached ? cached->c : Tensor();
  if (c0.defined())
    SRU_CHECK(c0.dim() == 3 && c0.size(0) == n && c0.size(1) == B, "SRU++: c0 must be (num_layers = ", n, ", B = ", B,
              ", out), got ", shape_str(c0.shape()));
  // A padding mask made on the host may come with x on a device: one copy serves every layer.
  const Tensor pad = input.mask_pad.defined() ? input.mask_pad.to(x0.device()) : Tensor();
  SRU_CHECK(!(pad.defined() && with_memory), "SRU++: memory (model.memory_length) is for token streams without "
            "padding; this input has a padding mask");
  AttentionContext context = shared_attention_context(options, is_training(), pad, L, B);
  std::vector<KeyValueCache> caches;
  if (decoding) caches = decoding_caches(cached, A, M, x0.device());

  Tensor x = input_to_hidden ? input_to_hidden->forward(x0) : x0;
  std::vector<Tensor> last_c, kept;
  size_t attention_index = 0;
  for (int64_t i = 0; i < n; ++i) {
    const SRUppLayer& layer = *layers[i];
    const bool attends = layer.transform_module->attends();
    const bool remembers = with_memory && attends;
    context.memory = Tensor();
    context.cache = nullptr;
    if (remembers && raw && !raw->memories.empty()) context.memory = raw->memories[attention_index].to(x.device());
    if (decoding && attends) {
      KeyValueCache& cache = caches[attention_index];
      if (context.memory.defined()) {
        // A training state: its raw memory becomes this layer's cache (projected once).
        layer.prime_cache(context.memory, cache);
        context.memory = Tensor();
      }
      context.cache = &cache;
    } else if (remembers) {
      // The last M inputs of [memory | x], detached; a compact copy unless it is x itself.
      const Tensor seen = context.memory.defined() ? concat({context.memory, x.detach()}, 0) : x.detach();
      const int64_t keep = std::min(M, seen.size(0));
      kept.push_back(keep == seen.size(0) && !context.memory.defined()
                         ? seen
                         : slice(seen, 0, seen.size(0) - keep, seen.size(0)).clone());
    }
    attention_index += attends ? 1 : 0;
    const Tensor c0_i = c0.defined() ? reshape(slice(c0, 0, i, i + 1), {c0.size(1), c0.size(2)}) : Tensor();
    auto [h, c] = layer.forward(x, c0_i, pad, context);
    x = h;
    last_c.push_back(reshape(c, {1, c.size(0), c.size(1)}));
  }
  if (decoding) {
    auto next = std::make_shared<SruppCacheState>();
    next->c = concat(last_c, 0);
    next->caches = std::move(caches);
    next->heads = options.num_heads;
    state = next;
  } else {
    auto next = std::make_shared<SruppState>();
    next->c = concat(last_c, 0);
    next->memories = std::move(kept);
    state = next;
  }
  return cast(x, x0.dtype());  // at bf16 the layers pass bf16 h on; the encoder answers in x's dtype
}

EncoderStatePtr SRUpp::state_from(const std::vector<Tensor>& tensors) const {
  if (tensors.empty()) return nullptr;
  const size_t memories = options.memory_length > 0 ? static_cast<size_t>(attention_layers()) : 0;
  SRU_CHECK(tensors.size() == 1 || tensors.size() == 1 + memories, "SRU++: a carried state is c and the memory of each "
            "attention layer (", 1 + memories, " tensors), got ", tensors.size());
  auto state = std::make_shared<SruppState>();
  state->c = tensors[0];
  state->memories.assign(tensors.begin() + 1, tensors.end());
  return state;
}

// ---- registry entry ----

namespace {

std::vector<config::Section> srupp_fields(SRUppOptions& o) {
  using namespace config;
  const double inf = std::numeric_limits<double>::infinity();
  return {{"model", "", {
      int_field("proj_size", &o.proj_size, "Attention size d' (0 = hidden_size / 4)", 0),
      int_field("num_heads", &o.num_heads, "Attention heads (must divide proj_size)", 1),
      real_field("attn_dropout", &o.attn_dropout, "Dropout on the attention weights", 0, 0.99),
      real_field("rezero_init_alpha", &o.rezero_init_alpha,
                 "Initial attention weight alpha in U = W3 LN(Q + alpha A) (0: a new layer starts as a factorised SRU)", -inf),
      real_field("proj_dropout", &o.proj_dropout,
                 "Dropout before U's last projection (-1 = model.dropout, the reference; model.dropout stays on h)",
                 -1, 0.99),
      int_field("attention_every_n_layers", &o.attention_every_n_layers,
                "Attention in every n-th layer (the others project U without it)", 1),
      int_field("attention_last_n_layers", &o.attention_last_n_layers,
                "Attention only in the last n layers (-1 = use attention_every_n_layers)", -1),
      bool_field("attn_layer_norm", &o.attn_layer_norm, "Layer norm on Q + alpha A (on W1 x without attention)"),
      bool_field("layer_norm", &o.layer_norm, "The layer's own layer normalisation"),
      bool_field("normalize_after", &o.normalize_after, "The layer's layer norm on its output instead of its input"),
      real_field("highway_bias", &o.highway_bias, "Initial reset-gate bias", -inf),
      bool_field("rescale", &o.rescale, "Scale the skip term by sqrt(1 + 2 exp(highway_bias))"),
      bool_field("proj_input_to_hidden_first", &o.proj_input_to_hidden_first,
                 "Map the input to the layers' width first when they differ (input_to_hidden.weight)"),
      real_field("weight_c_init", &o.weight_c_init, "weight_c starts uniform in [-w, w]", 0),
      int_field("memory_length", &o.memory_length,
                "Earlier inputs each attention layer keeps as extra keys and values (language models; 0 = none)", 0),
      bool_field("same_length", &o.same_length,
                 "In evaluation each query sees exactly memory_length earlier positions (the reference's evaluation)"),
      bool_field("normalize_memory", &o.normalize_memory,
                 "With layer_norm (pre-norm) and a memory, normalise the memory rows too (false: only the current "
                 "segment, the reference SRUpp's convention)"),
      bool_field("causal", &o.causal, "Causal attention (language models); false: every position sees the sequence")}}};
}

}  // namespace

EncoderSpec srupp_encoder() {
  return {"srupp",
          "SRU++ (Lei 2021): the SRU with U from self-attention, with the options and parameter names of the reference "
          "implementation (asappresearch/sru 3.0, class SRUpp); parameters `rnn_lst.{i}.*` "
          "(docs/checkpoint-format.md).",
          [] { return config::Options::of(SRUppOptions{}, &srupp_fields); },
          [](const EncoderArgs& a, const config::Options& options, Generator& gen) -> std::shared_ptr<SequenceEncoder> {
            return std::make_shared<SRUpp>(with_common_args(options.as<SRUppOptions>(), a), gen);
          },
          // The decoding cache (memory), with several heads, pre-norm and both memory conventions; alpha
          // starts away from 0, where attention would not reach the output at all.
          {{"model.rezero_init_alpha=0.7"},
           {"model.memory_length=5", "model.rezero_init_alpha=0.7"},
           {"model.memory_length=3", "model.num_heads=2", "model.proj_size=8", "model.layer_norm=true",
            "model.rezero_init_alpha=0.9"},
           {"model.memory_length=4", "model.layer_norm=true", "model.normalize_memory=false",
            "model.attention_last_n_layers=1", "model.rezero_init_alpha=0.8"}}};
}

}  // namespace sru::nn
