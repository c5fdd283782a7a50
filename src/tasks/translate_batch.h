// The translate task's batches, shared by its training step (tasks/translate.cpp) and its evaluation
// (tasks/translate_decode.cpp): an internal header of the task.
#pragma once

#include <cstdint>
#include <vector>

#include "tasks/translate.h"

namespace sru::tasks {

// The batch's tensors: source (Ls, B) pieces then eos; target_in (Lt, B) bos then pieces; target_out
// (Lt * B) pieces then eos, -100 at padding; padding masks (L, B) nonzero at padding.
struct PairBatch {
  Tensor source, source_pad, target_in, target_pad, target_out;
  int64_t target_tokens = 0;
};

// The pairs `rows`, padded to their longest sides or to `padded_to` (the whole batch's, when this
// process computes part of it: data parallel).
PairBatch make_batch(const TranslationSplit& s, const std::vector<int64_t>& rows, const std::vector<int64_t>& padded_to);
PairBatch make_batch(const TranslationSplit& s, const std::vector<int64_t>& rows);
// Lengths a batch pads to: pieces plus the eos (source) or the bos (target).
std::vector<int64_t> padded_lengths(const data::TokenSequences& s);

}  // namespace sru::tasks
