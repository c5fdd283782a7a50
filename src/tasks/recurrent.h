// The recurrent layers of the tasks' models (SRU or LSTM, from the model config), shared by the
// char-LM and the classifier.
#pragma once

#include <memory>
#include <vector>

#include "config/config.h"
#include "nn/lstm.h"
#include "nn/sru.h"

namespace sru::tasks {

inline nn::SRUOptions sru_options(const config::ModelConfig& cfg, int64_t input_size) {
  nn::SRUOptions o;
  o.input_size = input_size;
  o.hidden_size = cfg.hidden_size;
  o.num_layers = cfg.num_layers;
  o.dropout = cfg.dropout;
  o.rnn_dropout = cfg.rnn_dropout;
  o.bidirectional = cfg.bidirectional;
  o.projection_size = cfg.projection_size;
  o.use_tanh = cfg.use_tanh;
  o.layer_norm = cfg.layer_norm;
  o.normalize_after = cfg.normalize_after;
  o.highway_bias = cfg.highway_bias;
  o.has_skip_term = cfg.has_skip_term;
  o.rescale = cfg.rescale;
  o.v1 = cfg.v1;
  return o;
}

inline nn::LSTMOptions lstm_options(const config::ModelConfig& cfg, int64_t input_size) {
  nn::LSTMOptions o;
  o.input_size = input_size;
  o.hidden_size = cfg.hidden_size;
  o.num_layers = cfg.num_layers;
  o.dropout = cfg.dropout;
  o.bidirectional = cfg.bidirectional;
  return o;
}


// The recurrent part of a task's model, SRU or LSTM by model.type, behind one forward. The owner
// registers module() under its name ("rnn"), so parameter names are the layer's own (rnn.rnn_lst.0.*
// or rnn.weight_ih_l0, ...).
struct RecurrentLayers {
  std::shared_ptr<nn::SRU> sru;
  std::shared_ptr<nn::LSTM> lstm;

  static RecurrentLayers make(const config::ModelConfig& cfg, int64_t input_size, Generator& gen) {
    RecurrentLayers r;
    if (cfg.type == "sru")
      r.sru = std::make_shared<nn::SRU>(sru_options(cfg, input_size), gen);
    else
      r.lstm = std::make_shared<nn::LSTM>(lstm_options(cfg, input_size), gen);
    return r;
  }
  std::shared_ptr<nn::Module> module() const {
    return sru ? std::static_pointer_cast<nn::Module>(sru) : std::static_pointer_cast<nn::Module>(lstm);
  }
  int64_t output_size() const { return sru ? sru->output_size() : lstm->output_size(); }
  // x (L, B, n_in), mask_pad (L, B) or undefined. `state` is the state carried in (empty = zeros; SRU:
  // {c}, LSTM: {h, c}) and is replaced by the final state. Returns the top layer's output (L, B, out).
  Tensor forward(const Tensor& x, std::vector<Tensor>& state, const Tensor& mask_pad = Tensor()) const {
    const Tensor first = state.empty() ? Tensor() : state[0], second = state.size() > 1 ? state[1] : Tensor();
    if (sru) {
      auto [h, c] = sru->forward(x, first, mask_pad);
      state = {c};
      return h;
    }
    auto r = lstm->forward(x, first, second, mask_pad);
    state = {r.h, r.c};
    return r.output;
  }
};

}  // namespace sru::tasks
