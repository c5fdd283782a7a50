// Character (byte) language modelling, as the paper's enwik8 experiment (section 4): the vocabulary
// is the 256 byte values, the file is split by proportion (train, then valid, then test: 90/5/5 by
// default, so a prefix of enwik8 splits like the full file), and each split is cut into B parallel
// contiguous streams. Training uses truncated back-propagation through time: each step reads the
// next `bptt` bytes of every stream and starts from the previous step's final state, detached.
// Evaluation walks a whole split the same way with carried state. BPC = mean cross-entropy in bits.
//
// Model (checkpoint names): embedding.weight (256, E) -> rnn (SRU: rnn.rnn_lst.{i}.*, or LSTM:
// rnn.weight_ih_l0, ...) -> dropout -> output.weight (256, out), output.bias (256).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "nn/lstm.h"
#include "nn/sru.h"
#include "tasks/recurrent.h"
#include "tasks/task.h"

namespace sru::tasks {

class CharLM : public nn::Module {
 public:
  CharLM(const config::ModelConfig& cfg, Generator& gen);
  // x (L, B) i64 byte values; state: the recurrent state carried in (empty = zeros) and replaced by
  // the state after the last step. Returns logits (L*B, 256).
  Tensor forward(const Tensor& x, std::vector<Tensor>& state) const;
  bool is_lstm() const { return rnn_.lstm != nullptr; }

 private:
  config::ModelConfig cfg_;
  Generator* gen_;
  std::shared_ptr<nn::Embedding> embedding_;
  RecurrentLayers rnn_;
  std::shared_ptr<nn::Linear> output_;
};

// Total cross-entropy (nats) and number of predictions over `bytes` cut into `streams` parallel
// streams, `chunk` bytes at a time with carried state (at most max_chunks chunks; 0 = all).
struct StreamLoss {
  double nats = 0;
  int64_t predictions = 0;
  double bits_per_char() const;
};
StreamLoss stream_loss(const CharLM& model, const std::string& bytes, int64_t streams, int64_t chunk,
                       int64_t max_chunks = 0);

// Samples n bytes after `prompt` (an empty prompt starts from a newline), temperature T > 0.
std::string generate(const CharLM& model, const std::string& prompt, int64_t n, double temperature, Generator& gen);

class CharLMTask : public Task {
 public:
  CharLMTask(const config::Config& cfg, Generator& gen, bool load_data);
  nn::Module& model() override { return *model_; }
  const CharLM& lm() const { return *model_; }
  int64_t model_size() const override { return cfg_.model.hidden_size; }
  int64_t steps_per_epoch() const override;
  void start_epoch(int64_t epoch, int64_t first_step) override;
  void reset_carried_state() override { state_.clear(); }
  StepResult forward_step(int64_t index) override;
  Metrics evaluate(const std::string& split, int64_t max_batches) override;
  std::string default_metric() const override { return "bpc"; }
  std::string token_name() const override { return "chars"; }
  std::string vocabulary_name() const override { return "bytes-256"; }
  bool lower_is_better(const std::string&) const override { return true; }
  nn::NamedTensors extra_state() override;
  void load_extra_state(const safetensors::File& file) override;

 private:
  config::Config cfg_;
  std::unique_ptr<CharLM> model_;
  std::string train_, valid_, test_;
  Tensor train_streams_;       // (B, stream length) i64
  std::vector<Tensor> state_;  // carried across training steps, detached
};

// Reads a byte file, or the member of a .zip archive (error names the path).
std::string read_bytes(const std::string& path);

}  // namespace sru::tasks
