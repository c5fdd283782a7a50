// Sequence encoders: the recurrent part of every task's model behind one interface, and the
// registry that builds one by name (model.type). SRU and LSTM are entries; a new encoder is a source
// file pair (its module, its keys, its build function) plus one line in src/nn/encoder.cpp.
//
// Shapes: x (L, B, input_size) time-major; mask_pad (L, B), nonzero = padded step (the state passes
// through unchanged and the output there is 0); tokens (L, B) i64: the ids of the input tokens, for
// encoders that look up per-token parameters (undefined when a task has none). The carried state is
// the encoder's own list of tensors (SRU: {c (layers, B, out)}; LSTM: {h, c}); an empty list means
// zeros, and forward replaces it with the state after the last step.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/options.h"
#include "core/rng.h"
#include "nn/module.h"

namespace sru::nn {

struct EncoderInput {
  Tensor x;         // (L, B, input_size)
  Tensor mask_pad;  // (L, B) or undefined
  Tensor tokens;    // (L, B) i64 or undefined
};

class SequenceEncoder : public Module {
 public:
  // The top layer's output (L, B, output_size()); `state` is read, then replaced (see above).
  virtual Tensor forward_sequence(const EncoderInput& input, std::vector<Tensor>& state) const = 0;
  virtual int64_t output_size() const = 0;  // directions * hidden size
  virtual int64_t directions() const = 0;
};

// What every encoder is built from (the model section's common keys), plus the task's input size.
struct EncoderArgs {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 1;
  double dropout = 0.0;
  bool bidirectional = false;
  int64_t vocab_size = 0;  // the task's token vocabulary (for per-token encoders)
};

// Copies the common sizes into an encoder's own options struct (which has members of these names).
template <typename Options>
Options with_common_args(Options o, const EncoderArgs& a) {
  o.input_size = a.input_size;
  o.hidden_size = a.hidden_size;
  o.num_layers = a.num_layers;
  o.dropout = a.dropout;
  o.bidirectional = a.bidirectional;
  return o;
}

struct EncoderSpec {
  std::string name, help;
  // The encoder's own config keys with their defaults (model.* keys only it has).
  std::function<config::Options()> make_options;
  std::function<std::shared_ptr<SequenceEncoder>(const EncoderArgs&, const config::Options&, Generator&)> build;
};

// Every registered encoder, in the order the docs list them.
const std::vector<EncoderSpec>& encoders();
// The encoder named `name`; an unknown name is an error listing the choices and the nearest one.
const EncoderSpec& find_encoder(const std::string& name);

}  // namespace sru::nn
