// SRU layer/stack: parameters, initialisation (paper section 3.2 / Appendix A, as `sru` v2.6), forward.
#include "nn/sru.h"

#include <cmath>
#include <limits>

#include "nn/sru_composed.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/shape_ops.h"
#include "ops/sru_recurrence.h"

namespace sru::nn {

namespace {

double rescale_alpha(double highway_bias) { return std::sqrt(1.0 + 2.0 * std::exp(highway_bias)); }

// Multiplies block m (columns with col % k == m) of a (rows, out*k) weight by factor; m < 0: all.
void scale_block(const Tensor& w, int64_t k, int64_t m, double factor) {
  SRU_DISPATCH_FLOATING(w.dtype(), "scale_block", [&]<typename T>() {
    T* p = w.data<T>();
    for (int64_t i = 0; i < w.numel(); ++i)
      if (m < 0 || (i % w.size(1)) % k == m) p[i] *= static_cast<T>(factor);
  });
}

}  // namespace

SRULayer::SRULayer(int64_t n_in, const SRUOptions& o, double layer_dropout, Generator& gen)
    : input_size(n_in), dropout(layer_dropout), options(o), gen_(&gen) {
  SRU_CHECK(n_in > 0 && o.hidden_size > 0, "SRU: input_size and hidden_size must be positive, got ", n_in, " and ",
            o.hidden_size);
  SRU_CHECK(o.dropout >= 0 && o.dropout < 1 && o.rnn_dropout >= 0 && o.rnn_dropout < 1,
            "SRU: dropout and rnn_dropout must be in [0, 1), got ", o.dropout, " and ", o.rnn_dropout);
  SRU_CHECK(o.projection_size >= 0, "SRU: projection_size must be >= 0, got ", o.projection_size);
  output_size = (o.bidirectional ? 2 : 1) * o.hidden_size;
  projection_size = (o.projection_size > 0 && o.projection_size < n_in && o.projection_size < output_size)
                        ? o.projection_size : 0;
  k = (o.has_skip_term && n_in != output_size) ? 4 : 3;
  const int64_t fan_in = projection_size > 0 ? projection_size : n_in;
  if (projection_size > 0)
    weight_proj = register_parameter("weight_proj", Tensor::empty({n_in, projection_size}, o.dtype));
  weight = register_parameter("weight", Tensor::empty({fan_in, output_size * k}, o.dtype));
  weight_c = register_parameter("weight_c", Tensor::empty({2 * output_size}, o.dtype), !o.v1);
  bias = register_parameter("bias", Tensor::empty({2 * output_size}, o.dtype));
  scale_x = register_buffer("scale_x", Tensor::empty({1}, o.dtype));
  if (o.layer_norm)
    layer_norm = register_module("layer_norm", std::make_shared<LayerNorm>(o.normalize_after ? output_size : n_in,
                                                                           1e-5, o.dtype));
  reset_parameters(gen);
}

void SRULayer::reset_parameters(Generator& gen) {
  const SRUOptions& o = options;
  bias.zero_();
  bias.narrow0(output_size, output_size).fill_(o.highway_bias);
  const double alpha = rescale_alpha(o.highway_bias);
  scale_x.fill_(o.rescale && o.has_skip_term ? alpha : 1.0);

  // E[w] = 0, Var[w] = 1/fan_in.
  const double range = std::sqrt(3.0 / static_cast<double>(weight.size(0)));
  weight.copy_(Tensor::uniform(weight.shape(), -range, range, weight.dtype(), gen));
  if (weight_proj.defined()) {
    const double proj_range = std::sqrt(3.0 / static_cast<double>(input_size));
    weight_proj.copy_(Tensor::uniform(weight_proj.shape(), -proj_range, proj_range, weight_proj.dtype(), gen));
  }
  if (dropout > 0) scale_block(weight, k, 0, std::sqrt(1.0 - dropout));
  if (o.rnn_dropout > 0) scale_block(weight, k, -1, std::sqrt(1.0 - o.rnn_dropout));
  if (layer_norm) scale_block(weight, k, -1, 0.1);
  if (o.rescale && o.has_skip_term && k == 4) scale_block(weight, k, 3, alpha);

  if (!o.v1) {
    if (o.weight_c_init >= 0) {  // `sru`'s weight_c_init: U(-w, w) as it stands
      weight_c.copy_(Tensor::uniform(weight_c.shape(), -o.weight_c_init, o.weight_c_init, weight_c.dtype(), gen));
    } else {  // Var[v] = 1, then v scaled by sqrt(0.5)
      weight_c.copy_(Tensor::uniform(weight_c.shape(), -std::sqrt(3.0), std::sqrt(3.0), weight_c.dtype(), gen));
      weight_c.mul_(std::sqrt(0.5));
    }
    // The gate blocks scaled by sqrt(0.5) so each gate's input keeps unit variance.
    scale_block(weight, k, 1, std::sqrt(0.5));
    scale_block(weight, k, 2, std::sqrt(0.5));
  } else {
    weight_c.zero_();
  }
}

std::pair<Tensor, Tensor> SRULayer::forward(const Tensor& x, const Tensor& c0, const Tensor& mask_pad) const {
  const bool fused = implementation == SRUImplementation::Fused;
  // train.precision bf16 (autocast_bf16): U = x W from bf16 operands and the recurrence on bf16 U and x
  // with float32 state, parameters and math; h comes out bf16 and feeds the next layer's product as it
  // is (SRU::forward returns float32). The composed oracle and float64 stay as they are.
  const bool bf16 = fused && autocast_bf16() && x.dtype() != DType::F64;
  const Tensor U = project(x, bf16);  // checks x's shape
  const int64_t B = x.size(1);
  const DType compute = x.dtype() == DType::BF16 ? DType::F32 : x.dtype();
  // The dropout mask on c: the fused kernels draw it themselves (no fill dispatch, no mask buffer); the
  // composed oracle gets dropout_mask's tensor of the same numbers.
  MaskDraw mask_draw;
  if (is_training() && dropout > 0) mask_draw = draw_dropout_mask({B, output_size}, dropout, *gen_);
  const Tensor mask_c = mask_draw.on && !fused ? mask_of(mask_draw, {B, output_size}, compute, x.device()) : Tensor();
  SruRecurrenceOptions ro;
  if (fused) ro.mask_c_draw = mask_draw;
  ro.hidden_size = options.hidden_size;
  ro.bidirectional = options.bidirectional;
  ro.k = static_cast<int>(k);
  ro.has_skip_term = options.has_skip_term;
  ro.use_tanh = options.use_tanh;
  // The fused kernel reads scale_x on the device (no host wait per layer); the composed oracle needs it here.
  if (options.rescale && fused) ro.scale_x_tensor = scale_x;
  else ro.scale_x = options.rescale ? scale_x.item<double>() : 1.0;
  // The skip term reads the layer's own input (before layer norm and rnn_dropout), as `sru` does.
  const Tensor skip_x = bf16 && options.has_skip_term && k == 3 ? cast(x, DType::BF16) : x;
  auto [h, c] = fused ? sru_recurrence(U, skip_x, weight_c, bias, c0, mask_c, mask_pad, ro)
                      : sru_recurrence_composed(U, x, weight_c, bias, c0, mask_c, mask_pad, ro);
  if (layer_norm && options.normalize_after) h = layer_norm->forward(h);
  return {h, c};
}

Tensor SRULayer::project(const Tensor& x, bool bf16) const {
  SRU_CHECK(x.dim() == 3 && x.size(2) == input_size, "SRU layer: input must be (L, B, ", input_size, "), got ",
            shape_str(x.shape()));
  Tensor input = x;
  if (layer_norm && !options.normalize_after) input = layer_norm->forward(input);
  if (is_training() && options.rnn_dropout > 0) {
    // The mask in float32 beside a bf16 input: the product in float32, rounded once by the cast below.
    const DType compute = input.dtype() == DType::BF16 ? DType::F32 : input.dtype();
    input = cast(input, compute) * dropout_mask({x.size(1), input_size}, options.rnn_dropout, compute, *gen_, x.device());
  }
  if (!bf16) return weight_proj.defined() ? matmul(matmul(input, weight_proj), weight) : matmul(input, weight);
  const Tensor in16 = cast(input, DType::BF16), w16 = cast(weight, DType::BF16);
  return weight_proj.defined() ? matmul(matmul(in16, cast(weight_proj, DType::BF16)), w16) : matmul(in16, w16);
}

SRU::SRU(const SRUOptions& o, Generator& gen) : options(o) {
  SRU_CHECK(o.num_layers > 0, "SRU: num_layers must be positive, got ", o.num_layers);
  const int64_t out = (o.bidirectional ? 2 : 1) * o.hidden_size;
  const bool map_input = o.proj_input_to_hidden_first && o.input_size != out;
  for (int64_t i = 0; i < o.num_layers; ++i) {
    const double layer_dropout = i + 1 != o.num_layers ? o.dropout : 0.0;
    layers.push_back(std::make_shared<SRULayer>(i == 0 && !map_input ? o.input_size : out, o, layer_dropout, gen));
    register_module("rnn_lst." + std::to_string(i), layers.back());
  }
  // (`sru` initialises it as torch.nn.Linear does: nn::Linear's own initialisation.)
  if (map_input)
    input_to_hidden = register_module("input_to_hidden",
                                      std::make_shared<Linear>(o.input_size, out, false, o.dtype, gen));
}

Tensor layer_state(const Tensor& states, int64_t i, int64_t layers, const char* what) {
  if (!states.defined()) return Tensor();
  SRU_CHECK(states.dim() == 3 && states.size(0) == layers, what, ": c0 must be (num_layers = ", layers,
            ", B, out), got ", shape_str(states.shape()));
  return reshape(slice(states, 0, i, i + 1), {states.size(1), states.size(2)});
}

Tensor stack_layer_states(const std::vector<Tensor>& last_states) {
  std::vector<Tensor> rows;
  for (const Tensor& c : last_states) rows.push_back(reshape(c, {1, c.size(0), c.size(1)}));
  return concat(rows, 0);
}

std::pair<Tensor, Tensor> SRU::forward(const Tensor& x, const Tensor& c0, const Tensor& mask_pad) const {
  const int64_t n = static_cast<int64_t>(layers.size());
  // A padding mask made on the host may come with x on a device: one copy here (no host wait) serves
  // every layer.
  const Tensor pad = mask_pad.defined() ? mask_pad.to(x.device()) : mask_pad;
  Tensor h = input_to_hidden ? input_to_hidden->forward(x) : x;
  std::vector<Tensor> last_states;
  for (int64_t i = 0; i < n; ++i) {
    auto [h_i, c_i] = layers[i]->forward(h, layer_state(c0, i, n, "SRU"), pad);
    h = h_i;
    last_states.push_back(c_i);
  }
  // Under autocast the layers pass bf16 between them; the stack answers in its input's dtype.
  return {cast(h, x.dtype()), stack_layer_states(last_states)};
}

void SRU::set_implementation(SRUImplementation impl) {
  for (auto& layer : layers) layer->implementation = impl;
}

Tensor SRU::forward_sequence(const EncoderInput& input, EncoderStatePtr& state) const {
  const CellState* carried = state_as<CellState>(state, "SRU");
  auto [h, c] = forward(input.x, carried ? carried->c : Tensor(), input.mask_pad);
  state = std::make_shared<CellState>(c);
  return h;
}

EncoderStatePtr cell_state_from(const std::vector<Tensor>& tensors, const char* encoder) {
  if (tensors.empty()) return nullptr;
  SRU_CHECK(tensors.size() == 1, encoder, ": a carried state is one tensor (c), got ", tensors.size());
  return std::make_shared<CellState>(tensors[0]);
}

EncoderStatePtr SRU::state_from(const std::vector<Tensor>& tensors) const { return cell_state_from(tensors, "SRU"); }

std::vector<config::Section> sru_option_fields(SRUOptions& o) {
  using namespace config;
  const double inf = std::numeric_limits<double>::infinity();
  return {{"model", "", {
      real_field("rnn_dropout", &o.rnn_dropout, "Variational dropout on each layer's input", 0, 0.99),
      int_field("projection_size", &o.projection_size, "Low-rank projection size p of U = (x Wp) W (0 = none)", 0),
      real_field("highway_bias", &o.highway_bias, "Initial reset-gate bias", -inf),
      bool_field("rescale", &o.rescale, "Scale the skip term by sqrt(1 + 2 exp(highway_bias))"),
      bool_field("layer_norm", &o.layer_norm, "Layer normalisation"),
      bool_field("normalize_after", &o.normalize_after, "Layer norm on the output instead of the input"),
      bool_field("use_tanh", &o.use_tanh, "tanh on the cell state"),
      bool_field("v1", &o.v1, "No c_{t-1} terms in the gates (the first version of the unit)"),
      bool_field("has_skip_term", &o.has_skip_term, "Highway skip connection")}}};
}

namespace {

// The "sru" encoder's keys: the layers' (sru_option_fields) and the stack's own.
std::vector<config::Section> sru_stack_fields(SRUOptions& o) {
  using namespace config;
  std::vector<Section> sections = sru_option_fields(o);
  std::vector<Field>& model = sections.front().fields;
  model.push_back(real_field("weight_c_init", &o.weight_c_init, "weight_c starts uniform in [-w, w]; negative: "
                             "`sru`'s default (None), U(-sqrt(3), sqrt(3)) * sqrt(0.5)", -1.0));
  model.push_back(bool_field("proj_input_to_hidden_first", &o.proj_input_to_hidden_first,
                             "Map the input to the layers' width first when they differ (input_to_hidden.weight)"));
  return sections;
}

}  // namespace

EncoderSpec sru_encoder() {
  return {"sru", "The Simple Recurrent Unit (Lei et al. 2018) with the options of the PyTorch package `sru` v2.6; "
                 "parameters `rnn_lst.{i}.*` (docs/checkpoint-format.md).",
          [] { return config::Options::of(SRUOptions{}, &sru_stack_fields); },
          [](const EncoderArgs& a, const config::Options& options, Generator& gen) -> std::shared_ptr<SequenceEncoder> {
            return std::make_shared<SRU>(with_common_args(options.as<SRUOptions>(), a), gen);
          }};
}

}  // namespace sru::nn
