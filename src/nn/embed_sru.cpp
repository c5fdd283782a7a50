// Embed-SRU / Super-Embed-SRU: the first layer (per-token tables, gate clipping), the stack, the exact
// conversion of a v1 SRU into Super-Embed form, and the two registry entries.
#include "nn/embed_sru.h"

#include "autograd/node.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embed_sru_recurrence.h"
#include "ops/shape_ops.h"
#include "ops/sru_math.h"

namespace sru::nn {

namespace {

const char* name_of(EmbedSRUForm form) { return form == EmbedSRUForm::Embed ? "embed-sru" : "super-embed-sru"; }

}  // namespace

EmbedSRULayer::EmbedSRULayer(int64_t vocab_size, EmbedSRUForm f, const EmbedSRUOptions& o, double layer_dropout,
                             Generator& gen)
    : form(f), dropout(layer_dropout), options(o), gen_(&gen) {
  const int64_t d = o.hidden_size;
  auto table = [&](const std::string& name) {
    return register_module(name, std::make_shared<Embedding>(vocab_size, d, -1, o.dtype, gen));
  };
  candidate = table(form == EmbedSRUForm::Embed ? "candidate" : "cell_input");
  forget = table("forget");
  reset = table("reset");
  // The study's initialisation: every table U(-0.1, 0.1), the gates through a sigmoid (so near 0.5),
  // Super-Embed's x~' halved (it stands for (1 - f) x~ with f near 0.5).
  autograd::NoGradGuard no_grad;
  const double range = form == EmbedSRUForm::Embed ? 0.1 : 0.05;
  candidate->weight.copy_(Tensor::uniform({vocab_size, d}, -range, range, o.dtype, gen));
  for (const auto& gate : {forget, reset})
    gate->weight.copy_(sigmoid(Tensor::uniform({vocab_size, d}, -0.1, 0.1, o.dtype, gen)));
}

std::pair<Tensor, Tensor> EmbedSRULayer::forward(const Tensor& x, const Tensor& tokens, const Tensor& c0,
                                                 const Tensor& mask_pad) const {
  const int64_t d = options.hidden_size;
  SRU_CHECK(x.dim() == 3 && x.size(2) == d, name_of(form), " layer: input must be (L, B, ", d, "), got ",
            shape_str(x.shape()));
  SRU_CHECK(tokens.defined(), name_of(form), ": its first layer looks its parameters up per token, and the task "
            "passed no token ids");
  SRU_CHECK(tokens.dim() == 2 && tokens.size(0) == x.size(0) && tokens.size(1) == x.size(1), name_of(form),
            ": token ids must be (L, B) = (", x.size(0), ", ", x.size(1), "), got ", shape_str(tokens.shape()));
  const bool training = is_training();
  Tensor u = candidate->forward(tokens);
  if (training && options.embed_dropout > 0) u = sru::dropout(u, options.embed_dropout, true, *gen_, 1);  // (L, B, d)
  Tensor mask_c;
  if (training && dropout > 0) mask_c = dropout_mask({x.size(1), d}, dropout, x.dtype(), *gen_, x.device());
  EmbedSruRecurrenceOptions ro;
  ro.super_embed = form == EmbedSRUForm::SuperEmbed;
  ro.use_tanh = options.use_tanh;
  return embed_sru_recurrence(u, forget->forward(tokens), reset->forward(tokens), x, c0, mask_c, mask_pad, ro);
}

void EmbedSRULayer::on_after_update() {
  forget->weight.clamp_(kGateMin, kGateMax);
  reset->weight.clamp_(kGateMin, kGateMax);
}

EmbedSRU::EmbedSRU(const EmbedSRUOptions& o, int64_t vocab_size, EmbedSRUForm form, Generator& gen) : options(o) {
  const char* name = name_of(form);
  SRU_CHECK(vocab_size > 0, "model.type ", name, ": its first layer looks its parameters up per token, so the task "
            "must have a token vocabulary");
  SRU_CHECK(!o.bidirectional, "model.type ", name, " reads one direction only (set model.bidirectional to false)");
  SRU_CHECK(o.num_layers >= 1 && o.hidden_size > 0, "model.type ", name, ": num_layers and hidden_size must be positive");
  SRU_CHECK(o.input_size == o.hidden_size, "model.type ", name, ": the first layer adds its input to h, so the input "
            "size (", o.input_size, "; model.embedding_size in the language models) must equal model.hidden_size (",
            o.hidden_size, ")");
  const int64_t n = o.num_layers;
  first = register_module("rnn_lst.0",
                          std::make_shared<EmbedSRULayer>(vocab_size, form, o, n > 1 ? o.dropout : 0.0, gen));
  for (int64_t i = 1; i < n; ++i) {
    upper.push_back(std::make_shared<SRULayer>(o.hidden_size, o, i + 1 != n ? o.dropout : 0.0, gen));
    register_module("rnn_lst." + std::to_string(i), upper.back());
  }
}

Tensor EmbedSRU::forward_sequence(const EncoderInput& input, EncoderStatePtr& state) const {
  const CellState* carried = state_as<CellState>(state, "Embed-SRU");
  const Tensor c0 = carried ? carried->c : Tensor();
  const int64_t n = options.num_layers;
  const char* what = name_of(first->form);
  // As in SRU::forward: a host-made padding mask goes to x's device once, for every layer.
  const Tensor pad = input.mask_pad.defined() ? input.mask_pad.to(input.x.device()) : input.mask_pad;
  auto [h, c] = first->forward(input.x, input.tokens, layer_state(c0, 0, n, what), pad);
  const DType out_dtype = h.dtype();  // under autocast the SRU layers above pass bf16: answered in this
  std::vector<Tensor> last_states = {c};
  for (int64_t i = 1; i < n; ++i) {
    auto [h_i, c_i] = upper[i - 1]->forward(h, layer_state(c0, i, n, what), pad);
    h = h_i;
    last_states.push_back(c_i);
  }
  state = std::make_shared<CellState>(stack_layer_states(last_states));
  return cast(h, out_dtype);
}

EncoderStatePtr EmbedSRU::state_from(const std::vector<Tensor>& tensors) const {
  return cell_state_from(tensors, "Embed-SRU");
}

SuperEmbedConversion convert_to_super_embed(const SequenceEncoder& encoder, const std::string& type,
                                            const Tensor& rows) {
  const char* what = "--convert super-embed";
  const auto* sru = dynamic_cast<const SRU*>(&encoder);
  SRU_CHECK(sru, what, ": the model's encoder is ", type, " (model.type); only a v1 SRU (model.type sru with "
            "model.v1: true) converts to Super-Embed-SRU form");
  const SRUOptions& o = sru->options;
  SRU_CHECK(o.v1, what, ": the SRU has c_{t-1} terms in its gates (model.v1: false), so its gates depend on the "
            "state and its first layer cannot be computed once per word; only a v1 SRU converts exactly");
  SRU_CHECK(!o.bidirectional, what, ": a bidirectional SRU does not convert (Super-Embed-SRU reads one direction)");
  SRU_CHECK(!(o.layer_norm && o.normalize_after), what, ": layer norm after the first layer's recurrence "
            "(model.normalize_after) depends on the state, so the layer cannot be computed once per word");
  const SRULayer& layer = *sru->layers[0];
  SRU_CHECK(!layer.is_training(), what, ": the SRU must be in evaluation mode (no dropout)");
  SRU_CHECK(rows.dim() == 2 && rows.size(1) == o.input_size, what, ": input rows must be (V, ", o.input_size,
            "), got ", shape_str(rows.shape()));

  autograd::NoGradGuard no_grad;
  const Device device = rows.device();
  const Device cpu = Device::cpu();
  // With proj_input_to_hidden_first the first layer reads input_to_hidden(row): a function of the word
  // as well, so the tables below absorb it (and the converted input rows are the mapped ones).
  const Tensor layer_rows = sru->input_to_hidden ? sru->input_to_hidden->forward(rows) : rows;
  const int64_t V = rows.size(0), n_in = layer.input_size, d = layer.output_size, k = layer.k;
  // U for every row, exactly as the layer computes it inside a sequence (rows as (V, 1, n_in)).
  const Tensor U = layer.project(layer_rows.view({V, 1, n_in})).to(cpu);
  const Tensor x = layer_rows.to(cpu), bias = layer.bias.to(cpu);
  const DType dtype = U.dtype();
  Tensor forget = Tensor::empty({V, d}, dtype), reset = Tensor::empty({V, d}, dtype);
  Tensor cell_input = Tensor::empty({V, d}, dtype), skip = Tensor::empty({V, d}, dtype);
  // The expressions of the SRU kernel's step (ops/sru_math.h) with v_f = v_r = 0 and no dropout mask:
  // f and r with the same sigmoid; (1 - f) u0 and (1 - r) x' as the kernel forms them.
  const double scale = o.rescale ? layer.scale_x.item<double>() : 1.0;  // as SRULayer::forward
  SRU_DISPATCH_FLOATING(dtype, "convert_to_super_embed", [&]<typename T>() {
    const T *pu = U.data<T>(), *px = x.data<T>(), *pb = bias.data<T>();
    T *pf = forget.data<T>(), *pr = reset.data<T>(), *pc = cell_input.data<T>(), *ps = skip.data<T>();
    const T s = static_cast<T>(scale);
    for (int64_t i = 0; i < V; ++i)
      for (int64_t j = 0; j < d; ++j) {
        const T* u = pu + (i * d + j) * k;
        const T f = sru_sigmoid<T>(u[1] + pb[j]);
        const T r = sru_sigmoid<T>(u[2] + pb[d + j]);
        const T x_skip = k == 4 ? u[3] : s * px[i * n_in + j];  // k = 3 means n_in == d
        const int64_t at = i * d + j;
        pf[at] = f;
        pr[at] = r;
        pc[at] = (T(1) - f) * u[0];
        ps[at] = o.has_skip_term ? (T(1) - r) * x_skip : T(0);
      }
  });

  SuperEmbedConversion out;
  for (const auto& [name, t] : sru->state())
    if (name.rfind("rnn_lst.0.", 0) != 0 && name.rfind("input_to_hidden.", 0) != 0) out.encoder.emplace_back(name, t);
  out.encoder.emplace_back("rnn_lst.0.cell_input.weight", cell_input.to(device));
  out.encoder.emplace_back("rnn_lst.0.forget.weight", forget.to(device));
  out.encoder.emplace_back("rnn_lst.0.reset.weight", reset.to(device));
  out.input_rows = skip.to(device);
  return out;
}

namespace {

std::vector<config::Section> embed_sru_fields(EmbedSRUOptions& o) {
  std::vector<config::Section> sections = sru_option_fields(o);
  sections.front().fields.push_back(config::real_field(
      "embed_dropout", &o.embed_dropout,
      "embed-sru / super-embed-sru: dropout on the first layer's looked-up candidate (the study: 0.5)", 0, 0.99));
  return sections;
}

EncoderSpec spec_of(EmbedSRUForm form, const std::string& help) {
  return {name_of(form), help, [] { return config::Options::of(EmbedSRUOptions{}, &embed_sru_fields); },
          [form](const EncoderArgs& a, const config::Options& options, Generator& gen) -> std::shared_ptr<SequenceEncoder> {
            return std::make_shared<EmbedSRU>(with_common_args(options.as<EmbedSRUOptions>(), a), a.vocab_size, form,
                                              gen);
          }};
}

}  // namespace

EncoderSpec embed_sru_encoder() {
  return spec_of(EmbedSRUForm::Embed,
                 "Embed-SRU (the study \"Recurrent Net Language Model using SRU\"): an SRU stack whose first layer looks "
                 "its candidate x~ and gates f, r up per token (no matrix product, gates clipped to [0.01, 0.99] after "
                 "every update); c = f c + (1 - f) x~, h = r g(c) + (1 - r) x. Layers 2.. are SRU layers with the `sru` "
                 "keys. Needs token ids and embedding_size = hidden_size; parameters `rnn_lst.0.{candidate,forget,"
                 "reset}.weight`, `rnn_lst.{i}.*` (docs/checkpoint-format.md).");
}

EncoderSpec super_embed_sru_encoder() {
  return spec_of(EmbedSRUForm::SuperEmbed,
                 "Super-Embed-SRU (the same study): as embed-sru with c = f c + x~', h = r g(c) + x, x~' a per-token "
                 "table (for (1 - f) x~) and x the input (for (1 - r) x); a trained v1 SRU converts to it exactly "
                 "(srueval --convert super-embed). Parameters `rnn_lst.0.{cell_input,forget,reset}.weight`, "
                 "`rnn_lst.{i}.*`.");
}

}  // namespace sru::nn
