// The translation task (see tasks/translate.h): data and its SentencePiece model (the checkpoint's
// subword model), the encoder-decoder model's wiring from the config (the model itself:
// nn/encoder_decoder.h), training batches and steps, and the registry entry with its bleu-score scorer.
// Decoding, evaluation and srueval --predict / --translate: tasks/translate_decode.cpp.
#include "tasks/translate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "autograd/node.h"
#include "core/philox.h"
#include "data/bleu.h"
#include "data/line_reader.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/shape_ops.h"
#include "ops/softmax.h"
#include "search/search.h"
#include "tasks/batching.h"
#include "tasks/token_batching.h"
#include "tasks/translate_batch.h"

namespace sru::tasks {

using data::SentencePieceModel;

namespace {
// The longest source (pieces + eos) and target (bos + pieces) among the pairs `rows`, each at least 1:
// the lengths a batch of them pads to before data.pad_to_multiple and data.length_buckets.
struct Sides {
  int64_t source = 1, target = 1;
};
Sides longest_sides(const TranslationSplit& s, const std::vector<int64_t>& rows) {
  Sides out;
  for (int64_t r : rows) {
    out.source = std::max(out.source, s.source.length(r) + 1);
    out.target = std::max(out.target, s.target.length(r) + 1);
  }
  return out;
}
}  // namespace

// The pairs `rows`, padded to their longest sides or to `padded_to`'s (the whole batch's, when this
// process computes part of it: data parallel), then as `padding` says.
PairBatch make_batch(const TranslationSplit& s, const std::vector<int64_t>& rows, const std::vector<int64_t>& padded_to,
                     const LengthPadding& padding) {
  const int64_t B = static_cast<int64_t>(rows.size());
  const Sides longest = longest_sides(s, padded_to);
  const int64_t Ls = padding(longest.source), Lt = padding(longest.target);
  std::vector<int64_t> src(Ls * B, SentencePieceModel::kPad), tin(Lt * B, SentencePieceModel::kPad),
      tout(Lt * B, -100);
  std::vector<int32_t> spad(Ls * B, 1), tpad(Lt * B, 1);
  PairBatch out;
  for (int64_t b = 0; b < B; ++b) {
    const auto source = s.source[rows[b]];
    const auto target = s.target[rows[b]];
    const int64_t ns = static_cast<int64_t>(source.size()), nt = static_cast<int64_t>(target.size());
    for (int64_t t = 0; t < ns; ++t) src[t * B + b] = source[t];
    src[ns * B + b] = SentencePieceModel::kEos;
    for (int64_t t = 0; t <= ns; ++t) spad[t * B + b] = 0;
    tin[b] = SentencePieceModel::kBos;
    for (int64_t t = 0; t < nt; ++t) {
      tin[(t + 1) * B + b] = target[t];
      tout[t * B + b] = target[t];
    }
    tout[nt * B + b] = SentencePieceModel::kEos;
    for (int64_t t = 0; t <= nt; ++t) tpad[t * B + b] = 0;
    out.target_tokens += nt + 1;
  }
  out.source = Tensor::from_vector(src, {Ls, B});
  out.source_pad = Tensor::from_vector(spad, {Ls, B});
  out.target_in = Tensor::from_vector(tin, {Lt, B});
  out.target_pad = Tensor::from_vector(tpad, {Lt, B});
  out.target_out = Tensor::from_vector(tout, {Lt * B});
  return out;
}

PairBatch make_batch(const TranslationSplit& s, const std::vector<int64_t>& rows) { return make_batch(s, rows, rows); }

// Lengths a batch pads to: pieces plus the eos (source) or the bos (target).
std::vector<int64_t> padded_lengths(const data::TokenSequences& s) {
  std::vector<int64_t> out = s.lengths();
  for (int64_t& n : out) ++n;
  return out;
}


// ---- model ----

std::unique_ptr<nn::EncoderDecoder> make_translation_model(const config::Config& cfg, int64_t vocab_size,
                                                           Generator& gen) {
  SRU_CHECK(cfg.model.type == "transformer", "model.type: the translate task's model is a Transformer "
            "encoder-decoder; set model.type: transformer (model.ffn: sru gives the SRU paper's model), got ",
            cfg.model.type);
  const auto& enc = cfg.encoder_options.as<nn::TransformerEncoderOptions>();
  SRU_CHECK(!enc.causal, "model.causal: the translation encoder reads the whole source; set it to false");
  const int64_t w = cfg.model.hidden_size;
  SRU_CHECK(cfg.model.embedding_size == w, "model.embedding_size (", cfg.model.embedding_size,
            ") must equal model.hidden_size (", w, "): the embeddings are shared by source, target and output");
  const TranslateOptions& task = cfg.task_as<TranslateOptions>();
  nn::EncoderDecoderOptions o;
  o.vocab_size = vocab_size;
  o.width = w;
  o.padding_id = SentencePieceModel::kPad;
  o.dropout = cfg.model.dropout;
  nn::DecoderArgs decoder_args;
  decoder_args.layer = enc.layer_options();
  decoder_args.layer.width = w;
  decoder_args.layer.dropout = cfg.model.dropout;
  decoder_args.num_layers = task.decoder_layers > 0 ? task.decoder_layers : cfg.model.num_layers;
  return std::make_unique<nn::EncoderDecoder>(
      o, [&](Generator& g) { return make_encoder(cfg, w, g, vocab_size); }, nn::find_decoder(task.decoder),
      decoder_args, gen);
}

// ---- task ----

TranslateTask::TranslateTask(const config::Config& cfg, Generator& gen, const TaskContext& context)
    : cfg_(cfg), options_(cfg.task_as<TranslateOptions>()), gen_(&gen),
      comm_(context.comm ? context.comm : &dist::single_process()) {
  check_length_buckets();
  const auto read = [&](const std::string& source, const std::string& target, const std::string& key) {
    SRU_CHECK(!source.empty() && !target.empty(), key, ": the translate task needs a source and a target file");
    TranslationSplit s;
    data::ParallelReadOptions ro;
    ro.skip_empty = options_.skip_empty;
    ro.skip_empty_key = "data.skip_empty";
    s.text = data::read_parallel(source, target, ro);
    return s;
  };
  if (context.checkpoint) {
    spm_.emplace(SentencePieceModel::from_bytes(checkpoint_string(*context.checkpoint, "task.spm_model", cfg.task),
                                          "the checkpoint's task.spm_model"));
  }
  if (context.load_data) {
    train_ = read(cfg.data.path, options_.target_path, "data.path / data.target_path");
    valid_ = read(options_.valid_source, options_.valid_target, "data.valid_source / data.valid_target");
    if (!options_.test_source.empty() || !options_.test_target.empty())
      test_ = read(options_.test_source, options_.test_target, "data.test_source / data.test_target");
    if (!context.checkpoint) {
      if (!options_.spm_model.empty()) {
        spm_.emplace(SentencePieceModel::load(options_.spm_model));
      } else {
        data::SubwordTrainOptions so;
        so.vocab_size = options_.vocab_size;
        so.model_type = options_.spm_type;
        so.vocab_size_key = "data.vocab_size";
        so.model_type_key = "data.spm_type";
        so.seed = static_cast<uint64_t>(cfg.train.seed);
        spm_.emplace(SentencePieceModel::train(train_.text, so));
      }
    }
    for (TranslationSplit* s : {&train_, &valid_, &test_}) {
      s->source = spm_->encode_all(s->text.source);
      s->target = spm_->encode_all(s->text.target);
    }
    // Training batches: cut once from the length-sorted pairs (the same every epoch), order shuffled per epoch.
    // With data.pad_to_multiple or data.length_buckets the budget counts the lengths the batches are padded to.
    const std::vector<int64_t> ls = padded_lengths(train_.source), lt = padded_lengths(train_.target);
    const LengthPadding padding = training_padding();
    std::vector<int64_t> keep_source, keep_target, kept;
    for (int64_t i = 0; i < train_.text.size(); ++i) {
      if (options_.max_length > 0 && std::max(ls[i], lt[i]) - 1 > options_.max_length) continue;
      kept.push_back(i);
      keep_source.push_back(padding(ls[i]));
      keep_target.push_back(padding(lt[i]));
    }
    SRU_CHECK(!kept.empty(), "data.max_length: it leaves out every training pair (", train_.text.size(), ")");
    TokenBatchOptions bo;
    bo.max_tokens = options_.max_tokens;
    for (auto batch : evaluation_token_batches(keep_source, keep_target, bo).batches) {
      for (int64_t& r : batch) r = kept[r];
      fixed_batches_.push_back(std::move(batch));
    }
    batches_ = fixed_batches_;
  } else {
    SRU_CHECK(context.checkpoint, "translate: without data the checkpoint must supply the SentencePiece model");
  }
  model_ = make_translation_model(cfg, spm_->piece_size(), gen);
}

std::string TranslateTask::vocabulary_name() const {
  return "sentencepiece-" + std::to_string(spm_->piece_size()) + " (task.spm_model)";
}

nn::NamedTensors TranslateTask::extra_state() { return {{"task.spm_model", string_tensor(spm_->bytes())}}; }

void TranslateTask::start_epoch(int64_t epoch, int64_t) {
  // The epoch's order is a function of (seed, epoch), so a resumed run rebuilds it.
  batches_ = fixed_batches_;
  const uint64_t seed = static_cast<uint64_t>(cfg_.train.seed);
  for (int64_t i = static_cast<int64_t>(batches_.size()) - 1; i > 0; --i) {
    const uint64_t r = philox::random_u32(seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(i), 0x7a11);
    std::swap(batches_[i], batches_[r % static_cast<uint64_t>(i + 1)]);
  }
}

TranslateTask::TrainingBatch TranslateTask::training_batch(int64_t index) const {
  SRU_CHECK(index >= 0 && index < steps_per_epoch(), cfg_.task, ": training step ", index, " is past the end of the epoch");
  // Data parallel: this rank's pairs of the batch, padded as the whole batch is, its share the target
  // pieces it predicts.
  const std::vector<int64_t>& whole = batches_[index];
  const BatchPart part = batch_part(static_cast<int64_t>(whole.size()), *comm_);
  const std::vector<int64_t> mine(whole.begin() + part.first, whole.begin() + part.first + std::max<int64_t>(part.count, 1));
  TrainingBatch out;
  out.pairs = make_batch(train_, mine, whole, training_padding());
  for (int64_t r : whole) out.whole_tokens += train_.target.length(r) + 1;
  out.share = part.count == 0 ? 0.0 : static_cast<double>(out.pairs.target_tokens) / static_cast<double>(out.whole_tokens);
  out.shard = part.shard;
  return out;
}

StepResult TranslateTask::forward_step(int64_t index) {
  model_->train(true);
  const TrainingBatch t = training_batch(index);
  const PairBatch& b = t.pairs;
  const BatchShardScope shard(*gen_, t.shard);
  const Tensor memory = model_->encode(b.source, b.source_pad);
  const Tensor logits = model_->decode(b.target_in, b.target_pad, memory, b.source_pad);
  return {training_cross_entropy(logits, b.target_out.to(logits.device()), cfg_.train), t.whole_tokens, t.share};
}

std::string TranslateTask::why_not_staged() const {
  return training_padding().bounded() ? ""
                                      : "data.pad_to_multiple is 0 and data.length_buckets empty (every batch padded "
                                        "to its longest sides: too many batch shapes to capture)";
}

std::optional<std::string> TranslateTask::staged_shape(int64_t index) const {
  if (!why_not_staged().empty() || index < 0 || index >= steps_per_epoch()) return std::nullopt;
  const std::vector<int64_t>& whole = batches_[index];
  const Sides longest = longest_sides(train_, whole);  // as make_batch pads
  const int64_t rows = std::max<int64_t>(batch_part(static_cast<int64_t>(whole.size()), *comm_).count, 1);
  const LengthPadding padding = training_padding();
  return std::to_string(rows) + "x" + std::to_string(padding(longest.source)) + "x" +
         std::to_string(padding(longest.target));
}

void TranslateTask::check_length_buckets() const {
  const LengthPadding padding = training_padding();
  padding.check("data.length_buckets");
  if (padding.buckets.empty()) return;
  const int64_t last = padding.buckets.back();
  SRU_CHECK(last <= options_.max_tokens, "data.length_buckets: ", last, " is longer than data.max_tokens (",
            options_.max_tokens, "): a batch padded to it could not hold one sentence within the budget");
  if (options_.pad_to_multiple == 0 && (options_.max_length == 0 || options_.max_length + 1 > last))
    spdlog::warn("data.length_buckets: sides longer than {} pieces (with eos / bos) keep their own lengths, each a "
                 "batch shape of its own (data.pad_to_multiple is 0 and data.max_length {}): a last bucket of "
                 "data.max_length + 1, or data.pad_to_multiple, bounds them", last,
                 options_.max_length == 0 ? std::string("0, none") : std::to_string(options_.max_length));
}

TranslateTask::BatchPadding TranslateTask::training_batch_padding(int64_t index) const {
  SRU_CHECK(index >= 0 && index < steps_per_epoch(), cfg_.task, ": training batch ", index, " is past the end of the epoch");
  const std::vector<int64_t>& whole = batches_[index];
  BatchPadding out;
  for (int64_t r : whole) {
    out.source_pieces += train_.source.length(r) + 1;
    out.target_pieces += train_.target.length(r) + 1;
  }
  const Sides longest = longest_sides(train_, whole);  // as make_batch pads
  const LengthPadding padding = training_padding();
  const int64_t rows = static_cast<int64_t>(whole.size());
  out.source_padded = rows * padding(longest.source);
  out.target_padded = rows * padding(longest.target);
  return out;
}

StagedStep TranslateTask::stage_step(int64_t index) {
  const std::optional<std::string> shape_key = staged_shape(index);
  SRU_CHECK(shape_key, cfg_.task, ": training step ", index, " cannot be staged");
  TrainingBatch t = training_batch(index);
  const PairBatch& b = t.pairs;
  const std::string shape =
      std::to_string(b.source.size(1)) + "x" + std::to_string(b.source.size(0)) + "x" + std::to_string(b.target_in.size(0));
  SRU_CHECK(shape == *shape_key, cfg_.task, ": staged shape ", shape, " is not the one announced, ", *shape_key);
  PairBatch& s = staged_[shape];
  for (auto [staged, from] : {std::pair{&s.source, &b.source}, {&s.source_pad, &b.source_pad},
                              {&s.target_in, &b.target_in}, {&s.target_pad, &b.target_pad}, {&s.target_out, &b.target_out}})
    stage_into(*staged, *from, model_->device());
  staged_batch_ = &s;
  staged_step_ = std::move(t);
  return {shape, staged_step_.whole_tokens};
}

StepResult TranslateTask::forward_staged() {
  SRU_CHECK(staged_batch_, cfg_.task, ": forward_staged without a staged step");
  model_->train(true);
  const PairBatch& b = *staged_batch_;
  const BatchShardScope shard(*gen_, staged_step_.shard);
  const Tensor memory = model_->encode(b.source, b.source_pad);
  const Tensor logits = model_->decode(b.target_in, b.target_pad, memory, b.source_pad);
  return {training_cross_entropy(logits, b.target_out, cfg_.train), staged_step_.whole_tokens, staged_step_.share};
}

std::vector<MetricSpec> TranslateTask::metrics() const {
  return {{"bleu", true, false, 2}, {"bleu_lc", true, false, 2}, {"ppl", false, false, 2}, {"loss", false},
          {"sentences", false, true}, {"pieces", false, true}};
}

std::vector<std::string> TranslateTask::splits() const {
  if (test_.text.size() > 0 || !options_.test_source.empty()) return {"train", "valid", "test"};
  return {"train", "valid"};
}

const TranslationSplit& TranslateTask::split_of(const std::string& split) const {
  check_split(split);
  if (split == "train") return train_;
  if (split == "valid") return valid_;
  SRU_CHECK(test_.text.size() > 0, "translate: no test split (set data.test_source and data.test_target)");
  return test_;
}

// ---- registry entry ----

namespace {

std::vector<config::Section> translate_fields(TranslateOptions& o) {
  using namespace config;
  return {{"data", "", {
              string_field("target_path", &o.target_path, "Training target file (data.path is the source)"),
              string_field("valid_source", &o.valid_source, "Validation source file"),
              string_field("valid_target", &o.valid_target, "Validation target file (the BLEU references)"),
              string_field("test_source", &o.test_source, "Test source file (optional)"),
              string_field("test_target", &o.test_target, "Test target file (optional)"),
              string_field("spm_model", &o.spm_model, "SentencePiece model shared by both sides (empty = train one on "
                           "the training data)"),
              string_field("spm_type", &o.spm_type, "SentencePiece model type when training one", {"unigram", "bpe"}),
              int_field("vocab_size", &o.vocab_size, "Pieces of a SentencePiece model trained here", 8),
              int_field("max_tokens", &o.max_tokens, "Padded tokens per batch (sentences x the longer side)", 1),
              int_field("max_length", &o.max_length, "Leave out training pairs with a side longer than this many "
                        "pieces (0 = keep all)", 0),
              int_field("pad_to_multiple", &o.pad_to_multiple, "Round training batches' source and target "
                        "lengths up to multiples of N, and count data.max_tokens in them (fairseq's --pad-to-multiple; "
                        "0 = each batch's longest sides): fewer batch shapes, so that CUDA graphs (train.cuda_graphs) "
                        "replay more steps; the padding is masked", 0),
              int_list_field("length_buckets", &o.length_buckets, "Then pad each side of a training batch up to the "
                             "smallest of these lengths (pieces + eos / bos) that holds it, and count data.max_tokens "
                             "in them (tensor2tensor's and tf.data's length buckets; ascending, multiples of "
                             "data.pad_to_multiple, at most data.max_tokens; longer sides keep its rounding): a few batch shapes an epoch "
                             "however long the sentences, so that CUDA graphs replay nearly every step, for some "
                             "padding (srubench batch-shapes shows both); empty = none", 1),
              bool_field("skip_empty", &o.skip_empty, "Leave out pairs with an empty side instead of refusing them")}},
          {"model", "", {
              string_field("decoder", &o.decoder, "Decoder (the decoder registry, nn/decoder.h): transformer, or "
                           "ssru-transformer (Marian's SSRU decoder: a simplified SRU in place of self-attention)",
                           nn::decoder_names()),
              int_field("decoder_layers", &o.decoder_layers, "Decoder layers (0 = model.num_layers)", 0)}},
          {"eval", "", {
              string_field("decode", &o.decode, "How the validation sources are translated for BLEU", {"greedy", "beam"}),
              int_field("beam_size", &o.beam_size, "Beams (eval.decode beam and srueval --predict)", 1),
              real_field("length_penalty", &o.length_penalty, "GNMT length penalty alpha of beam search", 0),
              real_field("max_len_a", &o.max_len_a, "Translations stop at max_len_a x source pieces + max_len_b", 0),
              int_field("max_len_b", &o.max_len_b, "See eval.max_len_a", 1)}}};
}

Scorer bleu_scorer() {
  return {"bleu-score",
          "BLEU of a translations file against a references file exactly as sacreBLEU 2.x computes it by default "
          "(13a tokenizer, exp smoothing, corpus statistics), also lower-cased; prints JSON",
          {{"hyp", "Translations, one sentence a line (plain or .gz)"},
           {"ref", "References, line i translating the same source as line i of --hyp"}},
          [](const ScorerArgs& args, std::ostream& out, std::ostream&) {
            const data::BleuCorpus corpus = data::read_bleu_files(args.at("hyp"), {args.at("ref")});  // read once: may be a pipe
            const data::BleuScore cased = data::corpus_bleu(corpus.hypotheses, corpus.references);
            data::BleuOptions lower;
            lower.lowercase = true;
            const data::BleuScore lc = data::corpus_bleu(corpus.hypotheses, corpus.references, lower);
            const auto as_json = [](const data::BleuScore& s) {
              return nlohmann::ordered_json{{"name", "BLEU"},
                                            {"score", s.score},
                                            {"signature", s.signature},
                                            {"verbose_score", data::format_bleu(s).substr(data::format_bleu(s).find("= ") + 2)}};
            };
            out << nlohmann::ordered_json{{"cased", as_json(cased)}, {"lowercased", as_json(lc)}}.dump(1) << "\n";
            return 0;
          }};
}

}  // namespace

TaskSpec translate_task() {
  TaskSpec spec{"translate",
                "Machine translation (the SRU paper's Table 3): a Transformer encoder-decoder (model.type transformer; "
                "model.ffn sru puts an SRU in every feed-forward sublayer) on parallel text (data.path / "
                "data.target_path) with one SentencePiece model for both sides; metrics bleu (sacreBLEU's default), "
                "bleu_lc, ppl.",
                [] { return config::Options::of(TranslateOptions{}, &translate_fields); },
                [](const config::Config& cfg, Generator& gen, const TaskContext& ctx) -> std::unique_ptr<Task> {
                  return std::make_unique<TranslateTask>(cfg, gen, ctx);
                },
                nullptr};
  spec.scorers = {bleu_scorer()};
  return spec;
}

}  // namespace sru::tasks
