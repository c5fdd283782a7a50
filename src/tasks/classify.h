// Sentence classification (the paper's section 3.1: MR, SUBJ, CR, MPQA, TREC, SST). Each example is
// a labelled sentence; the model reads its words and the recurrent output at the sentence's last
// word predicts the class (bidirectional: the forward direction at the last word next to the
// backward direction at the first).
//
// Model (checkpoint names): embedding.weight (V, E) -> dropout -> rnn (SRU rnn.rnn_lst.{i}.* or LSTM
// rnn.weight_ih_l0, ...; padded batches through mask_pad) -> dropout -> output.weight (C, out),
// output.bias (C). Embeddings: pretrained vectors where the file has the word, U(-0.25, 0.25) for
// the others (Kim 2014), the padding row 0; every row but <pad> scaled to unit L2 norm when
// data.normalize_embeddings (the reference classifier's EmbeddingLayer); fixed when
// model.freeze_embedding.
//
// The reference protocol (asappresearch/sru classification/, the paper's Table 1) in config keys:
// data.tokenizer clean_str, data.vocab_from all, data.batching fixed, data.normalize_embeddings true,
// model.freeze_embedding true (configs/classify/*.yaml; docs/results.md has what each one changes).
//
// Splits: data.test_path given -> train on data.path (valid from data.valid_path or held out);
// otherwise k-fold cross-validation on data.path with data.fold the test fold (see
// data::cross_validation_split). Batches group sentences of similar length (bucketing), reshuffled
// every epoch; or, with data.batching fixed, the reference's: consecutive sentences of one seeded
// shuffle, the same batches in the same order every epoch.
// Checkpoints carry the vocabulary ("task.vocab") and a SentencePiece model ("task.subword_model"),
// as bytes in i32 tensors, so a checkpoint alone classifies new text.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/labeled_text.h"
#include "nn/encoder.h"
#include "nn/layers.h"
#include "tasks/batching.h"
#include "tasks/registry.h"
#include "tasks/task.h"

namespace sru::tasks {

// The classify task's own config keys (data.*).
struct ClassifyOptions {
  double valid_fraction = 0.05;   // of the training examples, when valid_path is empty
  std::string valid_path;         // "" = hold out valid_fraction of the training examples
  std::string test_path;          // "" = k-fold cross-validation on data.path
  int64_t folds = 10;             // cross-validation folds
  int64_t fold = -1;              // the test fold of this run; -1 = run every fold and report mean/std
  int64_t run_folds = 0;          // with fold -1: run only the first N folds (0 = all); for quick estimates
  bool lowercase = false;
  std::string tokenizer = "whitespace";  // whitespace | clean_str | sentencepiece
  std::string sentencepiece_model;       // "" = train one on the training split
  int64_t sentencepiece_vocab_size = 8000;
  int64_t min_count = 1;          // words seen fewer times in training are <unk>
  std::string vocab_from = "train";  // train | all: the words of the training split, or of every split
  std::string batching = "bucketed";  // bucketed (by length, reshuffled each epoch) | fixed (the reference's)
  int64_t pad_to_multiple = 0;    // training batches padded to a multiple of this length (0 = the longest)
  std::string vectors;            // pretrained word vectors ("" = random trainable embeddings)
  std::string vectors_format = "auto";  // auto | text | word2vec
  bool normalize_vectors = true;  // scale each pretrained vector to unit L2 norm
  bool normalize_embeddings = false;  // scale every row (random ones too, not <pad>) to unit L2 norm
};

class Classifier : public nn::Module {
 public:
  Classifier(const config::Config& cfg, int64_t vocab_size, int64_t num_classes, Generator& gen);
  // x (L, B) i64 word ids, 0 = padding after a sentence's end; lengths (B) >= 1 -> logits (B, C).
  Tensor forward(const Tensor& x, const std::vector<int64_t>& lengths) const;
  // The same from what forward makes of the lengths: mask_pad (L, B) f32, 1 at padding (undefined: no
  // padding), and last_rows (B * D) i64, the rows of h's (L * B * D, H) view that the output layer
  // reads (last_rows_of). Any device; the host reads neither.
  Tensor forward(const Tensor& x, const Tensor& mask_pad, const Tensor& last_rows) const;
  // The padding mask (undefined when every length is L) and the output rows of a batch, on the CPU.
  Tensor padding_mask_of(const std::vector<int64_t>& lengths, int64_t L) const;
  Tensor last_rows_of(const std::vector<int64_t>& lengths, int64_t L) const;
  const nn::SequenceEncoder& encoder() const { return *rnn_; }
  nn::Embedding& embedding() { return *embedding_; }
  int64_t num_classes() const { return output_->weight.size(0); }

 private:
  config::ModelConfig cfg_;
  Generator* gen_;
  std::shared_ptr<nn::Embedding> embedding_;
  std::shared_ptr<nn::SequenceEncoder> rnn_;
  std::shared_ptr<nn::Linear> output_;
};

// Sentences as word ids, with their labels.
struct EncodedSplit {
  std::vector<std::vector<int64_t>> ids;
  std::vector<int64_t> labels;
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  std::vector<int64_t> lengths() const {
    std::vector<int64_t> out;
    for (const auto& s : ids) out.push_back(static_cast<int64_t>(s.size()));
    return out;
  }
};

class ClassifyTask : public Task, public EvaluatesFiles, public Predicts, public StagesSteps {
 public:
  // context.checkpoint: when given, the vocabulary and subword model come from it and no vectors are read.
  ClassifyTask(const config::Config& cfg, Generator& gen, const TaskContext& context);
  nn::Module& model() override { return *model_; }
  int64_t model_size() const override { return cfg_.model.hidden_size; }
  int64_t steps_per_epoch() const override;
  void start_epoch(int64_t epoch, int64_t first_step) override;
  StepResult forward_step(int64_t index) override;
  bool data_parallel() const override { return true; }
  // Captured steps (train.cuda_graphs): static ids, padding mask, output rows and labels per batch
  // shape (padded length, batch size); data.pad_to_multiple bounds the shapes. Not for encoders that
  // cannot be captured on the model's device (the LSTM on a GPU).
  StagesSteps* staged_steps() override { return this; }
  std::optional<std::string> staged_shape(int64_t index) const override;
  StagedStep stage_step(int64_t index) override;
  StepResult forward_staged() override;
  Generator& step_generator() override { return *gen_; }
  std::string why_not_staged() const override;
  // Split across the ranks (collective) in data-parallel training.
  Metrics evaluate(const std::string& split, int64_t max_batches) override;
  std::vector<MetricSpec> metrics() const override {
    return {{"accuracy", true}, {"loss", false}, {"examples", false, true}};
  }
  std::string token_name() const override { return "words"; }
  std::string vocabulary_name() const override;
  nn::NamedTensors extra_state() override;

  EvaluatesFiles* file_evaluation() override { return this; }
  Predicts* prediction() override { return this; }
  // Accuracy and loss on any labelled file (tokenised with this task's tokenizer and vocabulary).
  Metrics evaluate_file(const std::string& path, int64_t max_batches, int64_t chunk) override;
  // One predicted class a line, for a file of sentences without labels.
  void predict_file(const std::string& path, std::ostream& out) override;
  // One predicted class a line for the split's (or a labelled file's) sentences, in their order.
  Metrics evaluate_with_predictions(const std::string& split, const std::string& file, std::ostream& out) override;
  // The predicted class of each sentence (a text without a label).
  std::vector<int64_t> predict(const std::vector<std::string>& sentences);
  const data::Vocabulary& vocabulary() const { return vocab_; }
  int64_t pretrained_words() const { return pretrained_words_; }

 private:
  std::vector<std::string> tokens(const std::string& text) const;
  EncodedSplit encode(const std::vector<data::LabeledSentence>& sentences) const;
  // Accuracy and loss; with `predicted`, also each example's predicted class (index order). Distributed:
  // each rank runs its batches and the sums are added over the ranks (predicted is then partial).
  Metrics evaluate_encoded(const EncodedSplit& split, int64_t max_batches, std::vector<int64_t>* predicted = nullptr,
                           bool distributed = false);
  EncodedSplit encode_file(const std::string& path) const;
  // Runs the model in evaluation mode over length-sorted batches of split (at most max_batches; 0 =
  // all), calling fn(example indices, logits (B, C)) for each; distributed: for this rank's batches only.
  void eval_batches(const EncodedSplit& split, int64_t max_batches, bool distributed,
                    const std::function<void(const std::vector<int64_t>&, const Tensor&)>& fn);
  void init_embeddings(Generator& gen);
  void load_vectors(float* weight, int64_t V, int64_t E);  // pretrained rows over the random ones
  static void normalize_rows(float* weight, int64_t V, int64_t E);

  config::Config cfg_;
  ClassifyOptions options_;
  dist::Communicator* comm_;
  Generator* gen_;
  std::optional<data::SubwordModel> subwords_;
  data::Vocabulary vocab_;
  std::unique_ptr<Classifier> model_;
  EncodedSplit train_, valid_, test_;
  std::vector<std::vector<int64_t>> batches_;  // this epoch's training batches (example indices)
  // A training batch as it is fed to the model: (L, B) ids padded to L (data.pad_to_multiple) and
  // its sentences' lengths and labels, on the CPU.
  struct PaddedBatch {
    Tensor ids;
    std::vector<int64_t> lengths, labels;
    int64_t words = 0;
    BatchPart part;
  };
  PaddedBatch padded_batch(int64_t index) const;
  // The length a training batch's ids are padded to: its longest sentence, rounded up to
  // data.pad_to_multiple.
  int64_t padded_length(const std::vector<int64_t>& batch) const;
  // Captured steps' static tensors for one batch shape, on the model's device.
  struct StagedBatch {
    Tensor ids, mask_pad, last_rows, labels;
  };
  std::map<std::string, StagedBatch> staged_;
  StagedBatch* staged_batch_ = nullptr;  // the last staged step's
  BatchPart staged_part_;
  int64_t staged_examples_ = 0;
  int64_t pretrained_words_ = 0;
};

// Reads a labelled file, warning (once, with line numbers) about lines that hold a label only;
// `key` (the config key or option that named the file) is in the error when it cannot be opened.
std::vector<data::LabeledSentence> read_sentences(const std::string& path, const std::string& key);

TaskSpec classify_task();

}  // namespace sru::tasks
