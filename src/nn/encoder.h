// Sequence encoders: the recurrent part of every task's model behind one interface, and the
// registry that builds one by name (model.type). SRU and LSTM are entries; a new encoder is a source
// file pair (its module, its keys, its build function) plus one line in src/nn/encoder.cpp.
//
// Shapes: x (L, B, input_size) time-major; mask_pad (L, B), nonzero = padded step (the state passes
// through unchanged and the output there is 0); tokens (L, B) i64: the ids of the input tokens, for
// encoders that look up per-token parameters (undefined when a task has none). The carried state is
// a struct of the encoder's own (nn/encoder_state.h: SRU, Embed-SRU `CellState` {c (layers, B, out)};
// LSTM `LstmState` {h, c}; SRU++ `SruppState` / `SruppCacheState`; Transformer
// `TransformerEncoderState`) behind EncoderStatePtr; null means zeros, and forward replaces it with the
// state after the last step.
//
// Incremental state (decoding): forward_sequence is also the step of a decoder. Feed the next tokens
// (L >= 1, often 1) with the state the previous call returned; the encoder contract
// (tests/unit/test_encoder_contract.cpp, run over every registered encoder) requires, in evaluation mode,
// that feeding a sequence in chunks or token by token equals one pass over it whenever streams() says
// so, that padding a row does not change the others, and that a state's reordered(rows) then a step
// equals the step on the reordered rows recomputed from scratch (the beam search's hook: new row i of
// the batch continues old row rows[i]).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/options.h"
#include "core/rng.h"
#include "nn/encoder_state.h"
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
  virtual Tensor forward_sequence(const EncoderInput& input, EncoderStatePtr& state) const = 0;
  // A state from a checkpoint's tensors (EncoderState::tensors() of a state this encoder made in
  // training); an empty list gives null. A count or shape this encoder never makes is an error.
  virtual EncoderStatePtr state_from(const std::vector<Tensor>& tensors) const = 0;
  virtual int64_t output_size() const = 0;  // directions * hidden size
  virtual int64_t directions() const = 0;
  // Whether, in evaluation mode, a sequence fed in chunks with the carried state gives exactly the
  // output of one pass (true for recurrences; SRU++ only with a memory, see nn/srupp.h).
  virtual bool streams() const { return directions() == 1; }
  // Whether forward_sequence takes a padding mask (SRU++ with a memory reads unpadded streams only).
  virtual bool accepts_padding() const { return true; }
  // Whether forward_sequence's work on `device` can be captured into a CUDA graph and replayed
  // (train.cuda_graphs): no host reads of its inputs (a padding mask), no host memory that its device
  // work reads after the call returns.
  virtual bool capturable_on(Device) const { return true; }
};

// What every encoder is built from (the model section's common keys), plus the task's input size.
struct EncoderArgs {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 1;
  double dropout = 0.0;
  bool bidirectional = false;
  int64_t vocab_size = 0;  // the task's token vocabulary (for per-token encoders)
  DType dtype = DType::F32;
};

// Copies the common sizes into an encoder's own options struct (which has members of these names).
template <typename Options>
Options with_common_args(Options o, const EncoderArgs& a) {
  o.input_size = a.input_size;
  o.hidden_size = a.hidden_size;
  o.num_layers = a.num_layers;
  o.dropout = a.dropout;
  o.bidirectional = a.bidirectional;
  o.dtype = a.dtype;
  return o;
}

struct EncoderSpec {
  std::string name, help;
  // The encoder's own config keys with their defaults (model.* keys only it has).
  std::function<config::Options()> make_options;
  std::function<std::shared_ptr<SequenceEncoder>(const EncoderArgs&, const config::Options&, Generator&)> build;
  // Settings (`model.KEY=VALUE`) beyond the defaults that the encoder contract suite also runs, so that
  // every option with its own state or code path (e.g. SRU++'s memory) is held to the contract.
  std::vector<std::vector<std::string>> contract_variants = {};
};

// Every registered encoder, in the order the docs list them.
const std::vector<EncoderSpec>& encoders();
// The encoder named `name`; an unknown name is an error listing the choices and the nearest one.
const EncoderSpec& find_encoder(const std::string& name);

}  // namespace sru::nn
