// The translation task (see tasks/translate.h): data and its SentencePiece model, the encoder-decoder
// model's wiring from the config (the model itself: nn/encoder_decoder.h), training batches, teacher-forced perplexity, decoding through the search layer, BLEU,
// the checkpoint's subword model, srueval --predict, and the registry entry with its bleu-score scorer.
#include "tasks/translate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>

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

namespace sru::tasks {

namespace {

using data::SentencePieceModel;

// The batch's tensors: source (Ls, B) pieces then eos; target_in (Lt, B) bos then pieces; target_out
// (Lt * B) pieces then eos, -100 at padding; padding masks (L, B) nonzero at padding.
struct PairBatch {
  Tensor source, source_pad, target_in, target_pad, target_out;
  int64_t target_tokens = 0;
};

// The pairs `rows`, padded to their longest sides or to `padded_to` (the whole batch's, when this
// process computes part of it: data parallel).
PairBatch make_batch(const TranslationSplit& s, const std::vector<int64_t>& rows, const std::vector<int64_t>& padded_to) {
  const int64_t B = static_cast<int64_t>(rows.size());
  int64_t Ls = 1, Lt = 1;
  for (int64_t r : padded_to) {
    Ls = std::max(Ls, s.source.length(r) + 1);
    Lt = std::max(Lt, s.target.length(r) + 1);
  }
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

// The search layer's view of the decoder: log-probabilities of the next piece of every live row.
class TranslationScorer : public search::StepScorer {
 public:
  TranslationScorer(const nn::EncoderDecoder& model, nn::EncoderDecoder::DecoderState state)
      : model_(model), state_(std::move(state)) {}
  Tensor next_log_probs(const std::vector<int64_t>& last_tokens) override {
    return search::log_probs_of_logits(model_.decode_step(last_tokens, state_));
  }
  void reorder(const std::vector<int64_t>& rows) override { model_.reorder(state_, rows); }

 private:
  const nn::EncoderDecoder& model_;
  nn::EncoderDecoder::DecoderState state_;
};

}  // namespace

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
    const std::vector<int64_t> ls = padded_lengths(train_.source), lt = padded_lengths(train_.target);
    std::vector<int64_t> keep_source, keep_target, kept;
    for (int64_t i = 0; i < train_.text.size(); ++i) {
      if (options_.max_length > 0 && std::max(ls[i], lt[i]) - 1 > options_.max_length) continue;
      kept.push_back(i);
      keep_source.push_back(ls[i]);
      keep_target.push_back(lt[i]);
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

StepResult TranslateTask::forward_step(int64_t index) {
  SRU_CHECK(index >= 0 && index < steps_per_epoch(), cfg_.task, ": training step ", index, " is past the end of the epoch");
  model_->train(true);
  // Data parallel: this rank's pairs of the batch, padded as the whole batch is, its share the target
  // pieces it predicts.
  const std::vector<int64_t>& whole = batches_[index];
  const BatchPart part = batch_part(static_cast<int64_t>(whole.size()), *comm_);
  const std::vector<int64_t> mine(whole.begin() + part.first, whole.begin() + part.first + std::max<int64_t>(part.count, 1));
  const PairBatch b = make_batch(train_, mine, whole);
  int64_t whole_tokens = 0;
  for (int64_t r : whole) whole_tokens += train_.target.length(r) + 1;
  const double share = part.count == 0 ? 0.0 : static_cast<double>(b.target_tokens) / static_cast<double>(whole_tokens);
  const BatchShardScope shard(*gen_, part.shard);
  const Tensor memory = model_->encode(b.source, b.source_pad);
  const Tensor logits = model_->decode(b.target_in, b.target_pad, memory, b.source_pad);
  return {training_cross_entropy(logits, b.target_out.to(logits.device()), cfg_.train), whole_tokens, share};
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

TranslateTask::Search TranslateTask::resolve(const TranslationOptions& o) const {
  Search r;
  r.beam = o.beam;
  r.options.beam_size = o.beam_size > 0 ? o.beam_size : options_.beam_size;
  r.options.length_penalty = o.length_penalty >= 0 ? o.length_penalty : options_.length_penalty;
  r.options.n_best = o.n_best;
  SRU_CHECK(o.n_best >= 1, "n-best: at least 1 translation per source, got ", o.n_best);
  SRU_CHECK(o.beam || o.n_best == 1, "n-best ", o.n_best, ": greedy decoding finds one translation; use beam search");
  SRU_CHECK(!o.beam || o.n_best <= r.options.beam_size, "n-best ", o.n_best, " exceeds the beam size ",
            r.options.beam_size);
  std::ostringstream how;
  if (r.beam)
    how << "beam " << r.options.beam_size << ", length penalty " << r.options.length_penalty;
  else
    how << "greedy";
  r.description = how.str();
  return r;
}

std::vector<search::NBest> TranslateTask::translate_pieces(const std::vector<std::vector<int32_t>>& pieces,
                                                           const Search& how) {
  autograd::NoGradGuard no_grad;
  model_->eval();
  // Sentences of similar length decode together, then go back to their order.
  std::vector<int64_t> order(pieces.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return pieces[a].size() < pieces[b].size(); });
  std::vector<search::NBest> out(pieces.size());
  const int64_t per_batch = std::max<int64_t>(1, cfg_.data.eval_batch_size);
  for (size_t start = 0; start < order.size(); start += per_batch) {
    const size_t end = std::min(order.size(), start + static_cast<size_t>(per_batch));
    const int64_t B = static_cast<int64_t>(end - start);
    int64_t Ls = 1;
    for (size_t i = start; i < end; ++i) Ls = std::max<int64_t>(Ls, static_cast<int64_t>(pieces[order[i]].size()) + 1);
    std::vector<int64_t> src(Ls * B, SentencePieceModel::kPad);
    std::vector<int32_t> pad(Ls * B, 1);
    search::Request request;
    request.eos = SentencePieceModel::kEos;
    request.max_len_a = options_.max_len_a;
    request.max_len_b = options_.max_len_b;
    for (int64_t b = 0; b < B; ++b) {
      const auto& p = pieces[order[start + b]];
      const int64_t n = static_cast<int64_t>(p.size());
      for (int64_t t = 0; t < n; ++t) src[t * B + b] = p[t];
      src[n * B + b] = SentencePieceModel::kEos;
      for (int64_t t = 0; t <= n; ++t) pad[t * B + b] = 0;
      request.first_tokens.push_back(SentencePieceModel::kBos);
      request.source_lengths.push_back(n);
    }
    const Tensor source_pad = Tensor::from_vector(pad, {Ls, B});
    const Tensor memory = model_->encode(Tensor::from_vector(src, {Ls, B}), source_pad);
    TranslationScorer scorer(*model_, model_->start_decoding(memory, source_pad));
    std::vector<search::NBest> found =
        how.beam ? search::beam(scorer, request, how.options) : search::greedy(scorer, request);
    for (int64_t b = 0; b < B; ++b) out[order[start + b]] = std::move(found[b]);
  }
  model_->train(true);
  return out;
}

std::string TranslateTask::detokenize(const std::vector<int64_t>& ids) const {
  return spm_->decode(std::vector<int32_t>(ids.begin(), ids.end()));
}

std::vector<std::string> TranslateTask::best_translations(const std::vector<std::vector<int32_t>>& pieces, bool beam) {
  TranslationOptions o;
  o.beam = beam;
  std::vector<std::string> out;
  for (const search::NBest& n : translate_pieces(pieces, resolve(o))) out.push_back(detokenize(n.front().tokens));
  return out;
}

std::vector<std::string> TranslateTask::translate(const std::vector<std::string>& sources, bool beam) {
  std::vector<std::vector<int32_t>> pieces;
  for (const std::string& s : sources) pieces.push_back(spm_->encode(s));
  return best_translations(pieces, beam);
}

TranslationStats TranslateTask::translate_lines(const std::function<bool(std::string&)>& next_line,
                                                const std::string& input, std::ostream& out,
                                                const TranslationOptions& options) {
  const Search how = resolve(options);
  TranslationStats stats;
  stats.search = how.description;
  int64_t line_number = 0;
  std::vector<std::vector<int32_t>> pieces;
  for (bool more = true; more;) {
    pieces.clear();
    std::string line;
    while (static_cast<int64_t>(pieces.size()) < std::max<int64_t>(1, options.buffer_lines) &&
           (more = next_line(line))) {
      ++line_number;
      if (line_number == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);
      const int64_t bad = data::invalid_utf8_offset(line);
      SRU_CHECK(bad < 0, "'", input, "':", line_number, ": invalid UTF-8 (byte ", bad + 1,
                " of the line); the sentences to translate must be UTF-8");
      pieces.push_back(spm_->encode(line));
    }
    if (pieces.empty()) break;
    const auto started = std::chrono::steady_clock::now();
    const std::vector<search::NBest> found = translate_pieces(pieces, how);
    stats.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    for (const search::NBest& n : found) {
      // Exactly n_best lines a source, so line k * n_best + j is the j-th translation of source k; a
      // search that found fewer (every beam cut at the maximum length) repeats its last one.
      for (int64_t k = 0; k < options.n_best; ++k) {
        const search::Hypothesis& h = n[std::min<size_t>(static_cast<size_t>(k), n.size() - 1)];
        out << detokenize(h.tokens) << "\n";
        stats.target_tokens += static_cast<int64_t>(h.tokens.size());
      }
    }
    out.flush();
    stats.sentences += static_cast<int64_t>(found.size());
  }
  return stats;
}

Metrics TranslateTask::evaluate_split(const TranslationSplit& s, int64_t max_batches, std::ostream* translations) {
  autograd::NoGradGuard no_grad;
  model_->eval();
  TokenBatchOptions bo;
  bo.max_tokens = options_.max_tokens;
  const std::vector<int64_t> ls = padded_lengths(s.source), lt = padded_lengths(s.target);
  auto batches = evaluation_token_batches(ls, lt, bo).batches;
  if (max_batches > 0 && static_cast<int64_t>(batches.size()) > max_batches) batches.resize(max_batches);
  // Data parallel: batch i is rank i % ranks's and sentence j rank j % ranks's to translate; the sums
  // and the translations are then shared, so every rank returns the metrics of the whole split.
  const int ranks = comm_->size(), rank = comm_->rank();
  std::vector<double> sums = {0.0, 0.0};  // nats, target pieces
  std::vector<int64_t> rows;
  for (size_t i = 0; i < batches.size(); ++i) {
    const auto& batch = batches[i];
    rows.insert(rows.end(), batch.begin(), batch.end());
    if (static_cast<int>(i % static_cast<size_t>(ranks)) != rank) continue;
    const PairBatch b = make_batch(s, batch);
    const Tensor memory = model_->encode(b.source, b.source_pad);
    const Tensor logits = model_->decode(b.target_in, b.target_pad, memory, b.source_pad);
    sums[0] += cross_entropy(logits, b.target_out.to(logits.device()), -100, Reduction::Sum).item<double>();
    sums[1] += static_cast<double>(b.target_tokens);
  }
  comm_->all_reduce_sum(sums, "the evaluation's loss");
  const double nats = sums[0];
  const auto pieces = static_cast<int64_t>(sums[1]);
  std::sort(rows.begin(), rows.end());  // the evaluated sentences in file order
  std::vector<std::string> references;
  std::vector<std::vector<int32_t>> sources;  // this rank's, as the split already holds them encoded
  for (size_t j = 0; j < rows.size(); ++j) {
    references.emplace_back(s.text.target[rows[j]]);
    if (static_cast<int>(j % static_cast<size_t>(ranks)) != rank) continue;
    const auto source = s.source[rows[j]];
    sources.emplace_back(source.begin(), source.end());
  }
  std::vector<std::string> hypotheses = best_translations(sources, options_.decode == "beam");
  if (ranks > 1) {
    // Rank r's k-th translation is sentence k * ranks + r.
    std::vector<std::string> mine = {std::to_string(rank)};
    mine.insert(mine.end(), hypotheses.begin(), hypotheses.end());
    const std::vector<std::string> all = dist::all_gather(*comm_, mine, "the evaluation's translations");
    hypotheses.assign(rows.size(), "");
    for (size_t at = 0; at < all.size();) {
      const int from = std::stoi(all[at++]);
      for (size_t k = 0; at < all.size() && k * static_cast<size_t>(ranks) + static_cast<size_t>(from) < rows.size(); ++k)
        hypotheses[k * static_cast<size_t>(ranks) + static_cast<size_t>(from)] = all[at++];
    }
  }
  if (translations)
    for (const std::string& h : hypotheses) *translations << h << "\n";
  data::BleuOptions lower;
  lower.lowercase = true;
  const double loss = pieces ? nats / static_cast<double>(pieces) : 0.0;
  model_->train(true);
  return {{"bleu", data::corpus_bleu(hypotheses, {references}).score},
          {"bleu_lc", data::corpus_bleu(hypotheses, {references}, lower).score},
          {"ppl", std::exp(loss)},
          {"loss", loss},
          {"sentences", static_cast<double>(rows.size())},
          {"pieces", static_cast<double>(pieces)}};
}

Metrics TranslateTask::evaluate(const std::string& split, int64_t max_batches) {
  return evaluate_split(split_of(split), max_batches, nullptr);
}

Metrics TranslateTask::evaluate_with_predictions(const std::string& split, const std::string& file, std::ostream& out) {
  SRU_CHECK(file.empty(), "translate: --predictions writes the translations of a split (--split); for a file of "
            "sentences use --predict FILE");
  return evaluate_split(split_of(split), 0, &out);
}

void TranslateTask::predict_file(const std::string& path, std::ostream& out) {
  data::LineReader reader(path);
  const TranslationStats stats =
      translate_lines([&](std::string& line) { return reader.next(line); }, path, out, TranslationOptions{});
  std::cerr << translation_speed(stats) << "\n";
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
