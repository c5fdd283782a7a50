// Batches of examples of similar length, shared by the tasks that pad variable-length examples
// (classify, squad): few padded positions per batch, and an order that depends only on (seed, epoch),
// so a resumed run rebuilds the same epoch. And each data-parallel rank's part of a batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"
#include "dist/communicator.h"

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

// Data parallel: the rows [first, first + count) of a global training batch of `rows` rows (examples,
// streams) that this rank computes (dist::share_of), its share of the batch's loss terms (count / rows),
// and the generator's batch shard for them (none in a single process). A rank whose share is empty (a
// last batch with fewer examples than ranks) computes the batch's first row with share 0: it draws the
// random numbers the others draw and adds zeros to the gradient sum.
struct BatchPart {
  int64_t first = 0, count = 0;
  double share = 1.0;
  BatchShard shard;
};
BatchPart batch_part(int64_t rows, const dist::Communicator& comm);

// length rounded up to a multiple of `multiple` (0: length): a batch padded to data.pad_to_multiple.
inline int64_t round_up(int64_t length, int64_t multiple) {
  return multiple > 0 ? (length + multiple - 1) / multiple * multiple : length;
}

// The length a training batch pads a side to (data.pad_to_multiple and data.length_buckets): rounded up
// to a multiple of `multiple` (0: not rounded), then up to the smallest of `buckets` (ascending, each a
// multiple of `multiple`) that holds it; a length past the last bucket keeps the multiple's rounding.
struct LengthPadding {
  int64_t multiple = 0;
  std::vector<int64_t> buckets;
  int64_t operator()(int64_t length) const;
  // Whether the padded lengths take a bounded set of values (either setting given).
  bool bounded() const { return multiple > 0 || !buckets.empty(); }
  // Refuses buckets that are not ascending, not >= 1, or not multiples of `multiple`, naming `key`.
  void check(const std::string& key) const;
};

}  // namespace sru::tasks
