// Length-bucketed batches (see batching.h).
#include "tasks/batching.h"

#include <algorithm>

#include "core/error.h"
#include "data/labeled_text.h"

namespace sru::tasks {

std::vector<std::vector<int64_t>> length_sorted_batches(const std::vector<int64_t>& lengths,
                                                        std::vector<int64_t> order, int64_t size) {
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths[a] < lengths[b]; });
  std::vector<std::vector<int64_t>> batches;
  for (size_t i = 0; i < order.size(); i += static_cast<size_t>(size))
    batches.emplace_back(order.begin() + i, order.begin() + std::min(order.size(), i + static_cast<size_t>(size)));
  return batches;
}

std::vector<std::vector<int64_t>> evaluation_batches(const std::vector<int64_t>& lengths, int64_t size) {
  std::vector<int64_t> order(lengths.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  return length_sorted_batches(lengths, std::move(order), size);
}

std::vector<std::vector<int64_t>> epoch_batches(const std::vector<int64_t>& lengths, int64_t size, uint64_t seed,
                                                int64_t epoch) {
  const uint64_t s = seed * 1000003u + static_cast<uint64_t>(epoch);
  const auto sorted = length_sorted_batches(lengths, data::shuffled_indices(static_cast<int64_t>(lengths.size()), s), size);
  std::vector<std::vector<int64_t>> batches;
  for (int64_t i : data::shuffled_indices(static_cast<int64_t>(sorted.size()), ~s)) batches.push_back(sorted[i]);
  return batches;
}

BatchPart batch_part(int64_t rows, const dist::Communicator& comm) {
  if (comm.size() == 1) return {0, rows, 1.0, {}};
  const dist::Rows part = dist::share_of(rows, comm.rank(), comm.size());
  if (part.count == 0) return {0, 1, 0.0, {rows, 0, 1}};
  return {part.first, part.count, static_cast<double>(part.count) / static_cast<double>(rows),
          {rows, part.first, part.count}};
}

}  // namespace sru::tasks

namespace sru::tasks {

int64_t LengthPadding::operator()(int64_t length) const {
  const int64_t rounded = round_up(length, multiple);
  const auto bucket = std::lower_bound(buckets.begin(), buckets.end(), rounded);
  return bucket == buckets.end() ? rounded : *bucket;
}

void LengthPadding::check(const std::string& key) const {
  for (size_t i = 0; i < buckets.size(); ++i) {
    SRU_CHECK(buckets[i] >= 1, key, ": every length must be >= 1, got ", buckets[i]);
    SRU_CHECK(i == 0 || buckets[i] > buckets[i - 1], key, ": the lengths must ascend, but ", buckets[i], " follows ",
              buckets[i - 1]);
    SRU_CHECK(multiple == 0 || buckets[i] % multiple == 0, key, ": ", buckets[i], " is not a multiple of "
              "data.pad_to_multiple (", multiple, "): every length must be, so that the padded lengths keep its alignment");
  }
}

}  // namespace sru::tasks
