// Batches of examples of similar length, shared by the tasks that pad variable-length examples
// (classify, squad): few padded positions per batch, and an order that depends only on (seed, epoch),
// so a resumed run rebuilds the same epoch.
#pragma once

#include <cstdint>
#include <vector>

namespace sru::tasks {

// `order` (example indices) stable-sorted by lengths[i] and cut into batches of `size`: similar lengths
// share a batch, and examples of equal length keep their order in `order`.
std::vector<std::vector<int64_t>> length_sorted_batches(const std::vector<int64_t>& lengths,
                                                        std::vector<int64_t> order, int64_t size);

// Evaluation batches: every example in index order, then sorted by length.
std::vector<std::vector<int64_t>> evaluation_batches(const std::vector<int64_t>& lengths, int64_t size);

// A training epoch's batches: the examples shuffled with (seed, epoch), sorted by length (stable, so
// equal lengths stay shuffled), cut into batches of `size`, and the batches shuffled.
std::vector<std::vector<int64_t>> epoch_batches(const std::vector<int64_t>& lengths, int64_t size, uint64_t seed,
                                                int64_t epoch);

}  // namespace sru::tasks
