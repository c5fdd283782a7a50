// SRU layer and stack (Lei et al. 2018), with the options of the PyTorch package `sru` v2.6 and
// its parameter names (the checkpoint contract in ../shared/DESIGN.md section 4):
//   rnn_lst.{i}.weight       (n_in or p, out*k)      U = x W  (or (x Wp) W with a projection)
//   rnn_lst.{i}.weight_proj  (n_in, p)               only when projecting
//   rnn_lst.{i}.weight_c     (2*out)                 [vf | vr]; zero and frozen with v1
//   rnn_lst.{i}.bias         (2*out)                 [bf | br]; br starts at highway_bias
//   rnn_lst.{i}.scale_x      (1)                     buffer: alpha = sqrt(1 + 2 e^highway_bias) when
//                                                    rescale and has_skip_term, else 1
//   rnn_lst.{i}.layer_norm.{weight,bias}             (n_in), or (out) with normalize_after
// k = 4 when has_skip_term and n_in != out (the 4th block projects the skip term), else 3.
// Shapes: x (L, B, n_in); c0 (layers, B, out); mask_pad (L, B), nonzero = padded step (SRU::forward also
// takes a mask made on the CPU with x on a device, and copies it there once, without a host wait).
// The stack returns h of the top layer (L, B, out) and the last c of every layer (layers, B, out).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "nn/encoder.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace sru::nn {

struct SRUOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;       // per direction
  int64_t num_layers = 2;
  double dropout = 0.0;          // variational mask on h inside the recurrence, all layers but the last
  double rnn_dropout = 0.0;      // variational mask on each layer's input
  bool bidirectional = false;
  int64_t projection_size = 0;   // used in a layer when 0 < p < n_in and p < out (as `sru` does)
  bool use_tanh = false;
  bool layer_norm = false;
  bool normalize_after = false;  // layer norm on h (post) instead of on the input (pre)
  double highway_bias = 0.0;
  bool has_skip_term = true;
  bool rescale = false;
  bool v1 = false;               // no c_{t-1} terms in the gates
  // weight_c's initial range, as `sru`'s weight_c_init: negative = its None, U(-sqrt(3), sqrt(3)) * sqrt(0.5)
  // (E[v] = 0, Var[v] = 1/2); w >= 0: U(-w, w).
  double weight_c_init = -1.0;
  // The stack (nn::SRU) maps its input to the layers' width out first when input_size != out: a Linear
  // without bias, `input_to_hidden.weight` (out, input_size), as `sru`'s proj_input_to_hidden_first.
  bool proj_input_to_hidden_first = false;
  DType dtype = DType::F32;
};

// Fused: the CPU/CUDA kernel (ops/sru_recurrence). Composed: a per-time-step loop of basic autograd
// ops — an independent implementation, used as the test oracle and as a benchmark baseline.
enum class SRUImplementation { Fused, Composed };

class SRULayer : public Module {
 public:
  SRULayer(int64_t input_size, const SRUOptions& options, double dropout, Generator& gen);
  // x (L, B, n_in), c0 (B, out) or undefined, mask_pad (L, B) or undefined -> (h (L, B, out), c (B, out))
  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& c0, const Tensor& mask_pad) const;
  // U (L, B, out*k) of input x (L, B, n_in): layer norm (before the recurrence), rnn_dropout when
  // training, the projection and W. Row by row: what the recurrence reads per input vector. bf16: the
  // products' operands (the input and the weights) cast to bf16, U bf16 (FP32 sums).
  Tensor project(const Tensor& x, bool bf16 = false) const;
  void reset_parameters(Generator& gen);

  int64_t input_size, output_size, projection_size, k;
  double dropout;
  SRUOptions options;
  SRUImplementation implementation = SRUImplementation::Fused;
  Tensor weight, weight_proj, weight_c, bias, scale_x;
  std::shared_ptr<LayerNorm> layer_norm;

 private:
  Generator* gen_;
};

class SRU : public SequenceEncoder {
 public:
  explicit SRU(const SRUOptions& options, Generator& gen = default_generator());
  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& c0 = Tensor(), const Tensor& mask_pad = Tensor()) const;
  // The encoder interface: state CellState {c (layers, B, out)}.
  Tensor forward_sequence(const EncoderInput& input, EncoderStatePtr& state) const override;
  EncoderStatePtr state_from(const std::vector<Tensor>& tensors) const override;
  void set_implementation(SRUImplementation impl);
  int64_t output_size() const override { return layers.back()->output_size; }
  int64_t directions() const override { return options.bidirectional ? 2 : 1; }

  SRUOptions options;
  std::vector<std::shared_ptr<SRULayer>> layers;
  std::shared_ptr<Linear> input_to_hidden;  // with proj_input_to_hidden_first and input_size != out, else null
};

// Stacked per-layer states (layers, B, out): layer i's (B, out) (undefined when `states` is), checked
// against the stack's layer count; and the stack of each layer's last state.
Tensor layer_state(const Tensor& states, int64_t i, int64_t layers, const char* what);
// A CellState from a checkpoint's tensors ({c}; empty: null), for the encoders whose state it is.
EncoderStatePtr cell_state_from(const std::vector<Tensor>& tensors, const char* encoder);
Tensor stack_layer_states(const std::vector<Tensor>& last_states);

// The SRU's own config keys (model.*) bound to o's members: every SRUOptions member but the sizes,
// dropout and bidirectional (encoders built on SRU layers share them), and but weight_c_init and
// proj_input_to_hidden_first, which only the stack of SRU layers (encoder "sru") takes.
std::vector<config::Section> sru_option_fields(SRUOptions& o);

// The registry entry "sru": its keys are the SRUOptions above other than the sizes, dropout and
// bidirectional, which every encoder takes from the model section.
EncoderSpec sru_encoder();

}  // namespace sru::nn
