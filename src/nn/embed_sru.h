// Embed-SRU and Super-Embed-SRU (the study "Recurrent Net Language Model using SRU", Chainer, on the
// Penn Treebank): SRU stacks whose first layer looks its candidate and gates up per input token
// instead of computing them from the input, so it has no matrix product. Layers 2.. are vanilla
// SRU layers (nn::SRULayer, with every `sru` key: v1, use_tanh, ...). Math: ops/embed_sru_math.h.
//
//   Embed-SRU, first layer:        c = f c + (1 - f) x~     h = m r g(c) + (1 - m r) x
//   Super-Embed-SRU, first layer:  c = f c + x~'            h = m r g(c) + x
// x~, x~', f, r are rows of per-token tables (V, d) chosen by the token ids; x is the layer's input
// (in a language model the word embedding, itself a per-word table, as in the study). f and r are
// used as they are (no sigmoid): they start near 0.5 (sigmoid of U(-0.1, 0.1), as the study) and are
// clipped to [0.01, 0.99] after every optimiser update (the after-update hook, nn::Module). g = tanh
// with model.use_tanh; m is the dropout mask of model.dropout (training only, fixed across time, as
// the SRU's). model.embed_dropout drops elements of the looked-up candidate (the study's 0.5).
//
// Parameter names (no counterpart in the PyTorch `sru` package; docs/checkpoint-format.md):
//   rnn_lst.0.candidate.weight   (V, d)   Embed-SRU: x~
//   rnn_lst.0.cell_input.weight  (V, d)   Super-Embed-SRU: x~' (what each step adds to c)
//   rnn_lst.0.forget.weight      (V, d)   f
//   rnn_lst.0.reset.weight       (V, d)   r
//   rnn_lst.{i}.*                         layers i >= 1: as the SRU's (nn/sru.h)
// The input size must equal hidden_size (x is added to h); one direction only. The carried state is
// the SRU's: {c (layers, B, d)}.
//
// A trained v1 SRU converts to Super-Embed-SRU exactly (convert_to_super_embed): without the
// c_{t-1} terms, f, r, (1 - f) x~ and (1 - r) x' depend on the input vector alone, so they can be
// computed once per vocabulary word.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/encoder.h"
#include "nn/layers.h"
#include "nn/sru.h"

namespace sru::nn {

struct EmbedSRUOptions : SRUOptions {
  double embed_dropout = 0.0;  // dropout on the first layer's looked-up candidate (training only)
};

enum class EmbedSRUForm { Embed, SuperEmbed };

class EmbedSRULayer : public Module {
 public:
  static constexpr double kGateMin = 0.01, kGateMax = 0.99;

  EmbedSRULayer(int64_t vocab_size, EmbedSRUForm form, const EmbedSRUOptions& options, double dropout, Generator& gen);
  // x (L, B, d): the skip input; tokens (L, B) ids; c0 (B, d) or undefined -> (h (L, B, d), c (B, d)).
  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& tokens, const Tensor& c0,
                                    const Tensor& mask_pad) const;

  EmbedSRUForm form;
  double dropout;
  EmbedSRUOptions options;
  std::shared_ptr<Embedding> candidate, forget, reset;  // candidate: x~ (Embed) or x~' (Super-Embed)

 protected:
  void on_after_update() override;  // clips the gate tables into [kGateMin, kGateMax]

 private:
  Generator* gen_;
};

class EmbedSRU : public SequenceEncoder {
 public:
  EmbedSRU(const EmbedSRUOptions& options, int64_t vocab_size, EmbedSRUForm form, Generator& gen = default_generator());
  // The encoder interface: needs input.tokens; state CellState {c (layers, B, d)}.
  Tensor forward_sequence(const EncoderInput& input, EncoderStatePtr& state) const override;
  EncoderStatePtr state_from(const std::vector<Tensor>& tensors) const override;
  int64_t output_size() const override { return options.hidden_size; }
  int64_t directions() const override { return 1; }

  EmbedSRUOptions options;
  std::shared_ptr<EmbedSRULayer> first;
  std::vector<std::shared_ptr<SRULayer>> upper;  // layers 1 .. num_layers-1
};

// A v1 SRU (`sru`, named `type` in errors) in Super-Embed-SRU form, for inputs that are rows of a
// table (a language model's word embedding, rows (V, n_in)): `encoder` is the complete state of the
// equivalent super-embed-sru encoder (layers >= 1 copied), and `input_rows` (V, d) the rows its input
// table must hold instead: x' = (1 - r) alpha x (or (1 - r) u3 with k = 4; zeros without the skip
// term). The SRU must be in evaluation mode. Refused, naming the reason: another encoder, a non-v1
// SRU (its gates depend on the state), a bidirectional one, layer norm after the recurrence.
struct SuperEmbedConversion {
  NamedTensors encoder;
  Tensor input_rows;
};
SuperEmbedConversion convert_to_super_embed(const SequenceEncoder& sru, const std::string& type, const Tensor& rows);

EncoderSpec embed_sru_encoder();
EncoderSpec super_embed_sru_encoder();

}  // namespace sru::nn
