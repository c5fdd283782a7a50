// What a task supplies to the shared trainer and to srueval: its model, its training batches (as a
// forward pass returning the loss), its splits and metrics, any extra state a resumed run needs, and
// optional capabilities (evaluate a user's file, predict, generate, convert the model) that srueval asks
// for by name.
#pragma once

#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "nn/encoder.h"
#include "nn/module.h"
#include "search/search.h"

namespace sru::tasks {

using Metrics = std::map<std::string, double>;

// One number a task reports. Counts (how many characters or examples an evaluation covered) go into
// metrics.jsonl and summaries but not into the log lines.
struct MetricSpec {
  std::string name;
  bool higher_is_better = false;
  bool is_count = false;
  int precision = 4;  // digits after the point in log lines
};

struct StepResult {
  Tensor loss;     // scalar: the mean loss to minimise (of this rank's rows, in data-parallel training)
  int64_t tokens;  // how many predictions the whole (global) batch covers (for tokens/s)
  // Data parallel: this rank's share of the global batch's loss terms (its predictions over the whole
  // batch's). The ranks' gradients are summed weighted by it, which gives the gradient of the global
  // batch's mean loss even when the shares differ. 1 in a single process.
  double share = 1.0;
  // How many loss terms the whole (global) batch's mean loss averages over, when that is not `tokens`
  // (0: `tokens`), e.g. the examples of a classifier whose `tokens` counts words. With train.accumulate
  // the batches of one update are weighted by it (train/step.h).
  int64_t terms = 0;
  int64_t loss_terms() const { return terms > 0 ? terms : tokens; }
};
// Copies `host` into the static tensor `slot` on `device`, made with host's shape and dtype at its first
// staging: a host-to-device copy through the runtime's staging buffer, queued without a host wait.
void stage_into(Tensor& slot, const Tensor& host, Device device);

// The training loss of a task's classes: cross-entropy over logits (N, C) with the run's
// train.label_smoothing (ops/softmax.h), mean over the rows whose target is not ignore_index. Every
// task's training loss goes through it; evaluation metrics use the plain cross_entropy.
Tensor training_cross_entropy(const Tensor& logits, const Tensor& target, const config::TrainConfig& train,
                              int64_t ignore_index = -100);

// srueval --text FILE: metrics over a file the user names, in the task's own format.
class EvaluatesFiles {
 public:
  virtual ~EvaluatesFiles() = default;
  // chunk: positions per forward pass where the task reads streams (0 = the task's default).
  virtual Metrics evaluate_file(const std::string& path, int64_t max_batches, int64_t chunk) = 0;
};

// srueval --predict FILE: answers for inputs without labels, written to `out` in the task's format;
// srueval --predictions OUT: the answers behind an evaluation, in the format the task's scorer reads.
class Predicts {
 public:
  virtual ~Predicts() = default;
  virtual void predict_file(const std::string& path, std::ostream& out) = 0;
  // Evaluates a split (or, when `file` is not empty, a file as EvaluatesFiles reads it), writing the
  // model's answers to `out`; returns the metrics of exactly those answers.
  virtual Metrics evaluate_with_predictions(const std::string& split, const std::string& file, std::ostream& out) = 0;
};

// How srueval --generate decodes (through the search layer, src/search/search.h).
struct GenerationOptions {
  enum class Strategy { Sample, Greedy, Beam };
  Strategy strategy = Strategy::Sample;
  int64_t tokens = 100;                // tokens to generate after the prompt
  int64_t batch = 1;                   // continuations decoded together (samples differ; greedy/beam repeat)
  search::SamplingOptions sampling;    // temperature, top_k, top_p, seed
  search::BeamOptions beam;            // beam_size, length_penalty, n_best
};

// srueval --generate N: continuations of `prompt`: for each of the batch's rows, its n-best texts
// (one for sampling and greedy decoding), best first.
class Generates {
 public:
  virtual ~Generates() = default;
  virtual std::vector<std::vector<std::string>> generate(const std::string& prompt, const GenerationOptions& options) = 0;
};

// srueval --translate FILE|-: sentences in, translations out (sequence-to-sequence tasks).
struct TranslationOptions {
  bool beam = true;             // false: greedy
  int64_t beam_size = 0;        // 0: the checkpoint's eval.beam_size
  double length_penalty = -1;   // < 0: the checkpoint's eval.length_penalty
  int64_t n_best = 1;           // translations written per source (<= the beam size), best first
  int64_t buffer_lines = 1024;  // source lines read before they are translated together
};
struct TranslationStats {
  int64_t sentences = 0;
  int64_t target_tokens = 0;  // of the written translations, the end token left out
  double seconds = 0;         // translating only (reading and writing left out)
  std::string search;         // e.g. "beam 5, length penalty 0.6"
};
class Translates {
 public:
  virtual ~Translates() = default;
  // Reads source lines from next_line (false at the end; `input` names them in errors) and writes
  // options.n_best lines per source to `out`, flushed after every buffer of lines.
  virtual TranslationStats translate_lines(const std::function<bool(std::string&)>& next_line,
                                           const std::string& input, std::ostream& out,
                                           const TranslationOptions& options) = 0;
};
// "translated N sentences in S s: X sentences/s, Y target tokens/s (beam 5, length penalty 0.6)".
std::string translation_speed(const TranslationStats& stats);

// srueval --convert FORM: the same model in another form that computes the same outputs (e.g. a v1 SRU's
// first layer as Super-Embed-SRU tables).
struct ConvertedModel {
  config::Config config;   // the converted model's config
  nn::NamedTensors state;  // every tensor of the converted model, by name
};
class ConvertsModel {
 public:
  virtual ~ConvertsModel() = default;
  // Throws, naming the reason, when `form` does not apply to this model.
  virtual ConvertedModel convert_model(const std::string& form) = 0;
};

// Training steps that a CUDA graph can capture and replay (train.cuda_graphs, train/step.h): the
// step's inputs (and any state it carries between steps) live in tensors allocated once per batch shape
// on the model's device (static tensors), which each step of that shape overwrites, so that a replay of
// the captured forward, backward and update reads the next step's data at the addresses the capture saw.
struct StagedStep {
  std::string shape;   // the batch shape's key: steps of one key replay one graph
  int64_t tokens = 0;  // StepResult::tokens of this step (the captured forward's are the capture's)
  int64_t terms = 0;   // StepResult::terms of this step (0: tokens), which train.accumulate weights it by
  int64_t loss_terms() const { return terms > 0 ? terms : tokens; }
};
class StagesSteps {
 public:
  virtual ~StagesSteps() = default;
  // The batch shape's key of training step `index` when it can run from static tensors, computed
  // without building the batch; nothing when it cannot (why_not_staged; an epoch's short last batch; a
  // carried state not settled yet), and the trainer then runs forward_step.
  virtual std::optional<std::string> staged_shape(int64_t index) const = 0;
  // The key staged_shape(index) gives once a carried state has settled (nothing for a batch that is
  // never staged): what the trainer plans an epoch's graphs by, before its first step.
  virtual std::optional<std::string> planned_shape(int64_t index) const { return staged_shape(index); }
  // Copies step `index`'s inputs (and the carried state, after eager steps replaced it) into the
  // static tensors of its shape (made at its first staging), on the device's stream without a host
  // wait. Only for a step staged_shape answers for; forward_step may follow it instead of
  // forward_staged (a capture that failed), continuing from the staged state.
  virtual StagedStep stage_step(int64_t index) = 0;
  // The forward pass of the last staged step, from its static tensors (and the static carried state,
  // leaving the state it ends with there). Its host code neither waits on the device nor copies from
  // the host, and the kernels it queues read their inputs' ids unchecked (the staged ids are the task's
  // own, in range by construction: cuda::CallerCheckedInputs), so that it can be captured. Apart from
  // the device work, the same for every step of one shape (a replay repeats only that).
  virtual StepResult forward_staged() = 0;
  // The generator the forward pass draws dropout masks from (the trainer points it at the replayed
  // step's Philox base: core/rng.h).
  virtual Generator& step_generator() = 0;
  // Why no step of this run can be staged (the model cannot be captured on its device), or "".
  virtual std::string why_not_staged() const { return ""; }
};

// why_not_staged's reason for a task whose encoder (model.type `type`) cannot be captured on `device`
// (nn::SequenceEncoder::capturable_on), or "".
std::string encoder_not_capturable(const nn::SequenceEncoder& encoder, const std::string& type, Device device);

class Task {
 public:
  virtual ~Task() = default;
  virtual nn::Module& model() = 0;
  virtual int64_t model_size() const = 0;       // the d of the noam schedule
  virtual int64_t steps_per_epoch() const = 0;
  // Called before step `first_step` of `epoch`: 0 at the start of an epoch, or where a resumed run
  // continues in the middle of one (the task must then recreate the same epoch, e.g. its batch order).
  virtual void start_epoch(int64_t epoch, int64_t first_step) = 0;
  // Forgets state carried between steps (after a skipped non-finite step, which may have poisoned it).
  virtual void reset_carried_state() {}
  // The forward pass of training step `index` (0-based within the epoch). In data-parallel training
  // (a task that says data_parallel()) each rank computes its rows of the global batch: the rows the
  // single process would compute, padded as the whole batch is, with the generator's batch shard set so
  // that dropout masks are the single process's for those rows (core/rng.h, ops/dropout.h).
  virtual StepResult forward_step(int64_t index) = 0;
  // True when the task splits its batches and evaluations across the ranks of the communicator it was
  // made with (TaskContext::comm); the trainer refuses more than one rank for the others.
  virtual bool data_parallel() const { return false; }
  // How the global batch is split among the ranks, in words, when it is not data.batch_size sequences
  // divided evenly (which the trainer then checks); "" for that default.
  virtual std::string batch_split() const { return ""; }

  // The splits evaluate() accepts. The trainer evaluates validation_split() during training and every
  // split but "train" at the end.
  virtual std::vector<std::string> splits() const { return {"train", "valid", "test"}; }
  virtual std::string validation_split() const { return "valid"; }
  // Evaluates a split on at most max_batches batches (0 = all), in eval mode. An unknown split is an
  // error naming the task's splits (check_split). A data-parallel task splits the work across its
  // ranks and returns every rank the metrics of the whole split (a collective call).
  virtual Metrics evaluate(const std::string& split, int64_t max_batches) = 0;
  // The metrics evaluate() returns; the first is the default that picks the best checkpoint.
  virtual std::vector<MetricSpec> metrics() const = 0;
  // What one prediction is called in speed reports ("chars" for a char-LM).
  virtual std::string token_name() const { return "tokens"; }
  // What the checkpoint metadata's "vocabulary" says the model's input ids are.
  virtual std::string vocabulary_name() const = 0;
  // State beyond the model and optimiser that a resumed run needs, saved as "task.*" tensors. Data
  // parallel: every rank calls it (it may gather the ranks' parts) and gets the whole state; loading
  // takes this rank's part of it.
  virtual nn::NamedTensors extra_state() { return {}; }
  virtual void load_extra_state(const safetensors::File&) {}

  // Capabilities: nullptr when the task has none of that kind.
  virtual EvaluatesFiles* file_evaluation() { return nullptr; }
  virtual Predicts* prediction() { return nullptr; }
  virtual Generates* generation() { return nullptr; }
  virtual Translates* translation() { return nullptr; }
  virtual ConvertsModel* model_conversion() { return nullptr; }
  // Training steps a CUDA graph can replay (train.cuda_graphs); null: every step runs eagerly.
  virtual StagesSteps* staged_steps() { return nullptr; }

  const std::string& name() const { return name_; }
  void set_name(const std::string& name) { name_ = name; }
  // The spec of `metric`; an error naming the task's metrics when it reports no such metric.
  MetricSpec metric(const std::string& metric) const;

 protected:
  // Throws unless `split` is one of splits().
  void check_split(const std::string& split) const;

 private:
  std::string name_;
};

// "bpc 2.1788  loss 1.5102": the metrics a task declares, in its order and precision, counts left out.
std::string format_metrics(const Task& task, const Metrics& metrics);

// Text in a checkpoint (a vocabulary, a subword model): its bytes as a 1-d i32 tensor, and back
// (`name` is the tensor's name in errors).
Tensor string_tensor(const std::string& text);
std::string tensor_string(const Tensor& t, const std::string& name);
// The text saved as tensor `name` in a checkpoint; an error naming `task` when it is missing.
std::string checkpoint_string(const safetensors::File& file, const std::string& name, const std::string& task);

}  // namespace sru::tasks
