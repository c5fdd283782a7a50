// The search layer: decoding token sequences over an abstract scorer — greedy, sampling (temperature,
// top-k, top-p) and beam search (GNMT length penalty, n-best). It sits above nn and below tasks: a task
// wraps its model in a StepScorer, and a strategy here never sees a model, only (rows, V) log-probs.
//
// The protocol. A search keeps a set of live rows (partial hypotheses) and, per step, calls
//   next_log_probs(last_tokens)  -> (N, V) log-probabilities of the next token for the N live rows;
//   reorder(rows)                -> new row i continues old row rows[i].
// At the start there is one row per sentence, fed the request's first token. reorder is called only
// when the row set changes (rows repeat when beam search expands a sentence into `beam_size` rows,
// rows drop when sentences finish), never after the last step. Temperature acts on log-probabilities
// as on logits: softmax(logp / T) = softmax(logits / T).
//
// Where the work runs. The per-step selection runs where the scorer's tensor lives (topk,
// log_softmax/softmax, masked_fill, matmul from src/ops), so on a GPU only the small (rows, k) results
// come back to the host for the bookkeeping (tokens, eos, lengths). Plain sampling (top_k 0) reads its
// (N, V) probabilities back: drawing from a whole distribution needs its cumulative sums, and there is
// no device cumsum/sampling op yet.
//
// Lengths. A sentence decodes at most max_length = floor(max_len_a * source_length + max_len_b) steps;
// each step emits one token, an eos included (so an LM with max_len_b = n generates n tokens). Before
// step min_length the eos is masked out, so every finished hypothesis has at least min_length tokens
// before its eos. A hypothesis's tokens exclude the eos; `finished` says whether it ended with one.
//
// Scores. log_prob is the sum of the scorer's log-probabilities of the chosen tokens (the eos
// included; untempered, unrenormalised after masking or filtering). greedy and sample report
// score = log_prob; beam reports the length-penalised score log_prob / ((5 + |Y|) / 6)^alpha (GNMT,
// |Y| the length counting the eos). Beam search sums in float64 on the device and greedy in double on
// the host, in the same order from the same values, so beam_size 1 reproduces greedy bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace sru::search {

// What a model supplies to a search (see the protocol above).
class StepScorer {
 public:
  virtual ~StepScorer() = default;
  // (N, V) floating log-probabilities of the next token, N = last_tokens.size(), V fixed for a search.
  virtual Tensor next_log_probs(const std::vector<int64_t>& last_tokens) = 0;
  // New row i continues old row rows[i] (indices into the previous row set; they may repeat or drop).
  virtual void reorder(const std::vector<int64_t>& rows) = 0;
};

// What a scorer returns from its model's logits: log_softmax over them widened to float32 when they are
// bf16 (a train.precision bf16 model answers in bf16; the search's scores and ranking stay float32, as
// fairseq's get_normalized_probs takes log_softmax of logits.float()).
Tensor log_probs_of_logits(const Tensor& logits);

// B sentences to decode together.
struct Request {
  std::vector<int64_t> first_tokens;    // one per sentence: a BOS id, or the last token of an LM's prompt
  std::vector<int64_t> source_lengths;  // one per sentence, or empty for all 0 (language models)
  int64_t eos = -1;                     // -1: no end token (decode to the maximum length)
  int64_t min_length = 0;               // tokens before an eos is allowed
  double max_len_a = 0.0;               // max length = floor(max_len_a * source_length + max_len_b)
  int64_t max_len_b = 200;

  int64_t sentences() const { return static_cast<int64_t>(first_tokens.size()); }
  int64_t max_length(int64_t sentence) const;  // checked: >= 0
};

struct Hypothesis {
  std::vector<int64_t> tokens;  // without the eos
  double log_prob = 0.0;
  double score = 0.0;
  bool finished = false;  // ended with the eos (false: stopped at the maximum length)
};

// Per sentence, its hypotheses best first (one for greedy and sample, up to n_best for beam).
using NBest = std::vector<Hypothesis>;

struct SamplingOptions {
  double temperature = 1.0;  // > 0
  int64_t top_k = 0;         // keep the k most probable tokens; 0 = off
  double top_p = 1.0;        // in (0, 1]; keep the smallest top set whose probability reaches p; 1 = off
  uint64_t seed = 0;
};

struct BeamOptions {
  int64_t beam_size = 5;        // >= 1
  double length_penalty = 0.0;  // GNMT alpha; 0 = no penalty
  int64_t n_best = 1;           // in [1, beam_size]
};

// The most probable token each step (ties: the smaller token id).
std::vector<NBest> greedy(StepScorer& scorer, const Request& request);

// A draw from softmax(logp / T) each step, restricted like Hugging Face transformers' warpers: temperature,
// then top_k (the k most probable), then top_p over the renormalised top-k (the most probable tokens
// until their sum reaches p; the token that crosses p is kept). Deterministic for a seed: sentence s's
// uniform at step t is Philox word (seed, counter t, stream s), so it does not depend on the other
// sentences of the batch; with top_k 0 and top_p 1 the draw walks the vocabulary in id order as
// LanguageModelTask::generate does.
std::vector<NBest> sample(StepScorer& scorer, const Request& request, const SamplingOptions& options);

// Beam search as in OpenNMT-py / fairseq. Step 0 scores one row per sentence, then each sentence keeps
// beam_size rows. Each step takes the top 2 * beam_size candidates (beam score + log-prob) per sentence;
// an eos candidate ranked within the top beam_size becomes a finished hypothesis (fairseq's rule: this
// is what makes beam_size 1 equal greedy), the best beam_size non-eos candidates continue. A sentence is
// done when this step's best candidate ends with the eos and it holds n_best finished hypotheses
// (OpenNMT-py's rule), or at its maximum length (its live beams are then finalised, finished = false).
// Returns the n_best best finished hypotheses by penalised score (ties: the earlier finished first).
std::vector<NBest> beam(StepScorer& scorer, const Request& request, const BeamOptions& options);

// GNMT's length penalty ((5 + length) / 6)^alpha.
double length_penalty(int64_t length, double alpha);

}  // namespace sru::search
