// Machine translation (task `translate`): the SRU paper's Table 3 setting, a Transformer encoder-decoder
// whose feed-forward sublayers are ReLU blocks or SRUs (model.ffn), trained on parallel text with one
// SentencePiece model shared by source and target, decoded with the search layer (greedy or beam with
// the GNMT length penalty) and scored with BLEU exactly as sacreBLEU (data/bleu.h).
//
// Data: data.path / data.target_path (training source / target, plain or .gz, UTF-8, one sentence a
// line), data.valid_* and data.test_*; the SentencePiece model is data.spm_model or trained here on
// both sides of the training data (data.vocab_size pieces) and saved in the checkpoint
// (task.spm_model). Ids: pad 0, unk 1, bos 2, eos 3 (data/sentencepiece_model.h). The source is its
// pieces then eos; the decoder reads bos then the target pieces and predicts the pieces then eos.
// Batches hold up to data.max_tokens padded tokens (sentences x the longest side), cut once from the
// length-sorted training pairs and shuffled in order every epoch (fairseq's batching: the same batches
// each epoch, so an epoch has a fixed number of steps). Training batches pad each side to its longest
// length, rounded up to data.pad_to_multiple and then to the next of data.length_buckets (tensor2tensor's
// and tf.data's length buckets): few batch shapes, so that CUDA graphs cover an epoch.
//
// Model (names): embedding.weight (V, w), shared by the source, the target and the output layer
// (tied; output.bias (V)); encoder.* (the registry's Transformer encoder, model.type transformer, not
// causal); decoder.* (the decoder registry's model.decoder, nn/decoder.h: `transformer`, whose layers
// decoder.layers.{i}.* hold self_attn, context_attn, feed_forward, layer_norm_1, layer_norm_2, with
// decoder.layer_norm (pre-norm only); `ssru-transformer`, Marian's SSRU decoder, ssru.* in place of
// self_attn). Decoder layers: model.decoder_layers (0 = model.num_layers).
//
// Metrics: bleu (sacreBLEU default: cased, 13a, exp smoothing; the validation sources translated with
// eval.decode), bleu_lc (the same lower-cased), ppl and loss (teacher-forced, per target piece, eos
// included), and the counts. The best checkpoint follows eval.metric (bleu by default).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/parallel_text.h"
#include "data/sentencepiece_model.h"
#include "dist/communicator.h"
#include "nn/encoder_decoder.h"
#include "nn/transformer_encoder.h"
#include "tasks/batching.h"
#include "tasks/registry.h"
#include "tasks/task.h"

namespace sru::tasks {

struct TranslateOptions {
  std::string target_path;                   // training target (data.path is the source)
  std::string valid_source, valid_target, test_source, test_target;
  std::string spm_model;                     // "" = train one on the training data
  std::string spm_type = "unigram";          // unigram | bpe (when training)
  int64_t vocab_size = 8000;
  int64_t max_tokens = 4096;                 // padded tokens per training batch
  int64_t max_length = 0;                    // training pairs with a side longer (in pieces) are left out; 0 = none
  int64_t pad_to_multiple = 0;               // training batches' lengths rounded up to multiples of this (0 = longest)
  std::vector<int64_t> length_buckets;       // ... and then up to the smallest of these that holds them (none = no buckets)
  bool skip_empty = false;                   // leave out pairs with an empty side instead of refusing them
  std::string decoder = "transformer";       // model.decoder: the decoder registry's name (nn/decoder.h)
  int64_t decoder_layers = 0;                // 0 = model.num_layers
  std::string decode = "greedy";             // eval: greedy | beam, for the validation BLEU
  int64_t beam_size = 5;                     // eval.decode beam and srueval --predict
  double length_penalty = 0.6;
  double max_len_a = 1.5;                    // translations at most a * source pieces + b
  int64_t max_len_b = 10;
};

// The translation model (nn/encoder_decoder.h) the config describes: the registry's encoder
// (model.type transformer, not causal) and decoder (model.decoder), width model.hidden_size.
std::unique_ptr<nn::EncoderDecoder> make_translation_model(const config::Config& cfg, int64_t vocab_size,
                                                           Generator& gen);

// One split: the raw lines (for BLEU against the references) and their pieces.
struct TranslationSplit {
  data::ParallelText text;
  data::TokenSequences source, target;
};

// The batch's tensors: source (Ls, B) pieces then eos; target_in (Lt, B) bos then pieces; target_out
// (Lt * B) pieces then eos, -100 at padding; padding masks (L, B) nonzero at padding.
struct PairBatch {
  Tensor source, source_pad, target_in, target_pad, target_out;
  int64_t target_tokens = 0;
};

class TranslateTask : public Task, public Predicts, public Translates, public StagesSteps {
 public:
  TranslateTask(const config::Config& cfg, Generator& gen, const TaskContext& context);
  nn::Module& model() override { return *model_; }
  int64_t model_size() const override { return cfg_.model.hidden_size; }
  int64_t steps_per_epoch() const override { return static_cast<int64_t>(batches_.size()); }
  bool data_parallel() const override { return true; }
  std::string batch_split() const override {
    return "data.max_tokens " + std::to_string(options_.max_tokens) + " padded tokens, split by sentences";
  }
  void start_epoch(int64_t epoch, int64_t first_step) override;
  StepResult forward_step(int64_t index) override;
  // Captured steps (train.cuda_graphs): static source, target and padding tensors per batch shape
  // (sentences, source length, target length); data.pad_to_multiple and data.length_buckets bound the shapes.
  StagesSteps* staged_steps() override { return this; }
  std::optional<std::string> staged_shape(int64_t index) const override;
  StagedStep stage_step(int64_t index) override;
  StepResult forward_staged() override;
  Generator& step_generator() override { return *gen_; }
  std::string why_not_staged() const override;
  Metrics evaluate(const std::string& split, int64_t max_batches) override;
  std::vector<MetricSpec> metrics() const override;
  std::vector<std::string> splits() const override;
  std::string token_name() const override { return "target pieces"; }
  std::string vocabulary_name() const override;
  nn::NamedTensors extra_state() override;

  Predicts* prediction() override { return this; }
  // srueval --predict FILE: translates each line (beam eval.beam_size, eval.length_penalty), detokenised.
  void predict_file(const std::string& path, std::ostream& out) override;
  Translates* translation() override { return this; }
  // srueval --translate: as predict_file, from any line source, with the search options given.
  TranslationStats translate_lines(const std::function<bool(std::string&)>& next_line, const std::string& input,
                                   std::ostream& out, const TranslationOptions& options) override;
  Metrics evaluate_with_predictions(const std::string& split, const std::string& file, std::ostream& out) override;

  const data::SentencePieceModel* subword_model() const { return spm_ ? &*spm_ : nullptr; }
  // Training batch `index`'s pieces (with eos / bos) and the positions it is padded to, per side
  // (data.pad_to_multiple, data.length_buckets): what the padding costs (srubench batch-shapes).
  struct BatchPadding {
    int64_t source_pieces = 0, source_padded = 0, target_pieces = 0, target_padded = 0;
  };
  BatchPadding training_batch_padding(int64_t index) const;
  // Translations of the given source lines, in order (decoded in length-sorted batches; beam: the
  // checkpoint's eval.beam_size and eval.length_penalty).
  std::vector<std::string> translate(const std::vector<std::string>& sources, bool beam);

 private:
  struct Search {
    bool beam = true;
    search::BeamOptions options;
    std::string description;  // "greedy" or "beam K, length penalty A"
  };
  // The options with the checkpoint's defaults filled in, checked.
  Search resolve(const TranslationOptions& options) const;
  // The hypotheses of each source (its pieces, eos not included), in order.
  std::vector<search::NBest> translate_pieces(const std::vector<std::vector<int32_t>>& pieces, const Search& how);
  std::string detokenize(const std::vector<int64_t>& ids) const;
  // The best translation of each source given as pieces, detokenised (beam: the checkpoint's settings).
  std::vector<std::string> best_translations(const std::vector<std::vector<int32_t>>& pieces, bool beam);
  const TranslationSplit& split_of(const std::string& split) const;
  // How training batches pad their sides (data.pad_to_multiple, data.length_buckets).
  LengthPadding training_padding() const { return {options_.pad_to_multiple, options_.length_buckets}; }
  // Refuses buckets LengthPadding::check refuses or longer than data.max_tokens, and warns where
  // lengths past the last bucket stay unbounded.
  void check_length_buckets() const;
  Metrics evaluate_split(const TranslationSplit& s, int64_t max_batches, std::ostream* translations);

  config::Config cfg_;
  TranslateOptions options_;
  Generator* gen_;
  dist::Communicator* comm_;  // the ranks of data-parallel training (a single process otherwise)
  std::optional<data::SentencePieceModel> spm_;  // set by the constructor (from the checkpoint, a file or training)
  std::unique_ptr<nn::EncoderDecoder> model_;
  TranslationSplit train_, valid_, test_;
  std::vector<std::vector<int64_t>> fixed_batches_, batches_;  // training batches; this epoch's order
  // Training batch `index` as this process feeds it to the model (its rows of the batch, padded as the
  // whole batch is), with the whole batch's target pieces and this process's share of them.
  struct TrainingBatch {
    PairBatch pairs;
    int64_t whole_tokens = 0;
    double share = 1.0;
    BatchShard shard;
  };
  TrainingBatch training_batch(int64_t index) const;
  std::map<std::string, PairBatch> staged_;  // captured steps' static tensors, by batch shape, on the model's device
  PairBatch* staged_batch_ = nullptr;        // the last staged step's
  TrainingBatch staged_step_;                // its tokens, share and shard
};

TaskSpec translate_task();

}  // namespace sru::tasks
