// The search strategies of search.h: greedy and sampling (one row per sentence, a shared driver that
// differs only in how a row's next token is picked) and beam search. The per-step selection runs on the
// scorer's device; the host keeps the hypotheses and reads back only what picks need.
#include "search/search.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "autograd/node.h"
#include "core/philox.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/select.h"
#include "ops/shape_ops.h"
#include "ops/softmax.h"

namespace sru::search {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

void check_request(const Request& r, const char* who) {
  SRU_CHECK(r.source_lengths.empty() || r.source_lengths.size() == r.first_tokens.size(), who, ": ",
            r.source_lengths.size(), " source lengths for ", r.first_tokens.size(),
            " sentences (give one per sentence, or none for all 0)");
  SRU_CHECK(r.eos >= -1, who, ": eos must be a token id or -1 (none), got ", r.eos);
  SRU_CHECK(r.min_length >= 0, who, ": min_length must be >= 0, got ", r.min_length);
  SRU_CHECK(std::isfinite(r.max_len_a), who, ": max_len_a must be finite, got ", r.max_len_a);
  for (int64_t s = 0; s < r.sentences(); ++s) r.max_length(s);  // throws on a negative one
}

// topk ranks NaN first, so a NaN anywhere in a row shows up in the values read back.
void check_not_nan(double v, const char* who) {
  SRU_CHECK(!std::isnan(v), who, ": the scorer returned NaN log-probabilities");
}

// The scorer's answer for the live rows, checked against the protocol; V is fixed by the first step.
class LogProbSource {
 public:
  LogProbSource(StepScorer& scorer, const Request& request, const char* who)
      : scorer_(scorer), request_(request), who_(who) {}

  // (N, V) log-probabilities after last_tokens; the eos masked out (-inf) before step min_length.
  Tensor next(const std::vector<int64_t>& last_tokens, int64_t step) {
    const int64_t N = static_cast<int64_t>(last_tokens.size());
    Tensor lp = scorer_.next_log_probs(last_tokens);
    SRU_CHECK(lp.defined(), who_, ": the scorer returned an undefined tensor for ", N, " rows");
    SRU_CHECK(lp.dim() == 2 && lp.size(0) == N, who_, ": the scorer returned log-probabilities of shape ",
              shape_str(lp.shape()), " for ", N, " live rows; expected (", N, ", V)");
    check_floating(lp, who_);
    if (V_ < 0) {
      V_ = lp.size(1);
      SRU_CHECK(V_ >= 1, who_, ": the scorer returned an empty vocabulary (", shape_str(lp.shape()), ")");
      SRU_CHECK(request_.eos < V_, who_, ": eos ", request_.eos, " is not in the scorer's vocabulary of ", V_);
    }
    SRU_CHECK(lp.size(1) == V_, who_, ": the scorer's vocabulary changed from ", V_, " to ", lp.size(1),
              " at step ", step);
    if (request_.eos >= 0 && step < request_.min_length) {
      if (!eos_mask_.defined() || eos_mask_.device() != lp.device()) {
        Tensor mask = Tensor::zeros({V_}, DType::I64);
        mask.data<int64_t>()[request_.eos] = 1;
        eos_mask_ = mask.to(lp.device());
      }
      lp = masked_fill(lp, eos_mask_, kNegInf);
    }
    return lp;
  }
  int64_t vocab() const { return V_; }

 private:
  StepScorer& scorer_;
  const Request& request_;
  const char* who_;
  int64_t V_ = -1;
  Tensor eos_mask_;  // (V) 1 at the eos, on the scorer's device
};

}  // namespace

Tensor log_probs_of_logits(const Tensor& logits) {
  return log_softmax(logits.dtype() == DType::BF16 ? cast(logits, DType::F32) : logits);
}

namespace {

// Calls reorder unless the new rows are the old ones unchanged, or none are left.
void reorder_if_changed(StepScorer& scorer, const std::vector<int64_t>& rows, size_t old_rows) {
  if (rows.empty()) return;  // nothing is scored again
  bool same = rows.size() == old_rows;
  for (size_t i = 0; same && i < rows.size(); ++i) same = rows[i] == static_cast<int64_t>(i);
  if (!same) scorer.reorder(rows);
}

// Sentences with a maximum length of 0 get an empty, unfinished hypothesis and no row.
std::vector<int64_t> first_live_sentences(StepScorer& scorer, const Request& request) {
  std::vector<int64_t> live;
  for (int64_t s = 0; s < request.sentences(); ++s)
    if (request.max_length(s) > 0) live.push_back(s);
  reorder_if_changed(scorer, live, static_cast<size_t>(request.sentences()));  // row i is sentence i
  return live;
}

// ---- one row per sentence: greedy and sampling ----

struct Pick {
  int64_t token;
  double log_prob;  // the scorer's log-probability of token
};
// The next token of each live row from its (N, V) log-probabilities; sentences[i] is row i's sentence.
using Picker = std::function<std::vector<Pick>(const Tensor& log_probs, int64_t step,
                                               const std::vector<int64_t>& sentences)>;

std::vector<NBest> decode_one_row_each(StepScorer& scorer, const Request& request, const char* who,
                                       const Picker& pick) {
  check_request(request, who);
  autograd::NoGradGuard no_grad;
  const int64_t B = request.sentences();
  std::vector<Hypothesis> hyps(B);
  std::vector<int64_t> live = first_live_sentences(scorer, request);  // row i decodes sentence live[i]
  LogProbSource source(scorer, request, who);
  for (int64_t step = 0; !live.empty(); ++step) {
    std::vector<int64_t> last(live.size());
    for (size_t i = 0; i < live.size(); ++i)
      last[i] = step == 0 ? request.first_tokens[live[i]] : hyps[live[i]].tokens.back();
    const Tensor lp = source.next(last, step);
    const std::vector<Pick> picks = pick(lp, step, live);
    std::vector<int64_t> kept_rows, still_live;
    for (size_t i = 0; i < live.size(); ++i) {
      Hypothesis& h = hyps[live[i]];
      h.log_prob += picks[i].log_prob;
      if (picks[i].token == request.eos) {
        h.finished = true;
        continue;
      }
      h.tokens.push_back(picks[i].token);
      if (step + 1 >= request.max_length(live[i])) continue;
      kept_rows.push_back(static_cast<int64_t>(i));
      still_live.push_back(live[i]);
    }
    reorder_if_changed(scorer, kept_rows, live.size());
    live = std::move(still_live);
  }
  std::vector<NBest> out(B);
  for (int64_t s = 0; s < B; ++s) {
    hyps[s].score = hyps[s].log_prob;
    out[s].push_back(std::move(hyps[s]));
  }
  return out;
}

}  // namespace

int64_t Request::max_length(int64_t sentence) const {
  const double source = source_lengths.empty() ? 0.0 : static_cast<double>(source_lengths.at(sentence));
  const double length = std::floor(max_len_a * source + static_cast<double>(max_len_b));
  SRU_CHECK(length >= 0, "search: the maximum length of sentence ", sentence, " is max_len_a * source_length + ",
            "max_len_b = ", max_len_a, " * ", source, " + ", max_len_b, " = ", length, " < 0");
  return static_cast<int64_t>(length);
}

double length_penalty(int64_t length, double alpha) {
  return alpha == 0.0 ? 1.0 : std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

std::vector<NBest> greedy(StepScorer& scorer, const Request& request) {
  return decode_one_row_each(scorer, request, "greedy",
                             [](const Tensor& lp, int64_t, const std::vector<int64_t>&) {
                               const TopK best = topk(lp, 1);
                               const auto values = best.values.to_vector<double>();
                               const auto tokens = best.indices.to_vector<int64_t>();
                               std::vector<Pick> picks(values.size());
                               for (size_t i = 0; i < picks.size(); ++i) {
                                 check_not_nan(values[i], "greedy");
                                 picks[i] = {tokens[i], values[i]};
                               }
                               return picks;
                             });
}

std::vector<NBest> sample(StepScorer& scorer, const Request& request, const SamplingOptions& o) {
  SRU_CHECK(o.temperature > 0 && std::isfinite(o.temperature), "sample: temperature must be > 0 and finite, got ",
            o.temperature);
  SRU_CHECK(o.top_k >= 0, "sample: top_k must be >= 0 (0 = off), got ", o.top_k);
  SRU_CHECK(o.top_p > 0 && o.top_p <= 1, "sample: top_p must be in (0, 1] (1 = off), got ", o.top_p);
  const Picker pick = [&o](const Tensor& lp, int64_t step, const std::vector<int64_t>& sentences) {
    const int64_t N = lp.size(0), V = lp.size(1);
    // The candidates of each row: the whole vocabulary in id order, or (with a filter) the top K
    // sorted by probability, which is the order top_p needs. Ranking by logp ranks by logp / T.
    int64_t K = V;
    std::vector<double> probs, log_probs;
    std::vector<int64_t> ids;
    if (o.top_k == 0 && o.top_p >= 1.0) {
      probs = softmax(lp * (1.0 / o.temperature)).to_vector<double>();
      log_probs = lp.to_vector<double>();
    } else {
      K = o.top_k > 0 ? std::min(o.top_k, V) : V;
      const TopK top = topk(lp, K);
      probs = softmax(top.values * (1.0 / o.temperature)).to_vector<double>();  // renormalised over the K
      log_probs = top.values.to_vector<double>();
      ids = top.indices.to_vector<int64_t>();
    }
    std::vector<Pick> picks(N);
    for (int64_t i = 0; i < N; ++i) {
      const double* p = probs.data() + i * K;
      // The nucleus: candidates until their probability reaches top_p, the one that crosses it kept
      // (top_p 1 keeps all K: a sum that rounds up to 1 early must not cut the tail).
      int64_t kept = 0;
      double mass = 0;
      do {
        mass += p[kept++];
      } while (kept < K && (o.top_p >= 1.0 || mass < o.top_p));
      check_not_nan(mass, "sample");
      // Inverse CDF over the nucleus: the first candidate whose running sum exceeds u * mass (strictly, so
      // a zero-probability candidate, e.g. a masked eos, is never drawn).
      const double u = philox::u32_to_unit_float(
          philox::random_u32(o.seed, static_cast<uint64_t>(step), 0, static_cast<uint64_t>(sentences[i])));
      const double target = u * mass;
      int64_t j = 0;
      for (double acc = p[0]; !(acc > target) && j < kept - 1; acc += p[++j]) {
      }
      picks[i] = {ids.empty() ? j : ids[i * K + j], log_probs[i * K + j]};
    }
    return picks;
  };
  return decode_one_row_each(scorer, request, "sample", pick);
}

// ---- beam search ----

namespace {

struct BeamRow {
  std::vector<int64_t> tokens;
  double score;  // sum of log-probs; -inf for a padding row (fewer than beam_size candidates existed)
};

Hypothesis make_hypothesis(std::vector<int64_t> tokens, double log_prob, bool finished, double alpha) {
  Hypothesis h;
  const auto length = static_cast<int64_t>(tokens.size()) + (finished ? 1 : 0);
  h.tokens = std::move(tokens);
  h.log_prob = log_prob;
  h.score = log_prob / length_penalty(length, alpha);
  h.finished = finished;
  return h;
}

// The (rows, V) scores of a step: each live row's next-token log-probabilities plus its beam score.
Tensor beam_step_scores(LogProbSource& source, const Request& request, const std::vector<BeamRow>& rows,
                        const std::vector<int64_t>& live, int64_t per, int64_t step) {
  const auto N = static_cast<int64_t>(rows.size());
  std::vector<int64_t> last(N);
  for (int64_t r = 0; r < N; ++r)
    last[r] = rows[r].tokens.empty() ? request.first_tokens[live[r / per]] : rows[r].tokens.back();
  // Summed in float64: the scores then equal greedy's host sums exactly (see search.h).
  Tensor scores = source.next(last, step).to(DType::F64);
  if (step == 0) return scores;
  // Each row's beam score added to its V log-probs. The elementwise ops broadcast trailing dims only,
  // so add the (N) scores to the (V, N) transpose.
  std::vector<double> beam_scores(N);
  for (int64_t r = 0; r < N; ++r) beam_scores[r] = rows[r].score;
  const Tensor column = Tensor::from_vector(beam_scores, {N}, DType::F64).to(scores.device());
  return transpose(add(transpose(scores, 0, 1), column), 0, 1);
}

// One sentence's step: its K best candidates (`values` and `flat`, row-major over its `per` rows of V
// tokens, rows from `first_row`), best first. Those ending in EOS among the first beam_size go to
// `finished`; up to beam_size others continue, with their parent rows.
struct Expansion {
  std::vector<BeamRow> rows;
  std::vector<int64_t> parents;
  bool best_is_eos = false;
};
Expansion expand_sentence(const std::vector<BeamRow>& rows, const double* values, const int64_t* flat, int64_t K,
                          int64_t V, int64_t first_row, int64_t beam_size, int64_t eos, double alpha, NBest& finished) {
  Expansion e;
  for (int64_t c = 0; c < K && static_cast<int64_t>(e.rows.size()) < beam_size; ++c) {
    const double v = values[c];
    check_not_nan(v, "beam");
    if (v == kNegInf) break;  // sorted: only impossible candidates (masked, padding rows) remain
    const int64_t parent = first_row + flat[c] / V, token = flat[c] % V;
    if (token == eos) {
      if (c == 0) e.best_is_eos = true;
      if (c < beam_size) finished.push_back(make_hypothesis(rows[parent].tokens, v, true, alpha));
      continue;
    }
    BeamRow row{rows[parent].tokens, v};
    row.tokens.push_back(token);
    e.rows.push_back(std::move(row));
    e.parents.push_back(parent);
  }
  return e;
}

}  // namespace

std::vector<NBest> beam(StepScorer& scorer, const Request& request, const BeamOptions& o) {
  SRU_CHECK(o.beam_size >= 1, "beam: beam_size must be >= 1, got ", o.beam_size);
  SRU_CHECK(o.n_best >= 1 && o.n_best <= o.beam_size, "beam: n_best must be in [1, beam_size = ", o.beam_size,
            "], got ", o.n_best);
  SRU_CHECK(std::isfinite(o.length_penalty), "beam: length_penalty must be finite, got ", o.length_penalty);
  check_request(request, "beam");
  autograd::NoGradGuard no_grad;
  const int64_t B = request.sentences(), beam_size = o.beam_size;
  const double alpha = o.length_penalty;
  std::vector<NBest> finished(B);
  for (int64_t s = 0; s < B; ++s)
    if (request.max_length(s) == 0) finished[s].push_back(make_hypothesis({}, 0.0, false, alpha));

  // Live rows are grouped by sentence, `per` rows each: 1 at step 0, beam_size after.
  std::vector<int64_t> live = first_live_sentences(scorer, request);  // the sentence of each group
  std::vector<BeamRow> rows(live.size(), BeamRow{{}, 0.0});
  int64_t per = 1;
  LogProbSource source(scorer, request, "beam");
  for (int64_t step = 0; !live.empty(); ++step) {
    const Tensor scores = beam_step_scores(source, request, rows, live, per, step);
    const int64_t V = source.vocab();
    const auto S = static_cast<int64_t>(live.size());
    const int64_t K = std::min(2 * beam_size, per * V);
    const TopK top = topk(scores.view({S, per * V}), K);
    const auto values = top.values.to_vector<double>();
    const auto flat = top.indices.to_vector<int64_t>();

    std::vector<BeamRow> next_rows;
    std::vector<int64_t> parents, next_live;
    for (int64_t g = 0; g < S; ++g) {
      const int64_t s = live[g];
      const bool at_max = step + 1 >= request.max_length(s);
      Expansion e = expand_sentence(rows, &values[g * K], &flat[g * K], K, V, g * per, beam_size, request.eos, alpha,
                                    finished[s]);
      const bool best_done = e.best_is_eos && static_cast<int64_t>(finished[s].size()) >= o.n_best;
      if (best_done || at_max || e.rows.empty()) {
        if (at_max)
          for (BeamRow& row : e.rows) finished[s].push_back(make_hypothesis(std::move(row.tokens), row.score, false, alpha));
        continue;
      }
      // Keep beam_size rows per sentence (the (S, beam_size * V) view needs it): pad with impossible rows.
      while (static_cast<int64_t>(e.rows.size()) < beam_size) {
        e.rows.push_back(BeamRow{e.rows.front().tokens, kNegInf});
        e.parents.push_back(e.parents.front());
      }
      for (int64_t i = 0; i < beam_size; ++i) {
        next_rows.push_back(std::move(e.rows[i]));
        parents.push_back(e.parents[i]);
      }
      next_live.push_back(s);
    }
    reorder_if_changed(scorer, parents, rows.size());
    rows = std::move(next_rows);
    live = std::move(next_live);
    per = beam_size;
  }
  for (NBest& list : finished) {
    std::stable_sort(list.begin(), list.end(),
                     [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
    if (static_cast<int64_t>(list.size()) > o.n_best) list.resize(o.n_best);
  }
  return finished;
}

}  // namespace sru::search
