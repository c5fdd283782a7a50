// LSTM through the fused recurrence op (or composed from basic ops) on the CPU, through cuDNN on a GPU
// (see lstm.h).
#include "nn/lstm.h"

#include <cmath>

#include "nn/sequence.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/lstm_cudnn.h"
#include "ops/lstm_recurrence.h"
#include "ops/matmul.h"
#include "ops/select.h"
#include "ops/shape_ops.h"

namespace sru::nn {

LSTM::LSTM(const LSTMOptions& o, Generator& gen) : options(o), gen_(&gen) {
  SRU_CHECK(o.input_size > 0 && o.hidden_size > 0 && o.num_layers > 0, "LSTM: sizes must be positive, got input ",
            o.input_size, ", hidden ", o.hidden_size, ", layers ", o.num_layers);
  SRU_CHECK(o.dropout >= 0 && o.dropout < 1, "LSTM: dropout must be in [0, 1), got ", o.dropout);
  const int64_t H = o.hidden_size, D = o.bidirectional ? 2 : 1;
  const double bound = 1.0 / std::sqrt(static_cast<double>(H));
  auto init = [&](Shape shape) { return Tensor::uniform(shape, -bound, bound, o.dtype, gen); };
  for (int64_t l = 0; l < o.num_layers; ++l) {
    const int64_t n_in = l == 0 ? o.input_size : D * H;
    std::vector<Direction> dirs;
    for (int64_t dir = 0; dir < D; ++dir) {
      const std::string suffix = "_l" + std::to_string(l) + (dir == 1 ? "_reverse" : "");
      Direction p;
      p.weight_ih = register_parameter("weight_ih" + suffix, init({4 * H, n_in}));
      p.weight_hh = register_parameter("weight_hh" + suffix, init({4 * H, H}));
      p.bias_ih = register_parameter("bias_ih" + suffix, init({4 * H}));
      p.bias_hh = register_parameter("bias_hh" + suffix, init({4 * H}));
      dirs.push_back(p);
    }
    layers_.push_back(dirs);
  }
}

RecurrentOutput LSTM::forward(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& mask_pad) const {
  const int64_t H = options.hidden_size, D = options.bidirectional ? 2 : 1, out = D * H;
  const int64_t n_layers = static_cast<int64_t>(layers_.size());
  SRU_CHECK(x.dim() == 3 && x.size(2) == options.input_size, "LSTM: input must be (L, B, ", options.input_size,
            "), got ", shape_str(x.shape()));
  const int64_t B = x.size(1);
  for (const Tensor* s : {&h0, &c0})
    if (s->defined())
      SRU_CHECK(s->shape() == (Shape{n_layers, B, out}), "LSTM: initial state must be (", n_layers, ", ", B, ", ", out,
                "), got ", shape_str(s->shape()));
  // train.precision bf16 over float32 parameters (lstm.h); the composed oracle and float64 stay as they are.
  const bool bf16 = autocast_bf16() && x.dtype() != DType::F64 && layers_[0][0].weight_ih.dtype() == DType::F32;
#if defined(SRU_WITH_CUDA)
  if (x.device().is_cuda())
    return forward_cudnn(x, h0, c0, mask_pad, bf16 && cuda::lstm_cudnn_supports_bf16(x.device().index));
#endif
  const bool composed = implementation_ == LSTMImplementation::Composed;
  const bool bf16_fused = bf16 && !composed;
  const std::vector<Tensor> pad = composed ? padding_masks(mask_pad, H, x.dtype()) : std::vector<Tensor>();

  Tensor input = x;
  std::vector<Tensor> h_last, c_last;
  for (int64_t l = 0; l < n_layers; ++l) {
    std::vector<Tensor> outputs, hs, cs;
    for (int64_t dir = 0; dir < D; ++dir) {
      auto initial = [&](const Tensor& s) { return s.defined() ? slice(time_step(s, l), 1, dir * H, dir * H + H) : Tensor(); };
      const DirectionResult r = composed ? direction_composed(layers_[l][dir], input, initial(h0), initial(c0), pad, dir == 1)
                                         : direction_fused(layers_[l][dir], input, initial(h0), initial(c0), mask_pad,
                                                           dir == 1, bf16_fused);
      outputs.push_back(r.output);
      hs.push_back(r.h);
      cs.push_back(r.c);
    }
    input = D == 1 ? outputs[0] : concat(outputs, 2);
    h_last.push_back(reshape(D == 1 ? hs[0] : concat(hs, 1), {1, B, out}));
    c_last.push_back(reshape(D == 1 ? cs[0] : concat(cs, 1), {1, B, out}));
    if (l + 1 < n_layers) input = dropout(input, options.dropout, is_training(), *gen_, 1);  // (L, B, out)
  }
  return {cast(input, x.dtype()), concat(h_last, 0), concat(c_last, 0)};
}

namespace {

// t rounded to bfloat16 values, kept in float32 (undefined stays undefined); gradients pass straight
// through, rounded to bf16 as a bf16 tensor's would be.
Tensor bf16_values(const Tensor& t) { return t.defined() ? cast(cast(t, DType::BF16), DType::F32) : Tensor(); }

}  // namespace

LSTM::DirectionResult LSTM::direction_fused(const Direction& p, const Tensor& input, const Tensor& h0, const Tensor& c0,
                                            const Tensor& mask_pad, bool reverse, bool bf16) const {
  if (!bf16) {
    const LstmRecurrenceResult r = lstm_recurrence(matmul(input, p.weight_ih, false, true), p.weight_hh, p.bias_ih,
                                                   p.bias_hh, h0, c0, mask_pad, reverse);
    return {r.output, r.h, r.c};
  }
  // cuDNN's bf16 LSTM, as far as its inputs and outputs show: x, the weights, both biases and the
  // initial state are bf16; the products of bf16 operands sum in float32; c is float32 inside and bf16
  // when returned. (Whether cuDNN rounds the input projection before adding the recurrent one is not
  // documented; here it does, as the bf16 GEMM's result.)
  const Tensor gates_x = cast(matmul(cast(input, DType::BF16), cast(p.weight_ih, DType::BF16), false, true), DType::F32);
  const LstmRecurrenceResult r =
      lstm_recurrence(gates_x, bf16_values(p.weight_hh), bf16_values(p.bias_ih) + bf16_values(p.bias_hh),
                      bf16_values(h0), bf16_values(c0), mask_pad, reverse, LstmHidden::Bf16Values);
  return {cast(r.output, DType::BF16), r.h, bf16_values(r.c)};
}

// Per step: a recurrent GEMM, the gates split into four, and the cell update from elementwise ops.
LSTM::DirectionResult LSTM::direction_composed(const Direction& p, const Tensor& input, const Tensor& h0,
                                               const Tensor& c0, const std::vector<Tensor>& pad, bool reverse) const {
  const int64_t L = input.size(0), B = input.size(1), H = options.hidden_size;
  Tensor h = h0.defined() ? h0 : Tensor::zeros({B, H}, input.dtype(), input.device());
  Tensor c = c0.defined() ? c0 : Tensor::zeros({B, H}, input.dtype(), input.device());
  const Tensor gates_x = matmul(input, p.weight_ih, false, true) + (p.bias_ih + p.bias_hh);  // (L, B, 4H)
  const std::vector<Tensor> gates_t = unbind(gates_x);
  std::vector<Tensor> steps(L);
  for (int64_t s = 0; s < L; ++s) {
    const int64_t t = reverse ? L - 1 - s : s;
    const Tensor gates = gates_t[t] + matmul(h, p.weight_hh, false, true);
    const std::vector<Tensor> ifgo = split(gates, {H, H, H, H}, 1);
    const Tensor c_new = sigmoid(ifgo[1]) * c + sigmoid(ifgo[0]) * tanh(ifgo[2]);
    const Tensor h_new = sigmoid(ifgo[3]) * tanh(c_new);
    if (pad.empty()) {
      c = c_new;
      h = h_new;
      steps[t] = reshape(h_new, {1, B, H});
    } else {
      c = where(pad[t], c, c_new);
      h = where(pad[t], h, h_new);
      steps[t] = reshape(masked_fill(h_new, pad[t], 0.0), {1, B, H});
    }
  }
  return {concat(steps, 0), h, c};
}

std::vector<Tensor> LSTM::own_random_states() const {
#if defined(SRU_WITH_CUDA)
  if (cudnn_dropout_) return {cudnn_stack_dropout_states(*cudnn_dropout_)};
#endif
  return {};
}

#if defined(SRU_WITH_CUDA)
namespace {
// The seed of cuDNN's dropout states: the generator's seed mixed with its offset when the states are made
// (so a run resumed from a checkpoint, its generator restored, does not repeat the masks of its start)
// and this process's batch shard (data-parallel ranks draw masks of their own), through splitmix64.
uint64_t cudnn_dropout_seed(const Generator& gen) {
  uint64_t z = gen.seed() ^ (gen.offset() * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(gen.batch_shard().first) << 32);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

// One cuDNN call for the whole stack where no dropout goes between the layers (dropout 0, or not
// training), else one call per layer with nn::LSTM's own dropout between them (the CPU's masks):
// initial states (layers, B, D*H) become cuDNN's (layers*D, B, H) or per layer (D, B, H), and back;
// mask_pad (on the CPU, or read back from the device: one host wait) becomes per-sequence lengths.
RecurrentOutput LSTM::forward_cudnn(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& mask_pad,
                                    bool bf16) const {
  const int64_t H = options.hidden_size, D = options.bidirectional ? 2 : 1, out = D * H;
  const int64_t n_layers = static_cast<int64_t>(layers_.size()), L = x.size(0), B = x.size(1);
  std::vector<int32_t> lengths(B, static_cast<int32_t>(L));
  if (mask_pad.defined()) {
    // cuDNN takes the lengths on the host: a mask made on the CPU costs no host wait here.
    SRU_CHECK(mask_pad.shape() == (Shape{L, B}), "LSTM: mask_pad must be (", L, ", ", B, "), got ",
              shape_str(mask_pad.shape()));
    const std::vector<uint8_t> pad = padded_flags(mask_pad);
    for (int64_t b = 0; b < B; ++b) {
      int64_t len = 0;
      while (len < L && pad[len * B + b] == 0) ++len;
      for (int64_t t = len; t < L; ++t)
        SRU_CHECK(pad[t * B + b] != 0, "LSTM on CUDA: sequence ", b, " has a padded step before an unpadded one at t = ",
                  t, "; cuDNN needs the padding at the end of each sequence");
      SRU_CHECK(len >= 1, "LSTM on CUDA: sequence ", b, " is padded at every step (cuDNN needs length >= 1)");
      lengths[b] = static_cast<int32_t>(len);
    }
  }
  // At bf16 every operand of the cuDNN call is bf16 (cuDNN's data type is one for all); the casts'
  // backward widens the weight and state gradients to float32.
  const DType io = bf16 ? DType::BF16 : x.dtype();
  auto to_cudnn = [&](const Tensor& s, int64_t l) {  // (layers, B, D*H) -> layer l as (D, B, H)
    return s.defined() ? cast(transpose(reshape(time_step(s, l), {B, D, H}), 0, 1), io) : Tensor();
  };
  auto from_cudnn = [&](const Tensor& s) { return cast(reshape(transpose(s, 0, 1), {1, B, out}), x.dtype()); };
  auto weights_of = [&](int64_t l) {
    std::vector<LstmDirectionWeights> dirs;
    for (const Direction& p : layers_[l])
      dirs.push_back({cast(p.weight_ih, io), cast(p.weight_hh, io), cast(p.bias_ih, io), cast(p.bias_hh, io)});
    return dirs;
  };
  const bool dropout_in_cudnn = options.cudnn_dropout && options.dropout > 0.0 && is_training();
  if (n_layers > 1 && (options.dropout == 0.0 || !is_training() || dropout_in_cudnn)) {
    // No dropout between the layers, or cuDNN's: the whole stack in one cuDNN call (as torch.nn.LSTM),
    // its states (layers, B, D*H) as cuDNN's (layers*D, B, H) and back.
    if (dropout_in_cudnn &&
        (!cudnn_dropout_ || !cudnn_stack_dropout_serves(*cudnn_dropout_, x.device(), options.dropout)))
      cudnn_dropout_ = cudnn_stack_dropout(x.device(), options.dropout, cudnn_dropout_seed(*gen_));
    std::vector<std::vector<LstmDirectionWeights>> stack;
    for (int64_t l = 0; l < n_layers; ++l) stack.push_back(weights_of(l));
    auto to_stack = [&](const Tensor& s) {
      return s.defined() ? cast(reshape(transpose(reshape(s, {n_layers, B, D, H}), 1, 2), {n_layers * D, B, H}), io)
                         : Tensor();
    };
    auto from_stack = [&](const Tensor& s) {
      return cast(reshape(transpose(reshape(s, {n_layers, D, B, H}), 1, 2), {n_layers, B, out}), x.dtype());
    };
    const LstmLayerResult r = lstm_cudnn_stack(cast(x, io), to_stack(h0), to_stack(c0), stack, lengths,
                                               dropout_in_cudnn ? cudnn_dropout_ : nullptr);
    return {cast(r.output, x.dtype()), from_stack(r.h), from_stack(r.c)};
  }
  Tensor input = cast(x, io);
  std::vector<Tensor> h_last, c_last;
  for (int64_t l = 0; l < n_layers; ++l) {
    const LstmLayerResult r = lstm_cudnn_layer(input, to_cudnn(h0, l), to_cudnn(c0, l), weights_of(l), lengths);
    input = r.output;
    h_last.push_back(from_cudnn(r.h));
    c_last.push_back(from_cudnn(r.c));
    if (l + 1 < n_layers) input = dropout(input, options.dropout, is_training(), *gen_, 1);  // (L, B, out)
  }
  return {cast(input, x.dtype()), concat(h_last, 0), concat(c_last, 0)};
}
#endif

Tensor LSTM::forward_sequence(const EncoderInput& input, EncoderStatePtr& state) const {
  const LstmState* carried = state_as<LstmState>(state, "LSTM");
  RecurrentOutput r = forward(input.x, carried ? carried->h : Tensor(), carried ? carried->c : Tensor(), input.mask_pad);
  state = std::make_shared<LstmState>(r.h, r.c);
  return r.output;
}

EncoderStatePtr LSTM::state_from(const std::vector<Tensor>& tensors) const {
  if (tensors.empty()) return nullptr;
  SRU_CHECK(tensors.size() == 2, "LSTM: a carried state is two tensors (h, c), got ", tensors.size());
  return std::make_shared<LstmState>(tensors[0], tensors[1]);
}

namespace {
std::vector<config::Section> lstm_option_fields(LSTMOptions& o) {
  using namespace config;
  return {{"model", "", {
      bool_field("cudnn_dropout", &o.cudnn_dropout, "On a GPU, training with dropout between layers runs the whole "
                 "stack in one cuDNN call with cuDNN's own dropout, as torch.nn.LSTM does (faster; the masks are "
                 "cuDNN's, not the CPU's, and a resumed run draws new ones); false: one call per layer with the "
                 "CPU's masks between them. The CPU ignores it")}}};
}
}  // namespace

EncoderSpec lstm_encoder() {
  return {"lstm", "The LSTM baseline: PyTorch nn.LSTM's names, gate order and initialisation; cuDNN on a GPU.",
          [] { return config::Options::of(LSTMOptions{}, &lstm_option_fields); },
          [](const EncoderArgs& a, const config::Options& options, Generator& gen) -> std::shared_ptr<SequenceEncoder> {
            return std::make_shared<LSTM>(with_common_args(options.as<LSTMOptions>(), a), gen);
          }};
}

}  // namespace sru::nn
