// SQuAD v1.1 reading comprehension (the SRU paper's section 3.2): the Document Reader
// (squad_reader.h) answers each question with a span of its paragraph, trained on the training
// file's first aligned answer per question (DrQA's rule: an answer aligns when a token starts and a
// token ends exactly at its ends; the others are counted and skipped) and scored with the official
// evaluate-v1.1.py metric (data/squad_metric.h): exact match and F1 over every question of the file.
//
// Data: data.path (train-v1.1.json) and data.valid_path (dev-v1.1.json), read by data/squad.h.
// Vocabulary: <pad>, <unk>, then the words of the training questions and paragraphs by frequency (with
// data.vectors: the words of both files that the vectors cover, as DrQA); saved in the checkpoint as
// task.vocab. With vectors, only the <unk> row and the data.tune_partial most frequent question words
// are fine-tuned (the other rows stay fixed); without vectors every row is trained.
// Splits: train, valid. Metrics: f1, exact_match (x 100, as the official script), questions.
// srueval: --text FILE scores a SQuAD-format file; --predict FILE answers a JSON array of
// {"id" (optional), "context", "question"} objects; --predictions OUT writes {question id: answer}; the
// task declares the scorer `srueval squad-score --data FILE --predictions FILE` (the official metric alone).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/labeled_text.h"
#include "data/squad.h"
#include "data/squad_metric.h"
#include "data/word_vectors.h"
#include "tasks/batching.h"
#include "tasks/registry.h"
#include "tasks/squad_reader.h"
#include "tasks/task.h"

namespace sru::tasks {

struct SquadOptions {
  std::string valid_path;         // dev-v1.1.json
  bool lowercase = false;         // lower-case words for the vocabulary (the features see both forms)
  int64_t min_count = 1;          // training words seen fewer times are <unk> (without vectors)
  std::string vectors;            // pretrained word vectors ("" = embeddings trained from random)
  std::string vectors_format = "auto";
  bool normalize_vectors = false;  // DrQA keeps GloVe's norms
  int64_t tune_partial = 1000;    // with vectors: fine-tune only this many most frequent question words
  int64_t max_span = 15;          // answers are at most this many tokens (DrQA's max_len)
  int64_t pad_to_multiple = 0;    // training batches' paragraph and question lengths rounded up to multiples
};

// Paragraphs and questions as the reader reads them.
struct ReaderSplit {
  struct Example {
    int64_t paragraph = 0;
    std::string id;
    std::vector<data::Token> question;
    std::vector<int64_t> question_ids;
    int64_t start = -1, end = -1;  // the first aligned answer's tokens, -1 when none aligns
  };
  std::vector<std::string> context_text;
  std::vector<std::vector<data::Token>> contexts;
  std::vector<std::vector<int64_t>> context_ids;
  std::vector<std::vector<float>> term_frequency;  // per paragraph token: count of its lower form / length
  std::vector<Example> examples;

  std::vector<int64_t> doc_lengths() const;
  // The padded batch of examples `batch` (doc and question ids, features, masks), padded to at least
  // min_doc / min_question tokens (a data-parallel rank pads its rows as the whole batch is).
  ReaderBatch batch(const std::vector<int64_t>& batch, int64_t min_doc = 1, int64_t min_question = 1) const;
};

class SquadTask : public Task, public EvaluatesFiles, public Predicts, public StagesSteps {
 public:
  SquadTask(const config::Config& cfg, Generator& gen, const TaskContext& context);
  nn::Module& model() override { return *model_; }
  int64_t model_size() const override { return cfg_.model.hidden_size; }
  int64_t steps_per_epoch() const override;
  void start_epoch(int64_t epoch, int64_t first_step) override;
  StepResult forward_step(int64_t index) override;
  bool data_parallel() const override { return true; }
  std::vector<std::string> splits() const override { return {"train", "valid"}; }
  // Split across the ranks (collective) in data-parallel training.
  Metrics evaluate(const std::string& split, int64_t max_batches) override;
  std::vector<MetricSpec> metrics() const override {
    return {{"f1", true, false, 2}, {"exact_match", true, false, 2}, {"questions", true, true}};
  }
  std::string vocabulary_name() const override;
  nn::NamedTensors extra_state() override;

  // Captured steps (train.cuda_graphs): static paragraph, question, feature, mask and answer tensors per
  // batch shape (paragraph length x question length x questions), with data.pad_to_multiple set.
  StagesSteps* staged_steps() override { return this; }
  std::optional<std::string> staged_shape(int64_t index) const override;
  StagedStep stage_step(int64_t index) override;
  StepResult forward_staged() override;
  Generator& step_generator() override { return *gen_; }
  std::string why_not_staged() const override;

  EvaluatesFiles* file_evaluation() override { return this; }
  Predicts* prediction() override { return this; }
  Metrics evaluate_file(const std::string& path, int64_t max_batches, int64_t chunk) override;
  void predict_file(const std::string& path, std::ostream& out) override;
  Metrics evaluate_with_predictions(const std::string& split, const std::string& file, std::ostream& out) override;

  // {question id: answer text} for the examples of the first max_batches evaluation batches (0 = all).
  // Distributed: each rank answers its batches and every rank gets all the answers (collective).
  data::SquadPredictions answer(const ReaderSplit& split, int64_t max_batches, bool distributed = false);

 private:
  std::string word(const data::Token& token) const;
  // Every question of the file; the ones with an aligned answer get a training target.
  ReaderSplit encode(const data::SquadDataset& dataset) const;
  Metrics score(const data::SquadDataset& dataset, const data::SquadPredictions& predictions) const;
  // Builds vocab_ from the data (see the file comment); returns the vectors read for it, if any.
  data::WordVectors build_vocabulary();
  // Training batch `index`: this rank's questions, padded as the whole batch is (its longest paragraph
  // and question, rounded up to data.pad_to_multiple), their answers, and the batch's words.
  struct TrainingBatch {
    ReaderBatch batch;
    std::vector<int64_t> starts, ends;
    int64_t words = 0, questions = 0;  // of the whole batch (every rank's)
    BatchPart part;
  };
  TrainingBatch training_batch(int64_t index) const;
  // The paragraph and question lengths training batch `index` is padded to.
  std::pair<int64_t, int64_t> padded_lengths(int64_t index) const;
  // The loss of a batch: the cross-entropies of the answers' first and last tokens, summed.
  Tensor span_loss(const ReaderBatch& batch, const Tensor& starts, const Tensor& ends) const;

  config::Config cfg_;
  SquadOptions options_;
  dist::Communicator* comm_;
  Generator* gen_;
  data::Vocabulary vocab_;
  std::unique_ptr<DocumentReader> model_;
  data::SquadDataset train_data_, valid_data_;
  ReaderSplit train_, valid_;
  std::vector<int64_t> trainable_;              // train_ examples with a target
  std::vector<std::vector<int64_t>> batches_;  // this epoch's, as indices into trainable_
  // Captured steps' static tensors for one batch shape, on the model's device.
  struct StagedBatch {
    ReaderBatch batch;
    Tensor starts, ends;
  };
  std::map<std::string, StagedBatch> staged_;
  StagedBatch* staged_batch_ = nullptr;  // the last staged step's
  BatchPart staged_part_;
  int64_t staged_questions_ = 0;
};

TaskSpec squad_task();

}  // namespace sru::tasks
