// Decoders of encoder-decoder models (translation) behind one interface, and the registry that builds
// one by name (model.decoder), beside the encoder registry (nn/encoder.h). A new decoder is a module
// implementing Decoder with its own DecoderState, plus one entry in decoders() (src/nn/decoder.cpp);
// the decoder contract (tests/unit/test_decoder_contract.cpp) runs over every entry.
//
// Shapes time-major: x (Lt, B, w) the embedded target (positions and dropout applied by the model);
// memory (Ls, B, w) the encoder's output; padding masks (B, L), nonzero = padded. A decoder returns
// its top states (Lt, B, w), final normalisation included; the model projects them to the vocabulary.
// Decoding: start_decoding takes the memory once, then forward_step feeds the next position of every
// row (x (1, N, w)) and advances the state; in evaluation mode, stepping through a sequence equals
// forward over it, and reorder(rows) then a step equals the step on the reordered rows recomputed
// from scratch (the beam search's hook: new row i continues old row rows[i]).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "nn/module.h"
#include "nn/transformer.h"

namespace sru::nn {

// What a decoder carries from one decoding step to the next: each decoder's own struct of named fields.
class DecoderState {
 public:
  virtual ~DecoderState() = default;
  // New row i continues row rows[i] (I64 indices on the CPU or the state's device; rows may repeat or drop).
  virtual void reorder(const Tensor& rows) = 0;
};

class Decoder : public Module {
 public:
  // Teacher forcing over a whole target: self_padding (B, Lt) or undefined, memory_padding (B, Ls) or
  // undefined.
  virtual Tensor forward(const Tensor& x, const Tensor& self_padding, const Tensor& memory,
                         const Tensor& memory_padding) const = 0;
  virtual std::unique_ptr<DecoderState> start_decoding(const Tensor& memory, const Tensor& memory_padding) const = 0;
  // The next position of every row: x (1, N, w) -> (1, N, w).
  virtual Tensor forward_step(const Tensor& x, DecoderState& state) const = 0;
};

// What every decoder is built from: the model's Transformer keys as layer options (width, heads,
// ff_size, dropouts, pre_norm, ffn; causal and cross-attention set by the decoder) and the layer count.
struct DecoderArgs {
  TransformerLayerOptions layer;
  int64_t num_layers = 1;
};

struct DecoderSpec {
  std::string name, help;
  std::function<std::shared_ptr<Decoder>(const DecoderArgs&, Generator&)> build;
};

// Every registered decoder, in the order the docs list them.
const std::vector<DecoderSpec>& decoders();
// The decoder named `name`; an unknown name is an error listing the choices and the nearest one.
const DecoderSpec& find_decoder(const std::string& name);
std::vector<std::string> decoder_names();

}  // namespace sru::nn
