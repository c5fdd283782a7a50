// The translate task's decoding and evaluation (see tasks/translate.h): the search layer over the
// encoder-decoder's typed decoder state, translations of sources (greedy or beam), teacher-forced
// perplexity and BLEU of a split, srueval --predict and --translate.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <numeric>
#include <sstream>

#include "autograd/node.h"
#include "data/bleu.h"
#include "data/line_reader.h"
#include "ops/shape_ops.h"
#include "ops/softmax.h"
#include "search/search.h"
#include "tasks/batching.h"
#include "tasks/token_batching.h"
#include "tasks/translate.h"
#include "tasks/translate_batch.h"

namespace sru::tasks {

namespace {

using data::SentencePieceModel;

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

}  // namespace sru::tasks
