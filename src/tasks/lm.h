// Token-stream language modelling, for any token vocabulary: bytes (task charlm: enwik8, bits per
// character, as the paper's section 4) or words (task wordlm: the Penn Treebank, perplexity). Each
// split is cut into B parallel contiguous streams (the tail that does not fill every stream is
// dropped). Training uses truncated back-propagation through time: each step reads the next `bptt`
// tokens of every stream and starts from the previous step's final state, detached. Evaluation walks a
// whole split the same way with its own carried state, so the training state is untouched.
//
// charlm: one byte file (plain or the member of a .zip) split by proportion: train, then valid, then
//   test (90/5/5 by default, so a prefix of enwik8 splits like the full file); token id = byte value.
// wordlm: three text files (Mikolov's ptb.{train,valid,test}.txt); words split on whitespace, "<eos>"
//   at each line end; the vocabulary comes from the training file (most frequent first, ties in byte
//   order) and travels in the checkpoint ("task.vocab"); a word outside it reads as "<unk>" when the
//   vocabulary has one and is an error naming file:line otherwise.
//
// Model (checkpoint names): embedding.weight (V, E) -> dropout -> rnn (the encoder: rnn.rnn_lst.{i}.* for
// the SRU, rnn.weight_ih_l0, ... for the LSTM) -> dropout -> output.weight (V, H), output.bias (V). With
// model.tie_weights the output layer uses the embedding matrix (E must equal H); the tensor is stored
// once, as embedding.weight. With model.init_range a > 0 the embedding and the output layer start
// U(-a, a) (Zaremba et al. 2014, and the Embed-SRU study: 0.1) instead of N(0, 1) and U(+-1/sqrt(H));
// the encoder keeps its own initialisation.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "nn/encoder.h"
#include "nn/layers.h"
#include "tasks/registry.h"
#include "tasks/task.h"

namespace sru::tasks {

struct LMOptions {
  int64_t bptt = 100;             // truncated back-propagation length (unroll)
  double valid_fraction = 0.05;   // charlm: of the file
  double test_fraction = 0.05;    // charlm: the end of the file
  std::string valid_path, test_path;  // wordlm
  bool tie_weights = false;
  double init_range = 0.0;  // > 0: embedding and output layer U(-a, a) (Zaremba et al. 2014); 0: module defaults
};

// Token <-> id for a stream: the 256 byte values, or a word list.
class StreamVocabulary {
 public:
  static StreamVocabulary bytes();
  // The words of a training text (one sentence a line), with "<eos>" for each line end.
  static StreamVocabulary words_of(const std::string& path, const std::string& key);
  // From the newline-separated word list that serialize() writes.
  static StreamVocabulary deserialize(const std::string& text);
  std::string serialize() const;

  bool is_bytes() const { return words_.empty(); }
  int64_t size() const { return is_bytes() ? 256 : static_cast<int64_t>(words_.size()); }
  // The ids of a file's tokens (bytes: every byte; words: words and "<eos>" per line); `key` names the
  // config key or option in errors.
  std::vector<int32_t> encode_file(const std::string& path, const std::string& key) const;
  // The ids of a text typed by a user (a prompt): bytes, or its words without a final "<eos>".
  std::vector<int32_t> encode_text(const std::string& text) const;
  // Text for generated ids: bytes as they are; words joined by spaces, "<eos>" as a line end.
  std::string decode(const std::vector<int32_t>& ids) const;
  std::string name() const;  // "bytes-256" or "words-10000 (task.vocab)"

 private:
  int32_t word_id(const std::string& word, const std::string& where) const;
  std::vector<std::string> words_;
  std::unordered_map<std::string, int32_t> ids_;
};

class LanguageModel : public nn::Module {
 public:
  LanguageModel(const config::Config& cfg, int64_t vocab_size, Generator& gen);
  // x (L, B) i64 token ids; state: the encoder state carried in (null = zeros), replaced by the state
  // after the last step. Returns logits (L*B, V).
  Tensor forward(const Tensor& x, nn::EncoderStatePtr& state) const;
  // The encoder's state from a checkpoint's tensors (nn::SequenceEncoder::state_from).
  nn::EncoderStatePtr state_from(const std::vector<Tensor>& tensors) const;
  const nn::SequenceEncoder& encoder() const { return *rnn_; }
  // The state of the equivalent model whose encoder is super-embed-sru (nn::convert_to_super_embed; the
  // encoder must be a v1 SRU, named `type` in errors): embedding.weight becomes the per-word skip rows
  // (V, H), rnn.* the Super-Embed-SRU's tensors, and the output layer keeps its weight (the embedding
  // matrix when tied, which the converted model then holds untied as output.weight). Eval mode.
  nn::NamedTensors super_embed_state(const std::string& type) const;

 private:
  config::ModelConfig cfg_;
  Generator* gen_;
  std::shared_ptr<nn::Embedding> embedding_;
  std::shared_ptr<nn::SequenceEncoder> rnn_;
  std::shared_ptr<nn::Linear> output_;
};

// Total cross-entropy (nats) and number of predictions over `tokens` cut into `streams` parallel
// streams, `chunk` tokens at a time with carried state (at most max_chunks chunks; 0 = all).
struct StreamLoss {
  double nats = 0;
  int64_t predictions = 0;
};
// `part`: only streams [first, first + count) of them (count -1 = all), as a data-parallel rank does.
StreamLoss stream_loss(const LanguageModel& model, const std::vector<int32_t>& tokens, int64_t streams, int64_t chunk,
                       int64_t max_chunks = 0, dist::Rows part = {0, -1});

class LanguageModelTask : public Task, public EvaluatesFiles, public Generates, public ConvertsModel, public StagesSteps {
 public:
  // A byte-level model (charlm) or a word-level one (wordlm); `checkpoint` supplies a word vocabulary.
  LanguageModelTask(const config::Config& cfg, Generator& gen, bool words, const TaskContext& context);
  nn::Module& model() override { return *model_; }
  int64_t model_size() const override { return cfg_.model.hidden_size; }
  int64_t steps_per_epoch() const override;
  void start_epoch(int64_t epoch, int64_t first_step) override;
  void reset_carried_state() override {
    state_ = nullptr;
    state_shapes_settled_ = false;
  }
  StepResult forward_step(int64_t index) override;
  bool data_parallel() const override { return true; }
  Metrics evaluate(const std::string& split, int64_t max_batches) override;
  std::vector<MetricSpec> metrics() const override;
  std::string token_name() const override { return vocab_.is_bytes() ? "chars" : "words"; }
  std::string vocabulary_name() const override { return vocab_.name(); }
  nn::NamedTensors extra_state() override;
  void load_extra_state(const safetensors::File& file) override;

  EvaluatesFiles* file_evaluation() override { return this; }
  Generates* generation() override { return this; }
  ConvertsModel* model_conversion() override { return this; }
  StagesSteps* staged_steps() override { return this; }
  // Captured steps (train.cuda_graphs): the steps of bptt tokens (every step of an epoch but a short
  // last one) from static input, target and carried-state tensors: one shape.
  std::optional<std::string> staged_shape(int64_t index) const override;
  std::optional<std::string> planned_shape(int64_t index) const override;
  StagedStep stage_step(int64_t index) override;
  StepResult forward_staged() override;
  Generator& step_generator() override { return *gen_; }
  std::string why_not_staged() const override;
  // One stream from a zero state; the result does not depend on chunk (0 = data.bptt).
  Metrics evaluate_file(const std::string& path, int64_t max_batches, int64_t chunk) override;
  std::vector<std::vector<std::string>> generate(const std::string& prompt, const GenerationOptions& options) override;
  // "super-embed": a v1 SRU model as the same model with model.type super-embed-sru (untied weights).
  ConvertedModel convert_model(const std::string& form) override;

 private:
  Metrics metrics_of(const StreamLoss& loss) const;
  // Whether the carried state can be staged: the last step's was, or the last eager step kept its
  // shapes (state_shapes_settled_) and they are the staged ones (none for a stateless encoder).
  bool carried_state_stageable() const;
  // Makes state_ the static carried state (staged_state_), holding the state training continues from.
  void stage_carried_state();

  config::Config cfg_;
  LMOptions options_;
  dist::Communicator* comm_;
  Generator* gen_;
  dist::Rows streams_;  // this rank's training streams (all of them in a single process)
  StreamVocabulary vocab_;
  std::unique_ptr<LanguageModel> model_;
  std::vector<int32_t> train_, valid_, test_;
  int64_t stream_length_ = 0;   // of the training streams
  nn::EncoderStatePtr state_;  // this rank's streams' state, carried across training steps, detached
  // Captured steps' static tensors (stage_step): ids (bptt, B) and targets (bptt * B) i64 on the model's
  // device, and the carried state's own tensors, which state_ points at while staged steps run.
  Tensor staged_input_, staged_target_;
  nn::EncoderStatePtr staged_state_;
  // Whether the last eager step ended with a state of the shapes it started from (a staged step keeps
  // them; none before and after for a stateless encoder): false after a start from no state (an
  // epoch's start, a reset, a resumed run), or while an SRU++ memory grows to its length.
  bool state_shapes_settled_ = false;
};

TaskSpec charlm_task();
TaskSpec wordlm_task();

}  // namespace sru::tasks
