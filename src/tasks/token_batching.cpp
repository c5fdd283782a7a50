// Token-budget batches of sentence pairs (see token_batching.h).
#include "tasks/token_batching.h"

#include <algorithm>
#include <limits>
#include <random>

#include "core/error.h"

namespace sru::tasks {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Fisher-Yates with std::mt19937_64 (whose sequence the standard fixes), so every platform agrees.
template <typename T>
void shuffle_in_place(std::vector<T>& v, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng() % i]);
}

struct Lengths {
  std::span<const int64_t> source, target;
  int64_t width(int64_t i) const { return std::max<int64_t>({source[i], target[i], 1}); }
  // Sorting key: the padded width, then the target and source lengths (less padding on each side).
  bool shorter(int64_t a, int64_t b) const {
    const int64_t wa = width(a), wb = width(b);
    if (wa != wb) return wa < wb;
    if (target[a] != target[b]) return target[a] < target[b];
    return source[a] < source[b];
  }
};

Lengths checked(std::span<const int64_t> source, std::span<const int64_t> target, const TokenBatchOptions& o) {
  SRU_CHECK(source.size() == target.size(), "token batching: ", source.size(), " source lengths but ",
            target.size(), " target lengths");
  SRU_CHECK(o.max_tokens >= 1, "token batching: max_tokens must be >= 1, got ", o.max_tokens);
  SRU_CHECK(o.max_sentences >= 0, "token batching: max_sentences must be >= 0, got ", o.max_sentences);
  SRU_CHECK(o.pool >= 1, "token batching: pool must be >= 1, got ", o.pool);
  SRU_CHECK(o.max_length >= 0, "token batching: max_length must be >= 0, got ", o.max_length);
  for (size_t i = 0; i < source.size(); ++i)
    SRU_CHECK(source[i] >= 0 && target[i] >= 0, "token batching: pair ", i, " has a negative length");
  return {source, target};
}

// Cuts `order` into consecutive batches, each as long as the budget allows.
void cut(const std::vector<int64_t>& order, const Lengths& len, const TokenBatchOptions& o, TokenBatches& out) {
  std::vector<int64_t> batch;
  int64_t width = 0;
  const auto flush = [&] {
    if (batch.empty()) return;
    if (batch.size() == 1 && width > o.max_tokens) ++out.oversized;
    out.batches.push_back(std::move(batch));
    batch.clear();
    width = 0;
  };
  for (int64_t i : order) {
    const int64_t w = std::max(width, len.width(i));
    const int64_t n = static_cast<int64_t>(batch.size()) + 1;
    if (!batch.empty() && (w > o.max_tokens / n || (o.max_sentences > 0 && n > o.max_sentences))) flush();
    batch.push_back(i);
    width = std::max(width, len.width(i));
  }
  flush();
}

void sort_by_length(std::vector<int64_t>::iterator begin, std::vector<int64_t>::iterator end, const Lengths& len) {
  std::stable_sort(begin, end, [&](int64_t a, int64_t b) { return len.shorter(a, b); });
}

}  // namespace

int64_t padded_tokens(std::span<const int64_t> batch, std::span<const int64_t> source_lengths,
                      std::span<const int64_t> target_lengths) {
  const Lengths len{source_lengths, target_lengths};
  int64_t width = 0;
  for (int64_t i : batch) width = std::max(width, len.width(i));
  return width * static_cast<int64_t>(batch.size());
}

TokenBatches epoch_token_batches(std::span<const int64_t> source_lengths, std::span<const int64_t> target_lengths,
                                 const TokenBatchOptions& options, uint64_t seed, int64_t epoch) {
  const Lengths len = checked(source_lengths, target_lengths, options);
  TokenBatches out;
  std::vector<int64_t> order;
  order.reserve(source_lengths.size());
  for (int64_t i = 0; i < static_cast<int64_t>(source_lengths.size()); ++i) {
    if (options.max_length > 0 && (source_lengths[i] > options.max_length || target_lengths[i] > options.max_length))
      ++out.too_long;
    else
      order.push_back(i);
  }
  const uint64_t s = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(epoch) ^ 0x7472616E736C6174ull));
  shuffle_in_place(order, s);

  // Pools of about pool x max_tokens tokens (and pool x max_sentences sentences when that is set).
  const int64_t big = std::numeric_limits<int64_t>::max();
  const int64_t pool_tokens = options.pool > big / options.max_tokens ? big : options.pool * options.max_tokens;
  const int64_t pool_sentences =
      options.max_sentences == 0 ? big
      : options.pool > big / options.max_sentences ? big : options.pool * options.max_sentences;
  std::vector<int64_t> pool;
  size_t start = 0;
  while (start < order.size()) {
    size_t end = start;
    int64_t tokens = 0;
    while (end < order.size() && tokens < pool_tokens && static_cast<int64_t>(end - start) < pool_sentences)
      tokens += len.width(order[end++]);
    pool.assign(order.begin() + static_cast<std::ptrdiff_t>(start), order.begin() + static_cast<std::ptrdiff_t>(end));
    if (options.sort_pool) sort_by_length(pool.begin(), pool.end(), len);
    cut(pool, len, options, out);
    start = end;
  }
  shuffle_in_place(out.batches, splitmix64(s ^ 0x6261746368657321ull));
  return out;
}

TokenBatches evaluation_token_batches(std::span<const int64_t> source_lengths,
                                      std::span<const int64_t> target_lengths, const TokenBatchOptions& options) {
  const Lengths len = checked(source_lengths, target_lengths, options);
  std::vector<int64_t> order(source_lengths.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  sort_by_length(order.begin(), order.end(), len);
  TokenBatches out;
  cut(order, len, options, out);
  return out;
}

}  // namespace sru::tasks
