// Batches of sentence pairs by a token budget, for translation (beside batching.h, which cuts fixed
// numbers of examples): a batch's padded size, sentences x max(longest source, longest target) as
// fairseq's --max-tokens and Marian's --mini-batch-words count it, stays within `max_tokens`. A
// training epoch shuffles the pairs, takes them in pools of about `pool` batches' worth of tokens
// (Marian's maxi-batch), sorts each pool by length so that similar lengths share a batch, cuts it into
// batches and finally shuffles the order of all batches. Everything follows from (seed, epoch), so a
// resumed run rebuilds the same epoch's batches.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sru::tasks {

struct TokenBatchOptions {
  // A batch's padded size, sentences x max over them of max(source length, target length), is at most
  // this. A pair longer than the budget on its own gets a batch of its own (counted in `oversized`);
  // use max_length to leave such pairs out instead. Lengths count what the caller passes (e.g. with
  // bos/eos added); a length of 0 counts as 1.
  int64_t max_tokens = 4096;
  int64_t max_sentences = 0;  // and at most this many sentences a batch; 0: no limit
  // Training: pairs are taken (in shuffled order) in pools of about pool x max_tokens tokens
  // (sum of max(source, target) lengths); 1 sorts within each batch's worth only.
  int64_t pool = 100;
  // true: each pool is sorted by length before it is cut (less padding). false: batches are cut from the
  // shuffled pool as it is (a random mix of lengths).
  bool sort_pool = true;
  // Training: pairs whose source or target is longer than this are left out of every epoch (counted in
  // `too_long`); 0: no limit. Evaluation keeps every pair.
  int64_t max_length = 0;
};

struct TokenBatches {
  std::vector<std::vector<int64_t>> batches;  // pair indices; every kept pair in exactly one batch
  int64_t too_long = 0;                        // pairs left out by max_length
  int64_t oversized = 0;                       // batches of one pair whose padded size exceeds max_tokens
};

// A training epoch's batches, a function of (lengths, options, seed, epoch) only.
TokenBatches epoch_token_batches(std::span<const int64_t> source_lengths, std::span<const int64_t> target_lengths,
                                 const TokenBatchOptions& options, uint64_t seed, int64_t epoch);

// Evaluation batches: every pair (max_length and pool ignored), sorted by length over the whole set
// (stable: equal lengths in index order), cut by the same budget, in that order.
TokenBatches evaluation_token_batches(std::span<const int64_t> source_lengths,
                                      std::span<const int64_t> target_lengths, const TokenBatchOptions& options);

// The padded size of a batch: its sentences x max over them of max(source, target length, 1).
int64_t padded_tokens(std::span<const int64_t> batch, std::span<const int64_t> source_lengths,
                      std::span<const int64_t> target_lengths);

}  // namespace sru::tasks
