// The translate task's batches, shared by its training step (tasks/translate.cpp) and its evaluation
// (tasks/translate_decode.cpp): an internal header of the task.
#pragma once

#include <cstdint>
#include <vector>

#include "tasks/batching.h"
#include "tasks/translate.h"

namespace sru::tasks {

// The pairs `rows`, padded to their longest sides or to `padded_to`'s (the whole batch's, when this
// process computes part of it: data parallel), then padded as `padding` says (by default not rounded).
PairBatch make_batch(const TranslationSplit& s, const std::vector<int64_t>& rows, const std::vector<int64_t>& padded_to,
                     const LengthPadding& padding = {});
PairBatch make_batch(const TranslationSplit& s, const std::vector<int64_t>& rows);
// Lengths a batch pads to: pieces plus the eos (source) or the bos (target).
std::vector<int64_t> padded_lengths(const data::TokenSequences& s);

}  // namespace sru::tasks
