// The search layer (src/search) on synthetic scorers: hand-made next-token tables whose greedy, beam and
// sampling answers are worked out by hand in the comments, random tables for the properties that must
// hold everywhere (beam 1 = greedy, top_k 1 = greedy), sampling frequencies over many independent draws,
// the reorder protocol, the host reads per step, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "core/cuda/device_info.h"
#include "core/host_sync.h"
#include "search/search.h"
#include "testing.h"

using namespace sru;
using namespace sru::search;
using sru::testing::error_of;

namespace {

// The hand tables' vocabulary (V = 4); C doubles as the BOS of most cases.
constexpr int64_t kEos = 0, kA = 1, kB = 2, kC = 3;
constexpr double kInf = std::numeric_limits<double>::infinity();

using History = std::vector<int64_t>;  // the tokens a row was fed, its first token included
using Probs = std::vector<double>;     // next-token probabilities (0 -> log-prob -inf)
using Rule = std::function<Probs(const History&)>;

Probs eos_certain(int64_t V = 4) {
  Probs p(V, 0.0);
  p[0] = 1.0;
  return p;
}

// A scorer over a table: every live row keeps its history (reordered with the rows) and gets the table's
// distribution for it, else rule(history). It records the last tokens of every call and every reorder.
class TableScorer : public StepScorer {
 public:
  TableScorer(const std::vector<int64_t>& first_tokens, std::map<History, Probs> table,
              Rule rule = [](const History&) { return eos_certain(); }, DType dtype = DType::F64)
      : table_(std::move(table)), rule_(std::move(rule)), dtype_(dtype) {
    for (int64_t t : first_tokens) histories_.push_back({t});
  }

  Tensor next_log_probs(const std::vector<int64_t>& last_tokens) override {
    EXPECT_EQ(last_tokens.size(), histories_.size()) << "call " << calls.size();
    for (size_t i = 0; i < last_tokens.size() && i < histories_.size(); ++i) {
      if (!calls.empty()) histories_[i].push_back(last_tokens[i]);  // the token chosen at the last step
      EXPECT_EQ(last_tokens[i], histories_[i].back()) << "row " << i << " of call " << calls.size();
    }
    calls.push_back(last_tokens);
    std::vector<double> logs;
    for (const History& h : histories_) {
      const auto it = table_.find(h);
      const Probs p = it != table_.end() ? it->second : rule_(h);
      for (double v : p) logs.push_back(v > 0 ? std::log(v) : -kInf);
    }
    const auto N = static_cast<int64_t>(histories_.size());
    return Tensor::from_vector(logs, {N, N > 0 ? static_cast<int64_t>(logs.size()) / N : 0}, DType::F64)
        .to(dtype_)
        .to(device);
  }

  void reorder(const std::vector<int64_t>& rows) override {
    reorders.push_back(rows);
    std::vector<History> next;
    for (int64_t r : rows) {
      EXPECT_TRUE(r >= 0 && r < static_cast<int64_t>(histories_.size())) << "reorder row " << r;
      next.push_back(histories_.at(r));
    }
    histories_ = std::move(next);
  }

  std::vector<std::vector<int64_t>> calls, reorders;
  Device device = Device::cpu();  // where the log-probabilities are returned

 private:
  std::map<History, Probs> table_;
  Rule rule_;
  DType dtype_;
  std::vector<History> histories_;
};

// Case 1: greedy takes A (0.5) and then ends (0.4): A, p = 0.2. Beam 2 keeps B (0.4), which ends with
// 0.9: B, p = 0.36.
std::map<History, Probs> case1() {
  return {{{kC}, {0.1, 0.5, 0.4, 0}}, {{kC, kA}, {0.4, 0.3, 0.3, 0}}, {{kC, kB}, {0.9, 0.05, 0.05, 0}}};
}

// Case 2: the empty hypothesis ends with p = 0.45 at step 0; A A then ends with 0.55 * 1 * 0.7 = 0.385.
std::map<History, Probs> case2() {
  return {{{kC}, {0.45, 0.55, 0, 0}}, {{kC, kA}, {0, 1, 0, 0}}, {{kC, kA, kA}, {0.7, 0.3, 0, 0}}};
}

// Case 4 (a rule, never an eos): after A (or the first token) A 0.6 / B 0.4, after B A 0.3 / B 0.7.
Probs no_eos_rule(const History& h) { return h.back() == kB ? Probs{0, 0.3, 0.7, 0} : Probs{0, 0.6, 0.4, 0}; }

Request request(std::vector<int64_t> first_tokens, int64_t eos = kEos, int64_t max_len_b = 10) {
  Request r;
  r.first_tokens = std::move(first_tokens);
  r.eos = eos;
  r.max_len_b = max_len_b;
  return r;
}

BeamOptions beam_options(int64_t beam_size, int64_t n_best = 1, double alpha = 0.0) {
  BeamOptions o;
  o.beam_size = beam_size;
  o.n_best = n_best;
  o.length_penalty = alpha;
  return o;
}

SamplingOptions sampling(uint64_t seed, double temperature = 1.0, int64_t top_k = 0, double top_p = 1.0) {
  SamplingOptions o;
  o.seed = seed;
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  return o;
}

void expect_hypothesis(const Hypothesis& h, const std::vector<int64_t>& tokens, double log_prob, bool finished,
                       double score) {
  EXPECT_EQ(h.tokens, tokens);
  EXPECT_NEAR(h.log_prob, log_prob, 1e-12);
  EXPECT_NEAR(h.score, score, 1e-12);
  EXPECT_EQ(h.finished, finished);
}

// Tokens, log_prob, score and finished all equal, bit for bit.
void expect_same(const std::vector<NBest>& a, const std::vector<NBest>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t s = 0; s < a.size(); ++s) {
    ASSERT_EQ(a[s].size(), b[s].size()) << what << ", sentence " << s;
    for (size_t i = 0; i < a[s].size(); ++i) {
      EXPECT_EQ(a[s][i].tokens, b[s][i].tokens) << what << ", sentence " << s;
      EXPECT_EQ(a[s][i].log_prob, b[s][i].log_prob) << what << ", sentence " << s;
      EXPECT_EQ(a[s][i].score, b[s][i].score) << what << ", sentence " << s;
      EXPECT_EQ(a[s][i].finished, b[s][i].finished) << what << ", sentence " << s;
    }
  }
}

// A random table of V tokens: each history's distribution comes from a generator seeded by the history
// (FNV-1a), so every row with that history sees the same one. Some tokens get probability 0 (-inf);
// token 1 never does, so no row is all -inf.
Rule random_rule(uint64_t seed, int64_t V) {
  return [seed, V](const History& h) {
    uint64_t x = 1469598103934665603ull ^ seed;
    for (int64_t t : h) x = (x ^ static_cast<uint64_t>(t + 1)) * 1099511628211ull;
    std::mt19937_64 gen(x);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    Probs p(V);
    for (int64_t v = 0; v < V; ++v) p[v] = (v != 1 && u(gen) < 0.2) ? 0.0 : u(gen) + 0.01;
    p[0] *= 0.5;  // the eos a little less likely, so hypotheses of several lengths occur
    return p;
  };
}

struct RandomCase {
  Request request;
  int64_t V;
  uint64_t seed;
  DType dtype;
};

// Random requests: 3 sentences of different maximum lengths, with and without an eos and min_length.
RandomCase random_case(uint64_t seed) {
  std::mt19937_64 gen(seed);
  RandomCase c;
  c.seed = seed;
  c.V = 2 + static_cast<int64_t>(gen() % 6);
  c.dtype = seed % 2 ? DType::F32 : DType::F64;
  c.request.first_tokens = {static_cast<int64_t>(gen() % c.V), static_cast<int64_t>(gen() % c.V), 1};
  c.request.source_lengths = {static_cast<int64_t>(gen() % 5), static_cast<int64_t>(gen() % 5), 0};
  c.request.max_len_a = 1.0;
  c.request.max_len_b = 1 + static_cast<int64_t>(gen() % 3);
  c.request.eos = seed % 5 == 0 ? -1 : 0;
  c.request.min_length = static_cast<int64_t>(gen() % 3);
  return c;
}

TableScorer random_scorer(const RandomCase& c) {
  return TableScorer(c.request.first_tokens, {}, random_rule(c.seed, c.V), c.dtype);
}

}  // namespace

TEST(Search, GreedyAndBeamDisagree) {
  TableScorer g({kC}, case1());
  const auto greedy_out = greedy(g, request({kC}));
  ASSERT_EQ(greedy_out.size(), 1u);
  ASSERT_EQ(greedy_out[0].size(), 1u);
  const double greedy_lp = std::log(0.5) + std::log(0.4);
  expect_hypothesis(greedy_out[0][0], {kA}, greedy_lp, true, greedy_lp);

  // Beam 2: step 0 keeps A and B (the eos, 3rd of the 2 * 2 candidates, is not in the top 2); step 1's
  // best candidate is B eos (0.36), then A eos (0.2): both finish, and the best ended, so it stops.
  TableScorer b({kC}, case1());
  const auto beam_out = beam(b, request({kC}), beam_options(2, 2));
  ASSERT_EQ(beam_out[0].size(), 2u);
  const double beam_lp = std::log(0.4) + std::log(0.9);
  expect_hypothesis(beam_out[0][0], {kB}, beam_lp, true, beam_lp);
  expect_hypothesis(beam_out[0][1], {kA}, greedy_lp, true, greedy_lp);
  EXPECT_EQ(b.calls.size(), 2u);
  EXPECT_EQ(b.reorders, (std::vector<std::vector<int64_t>>{{0, 0}}));  // 1 row expanded into the 2 beams
}

TEST(Search, LengthPenaltyChangesTheWinner) {
  // Without a penalty the empty hypothesis wins: log 0.45 = -0.799 > log 0.385 = -0.955. With alpha 1,
  // A A (length 3 with its eos) scores -0.955 / (8/6) = -0.716 and the empty one -0.799 / 1.
  const double short_lp = std::log(0.45), long_lp = std::log(0.55) + std::log(1.0) + std::log(0.7);
  TableScorer s0({kC}, case2());
  const auto plain = beam(s0, request({kC}), beam_options(2));
  ASSERT_EQ(plain[0].size(), 1u);
  expect_hypothesis(plain[0][0], {}, short_lp, true, short_lp);

  TableScorer s1({kC}, case2());
  const auto penalised = beam(s1, request({kC}), beam_options(2, 2, 1.0));
  ASSERT_EQ(penalised[0].size(), 2u);
  expect_hypothesis(penalised[0][0], {kA, kA}, long_lp, true, long_lp / (8.0 / 6.0));
  expect_hypothesis(penalised[0][1], {}, short_lp, true, short_lp);
  EXPECT_DOUBLE_EQ(length_penalty(3, 1.0), 8.0 / 6.0);
  EXPECT_DOUBLE_EQ(length_penalty(7, 0.5), std::sqrt(2.0));
  EXPECT_EQ(length_penalty(100, 0.0), 1.0);
}

TEST(Search, AllBeamsEndBeforeTheMaximumLength) {
  // Case 2 with n_best 2: the empty hypothesis finishes at step 0, A A at step 2 (its best candidate then
  // ends), long before max length 10; the padding row (only one non-eos candidate at steps 0 and 1) never
  // produces a hypothesis.
  TableScorer s({kC}, case2());
  const auto out = beam(s, request({kC}, kEos, 10), beam_options(2, 2));
  ASSERT_EQ(out[0].size(), 2u);
  expect_hypothesis(out[0][0], {}, std::log(0.45), true, std::log(0.45));
  expect_hypothesis(out[0][1], {kA, kA}, std::log(0.55) + std::log(0.7), true, std::log(0.55) + std::log(0.7));
  EXPECT_EQ(s.calls.size(), 3u);
  // Both steps: A (then A A) continues row 0, and the padding row is a copy of it.
  EXPECT_EQ(s.reorders, (std::vector<std::vector<int64_t>>{{0, 0}, {0, 0}}));
}

TEST(Search, MaximumLengthFinalisesTheLiveBeams) {
  // Case 4, max length 3: beam 2 keeps A, B; then A A (0.36), B B (0.28); then A A A (0.216) and
  // B B B (0.196), finalised unfinished. Greedy: A A A.
  for (int64_t eos : {kEos, int64_t{-1}}) {
    TableScorer s({kC}, {}, no_eos_rule);
    const auto out = beam(s, request({kC}, eos, 3), beam_options(2, 2, 1.0));
    ASSERT_EQ(out[0].size(), 2u);
    const double aaa = 3 * std::log(0.6), bbb = std::log(0.4) + 2 * std::log(0.7);
    expect_hypothesis(out[0][0], {kA, kA, kA}, aaa, false, aaa / (8.0 / 6.0));  // |Y| = 3, no eos
    expect_hypothesis(out[0][1], {kB, kB, kB}, bbb, false, bbb / (8.0 / 6.0));
    EXPECT_EQ(s.calls.size(), 3u);
    // Step 1's survivors A A and B B continue rows 0 and 1 in place: only the expansion reorders.
    EXPECT_EQ(s.reorders, (std::vector<std::vector<int64_t>>{{0, 0}}));

    TableScorer g({kC}, {}, no_eos_rule);
    const auto greedy_out = greedy(g, request({kC}, eos, 3));
    expect_hypothesis(greedy_out[0][0], {kA, kA, kA}, aaa, false, aaa);
  }
}

TEST(Search, BeamOneEqualsGreedy) {
  // The hand tables.
  for (const auto& table : {case1(), case2(), std::map<History, Probs>{}}) {
    TableScorer g({kC, kC}, table, no_eos_rule), b({kC, kC}, table, no_eos_rule);
    expect_same(greedy(g, request({kC, kC}, kEos, 4)), beam(b, request({kC, kC}, kEos, 4), beam_options(1)),
                "hand table");
    EXPECT_EQ(g.reorders, b.reorders);
  }
  // Random tables, float32 and float64, with and without an eos and min_length: same tokens, the same
  // log-probabilities bit for bit, the same rows dropped at the same steps.
  for (uint64_t seed = 0; seed < 60; ++seed) {
    const RandomCase c = random_case(seed);
    TableScorer g = random_scorer(c), b = random_scorer(c);
    expect_same(greedy(g, c.request), beam(b, c.request, beam_options(1)), "seed " + std::to_string(seed));
    EXPECT_EQ(g.calls, b.calls) << "seed " << seed;
    EXPECT_EQ(g.reorders, b.reorders) << "seed " << seed;
  }
}

TEST(Search, OnlyEosCandidatesInTheTopBeamFinish) {
  // Beam 2, n_best 2. Step 0 keeps A (0.5) and B (0.4). Step 1's candidates: A A 0.25, A eos 0.15,
  // B eos 0.14, B A 0.13, ...: A eos (2nd) finishes, B eos (3rd, outside the top 2) does not (fairseq),
  // A A and B A continue. Step 2: A A eos (0.1) is the best candidate and ends the search with 2 finished:
  // A (0.15), A A (0.1). Had B eos finished, it (0.14) would be second.
  const std::map<History, Probs> table = {{{kC}, {0.1, 0.5, 0.4, 0}},
                                          {{kC, kA}, {0.3, 0.5, 0.2, 0}},
                                          {{kC, kB}, {0.35, 0.325, 0.325, 0}},
                                          {{kC, kA, kA}, {0.4, 0.3, 0.3, 0}},
                                          {{kC, kB, kA}, {0.4, 0.3, 0.3, 0}}};
  TableScorer s({kC}, table);
  const auto out = beam(s, request({kC}), beam_options(2, 2));
  ASSERT_EQ(out[0].size(), 2u);
  const double a = std::log(0.5) + std::log(0.3), aa = std::log(0.5) + std::log(0.5) + std::log(0.4);
  expect_hypothesis(out[0][0], {kA}, a, true, a);
  expect_hypothesis(out[0][1], {kA, kA}, aa, true, aa);
  EXPECT_EQ(s.calls.size(), 3u);
  EXPECT_EQ(s.reorders, (std::vector<std::vector<int64_t>>{{0, 0}}));  // step 1 keeps rows 0 and 1 in place
}

TEST(Search, NBestIsSortedByPenalisedScore) {
  // Case 1, beam 3: the eos of step 0 (p 0.1, 3rd of the candidates) finishes the empty hypothesis; at
  // step 1, B eos (0.36) and A eos (0.2) finish and the best ended: 3 hypotheses, best first.
  for (double alpha : {0.0, 1.0}) {
    TableScorer s({kC}, case1());
    const auto out = beam(s, request({kC}), beam_options(3, 3, alpha));
    ASSERT_EQ(out[0].size(), 3u);
    const double b = std::log(0.4) + std::log(0.9), a = std::log(0.5) + std::log(0.4), e = std::log(0.1);
    expect_hypothesis(out[0][0], {kB}, b, true, b / length_penalty(2, alpha));
    expect_hypothesis(out[0][1], {kA}, a, true, a / length_penalty(2, alpha));
    expect_hypothesis(out[0][2], {}, e, true, e / length_penalty(1, alpha));
  }
  // n_best 2 of beam 3 keeps the first two.
  TableScorer s({kC}, case1());
  const auto two = beam(s, request({kC}), beam_options(3, 2));
  ASSERT_EQ(two[0].size(), 2u);
  EXPECT_EQ(two[0][0].tokens, (std::vector<int64_t>{kB}));
  EXPECT_EQ(two[0][1].tokens, (std::vector<int64_t>{kA}));
  // The best candidate of step 0 is the eos (0.6), but only one hypothesis has finished: n_best 2 goes
  // on until a second one has (A eos 0.3 and B eos 0.1 at step 1), as OpenNMT-py does.
  TableScorer early({kC}, {{{kC}, {0.6, 0.3, 0.1, 0}}});
  const auto more = beam(early, request({kC}), beam_options(2, 2));
  ASSERT_EQ(more[0].size(), 2u);
  expect_hypothesis(more[0][0], {}, std::log(0.6), true, std::log(0.6));
  expect_hypothesis(more[0][1], {kA}, std::log(0.3), true, std::log(0.3));
  EXPECT_EQ(early.calls.size(), 2u);
  // Random tables: every n-best list is sorted by score, and each score is log_prob / penalty(|Y|).
  for (uint64_t seed = 0; seed < 30; ++seed) {
    const RandomCase c = random_case(seed);
    TableScorer r = random_scorer(c);
    for (const NBest& list : beam(r, c.request, beam_options(4, 4, 0.6))) {
      ASSERT_FALSE(list.empty());
      for (size_t i = 0; i < list.size(); ++i) {
        const auto len = static_cast<int64_t>(list[i].tokens.size()) + (list[i].finished ? 1 : 0);
        EXPECT_DOUBLE_EQ(list[i].score, list[i].log_prob / length_penalty(len, 0.6));
        if (i > 0) {
          EXPECT_GE(list[i - 1].score, list[i].score) << "seed " << seed;
        }
      }
    }
  }
}

TEST(Search, MinLengthBlocksTheEos) {
  // Case 1 with min_length 2 (after A A or A B, the eos is certain). Greedy: A, then the eos (0.4) is
  // masked and A / B tie at 0.3 (the smaller id wins): A A eos, log 0.5 + log 0.3 (unrenormalised).
  Request r = request({kC});
  r.min_length = 2;
  TableScorer g({kC}, case1());
  const auto greedy_out = greedy(g, r);
  const double aa = std::log(0.5) + std::log(0.3);
  expect_hypothesis(greedy_out[0][0], {kA, kA}, aa, true, aa);
  // Beam 2: step 1 keeps A A and A B (0.15 each, the eos masked), both end at step 2.
  TableScorer b({kC}, case1());
  const auto beam_out = beam(b, r, beam_options(2, 2));
  ASSERT_EQ(beam_out[0].size(), 2u);
  expect_hypothesis(beam_out[0][0], {kA, kA}, aa, true, aa);
  expect_hypothesis(beam_out[0][1], {kA, kB}, aa, true, aa);
  // Sampling never ends before min_length either.
  for (uint64_t seed = 0; seed < 50; ++seed) {
    TableScorer s({kC}, case1());
    const auto out = sample(s, r, sampling(seed));
    EXPECT_GE(out[0][0].tokens.size(), 2u) << "seed " << seed;
    EXPECT_TRUE(out[0][0].finished);
  }
  // And on random tables, every finished hypothesis has at least min_length tokens.
  for (uint64_t seed = 0; seed < 30; ++seed) {
    const RandomCase c = random_case(seed);
    TableScorer s = random_scorer(c);
    for (const NBest& list : beam(s, c.request, beam_options(3, 3)))
      for (const Hypothesis& h : list)
        if (h.finished) {
          EXPECT_GE(static_cast<int64_t>(h.tokens.size()), c.request.min_length);
        }
  }
}

TEST(Search, BatchSentencesFinishAtDifferentSteps) {
  // Three sentences, max length = source length (5, 3, 5):
  //   s0 (first C): case 1, done at step 1 (beam: B eos; greedy: A eos);
  //   s1 (first B): case 4's rule, never an eos, stops at its maximum length 3 after B B B (0.7^3);
  //   s2 (first A): the eos has 0.9 at step 0, done at once.
  const Rule rule = [](const History& h) {
    if (h[0] == kB) return no_eos_rule(h);
    if (h == History{kA}) return Probs{0.9, 0.1, 0, 0};
    return eos_certain();
  };
  Request r = request({kC, kB, kA});
  r.max_len_a = 1.0;
  r.max_len_b = 0;
  r.source_lengths = {5, 3, 5};
  const double s0_beam = std::log(0.4) + std::log(0.9), s0_greedy = std::log(0.5) + std::log(0.4);
  const double s1 = 3 * std::log(0.7), s2 = std::log(0.9);

  // Beam 2. Step 0: s0 keeps A, B (rows 0, 0), s1 B, A (rows 1, 1), s2 ends. Step 1: s0 ends (B eos
  // first); s1's best two, B B (0.49) and B A (0.21), both continue row 2. Step 2: s1 is finalised.
  TableScorer b({kC, kB, kA}, case1(), rule);
  const auto beam_out = beam(b, r, beam_options(2));
  expect_hypothesis(beam_out[0][0], {kB}, s0_beam, true, s0_beam);
  expect_hypothesis(beam_out[1][0], {kB, kB, kB}, s1, false, s1);
  expect_hypothesis(beam_out[2][0], {}, s2, true, s2);
  EXPECT_EQ(b.calls, (std::vector<std::vector<int64_t>>{{kC, kB, kA}, {kA, kB, kB, kA}, {kB, kA}}));
  EXPECT_EQ(b.reorders, (std::vector<std::vector<int64_t>>{{0, 0, 1, 1}, {2, 2}}));

  // Greedy: s2 drops after step 0, s0 after step 1, s1 ends at step 2 (no reorder after the last step).
  TableScorer g({kC, kB, kA}, case1(), rule);
  const auto greedy_out = greedy(g, r);
  expect_hypothesis(greedy_out[0][0], {kA}, s0_greedy, true, s0_greedy);
  expect_hypothesis(greedy_out[1][0], {kB, kB, kB}, s1, false, s1);
  expect_hypothesis(greedy_out[2][0], {}, s2, true, s2);
  EXPECT_EQ(g.calls, (std::vector<std::vector<int64_t>>{{kC, kB, kA}, {kA, kB}, {kB}}));
  EXPECT_EQ(g.reorders, (std::vector<std::vector<int64_t>>{{0, 1}, {1}}));
}

TEST(Search, MaximumLengthZeroAndEmptyRequests) {
  // Sentence 0 has max length 0: an empty unfinished hypothesis, its row dropped before the first step.
  Request r = request({kC, kC});
  r.max_len_a = 1.0;
  r.max_len_b = 0;
  r.source_lengths = {0, 5};
  TableScorer g({kC, kC}, case1());
  const auto greedy_out = greedy(g, r);
  expect_hypothesis(greedy_out[0][0], {}, 0.0, false, 0.0);
  expect_hypothesis(greedy_out[1][0], {kA}, std::log(0.2), true, std::log(0.2));
  EXPECT_EQ(g.reorders.front(), (std::vector<int64_t>{1}));
  TableScorer b({kC, kC}, case1());
  const auto beam_out = beam(b, r, beam_options(2));
  expect_hypothesis(beam_out[0][0], {}, 0.0, false, 0.0);
  expect_hypothesis(beam_out[1][0], {kB}, std::log(0.36), true, std::log(0.36));
  EXPECT_EQ(b.reorders.front(), (std::vector<int64_t>{1}));
  // No sentences: no call at all.
  TableScorer none({}, {});
  EXPECT_TRUE(greedy(none, request({})).empty());
  EXPECT_TRUE(beam(none, request({}), beam_options(3)).empty());
  EXPECT_TRUE(sample(none, request({}), sampling(1)).empty());
  EXPECT_TRUE(none.calls.empty());
}

TEST(Search, SamplingIsDeterministicPerSeed) {
  const RandomCase c = random_case(11);
  auto run = [&](const Request& r, uint64_t seed) {
    TableScorer s(r.first_tokens, {}, random_rule(c.seed, c.V), c.dtype);
    return sample(s, r, sampling(seed, 1.3));
  };
  std::set<std::vector<int64_t>> seen;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const auto a = run(c.request, seed);
    expect_same(a, run(c.request, seed), "seed " + std::to_string(seed));
    std::vector<int64_t> all;  // every sentence's tokens, -1 between them
    for (const NBest& list : a) {
      all.insert(all.end(), list[0].tokens.begin(), list[0].tokens.end());
      all.push_back(-1);
    }
    seen.insert(all);
    // A sentence's draws do not depend on the rest of the batch: sentence 0 alone samples the same.
    Request alone = c.request;
    alone.first_tokens.resize(1);
    alone.source_lengths.resize(1);
    expect_same({a[0]}, run(alone, seed), "alone, seed " + std::to_string(seed));
  }
  EXPECT_GT(seen.size(), 1u) << "different seeds should give different samples";
}

TEST(Search, LowTemperatureTendsToGreedy) {
  // Case 1 and case 4 have log-prob gaps >= 0.22 between the best token and the next: at T = 0.01 the
  // runner-up has probability < e^-22, so every seed draws the greedy sequence; at T = 1 most do not
  // (the greedy sequence has probability 0.2 and 0.6^4).
  const std::vector<std::pair<std::map<History, Probs>, Rule>> tables = {
      {case1(), [](const History&) { return eos_certain(); }}, {{}, no_eos_rule}};
  for (const auto& [table, rule] : tables) {
    TableScorer g({kC}, table, rule);
    const auto expected = greedy(g, request({kC}, kEos, 4));
    int differ_at_1 = 0;
    for (uint64_t seed = 0; seed < 100; ++seed) {
      TableScorer s({kC}, table, rule), t({kC}, table, rule);
      expect_same(sample(s, request({kC}, kEos, 4), sampling(seed, 0.01)), expected, "seed " + std::to_string(seed));
      differ_at_1 += sample(t, request({kC}, kEos, 4), sampling(seed, 1.0))[0][0].tokens != expected[0][0].tokens;
    }
    EXPECT_GT(differ_at_1, 50);
  }
}

TEST(Search, TopKOneEqualsGreedy) {
  for (uint64_t seed = 0; seed < 40; ++seed) {
    const RandomCase c = random_case(seed);
    TableScorer g = random_scorer(c), s = random_scorer(c);
    expect_same(greedy(g, c.request), sample(s, c.request, sampling(seed, 1.7, 1, seed % 2 ? 1.0 : 0.3)),
                "seed " + std::to_string(seed));
    EXPECT_EQ(g.reorders, s.reorders) << "seed " << seed;  // finished rows leave the same way
  }
}

namespace {

// One step from token 5 over V = 6 (then the eos is certain): P = 0, 0.5, 0.3, 0.1, 0.06, 0.04.
// Returns how often each token was drawn by `sentences` independent sentences (streams) of one request,
// and checks each sentence's log_prob is the untempered log-probability of its token.
std::vector<double> frequencies(const SamplingOptions& o, int64_t sentences = 4000) {
  const Probs first = {0, 0.5, 0.3, 0.1, 0.06, 0.04};
  TableScorer s(std::vector<int64_t>(sentences, 5), {}, [&](const History& h) {
    return h.size() == 1 ? first : eos_certain(6);
  });
  const auto out = sample(s, request(std::vector<int64_t>(sentences, 5)), o);
  std::vector<double> freq(6, 0.0);
  for (const NBest& list : out) {
    EXPECT_EQ(list[0].tokens.size(), 1u);
    EXPECT_TRUE(list[0].finished);
    const int64_t t = list[0].tokens.at(0);
    EXPECT_NEAR(list[0].log_prob, std::log(first.at(t)), 1e-12);
    freq[t] += 1.0 / static_cast<double>(sentences);
  }
  return freq;
}

void expect_frequencies(const std::vector<double>& freq, const std::vector<double>& p, const std::string& what) {
  for (size_t t = 0; t < p.size(); ++t) {
    if (p[t] == 0) {
      EXPECT_EQ(freq[t], 0.0) << what << ": token " << t << " is outside the allowed set";
    } else {
      EXPECT_NEAR(freq[t], p[t], 0.025) << what << ": token " << t;  // > 3 standard deviations at n = 4000
    }
  }
}

}  // namespace

TEST(Search, SamplingFrequenciesMatchTheProbabilities) {
  expect_frequencies(frequencies(sampling(1)), {0, 0.5, 0.3, 0.1, 0.06, 0.04}, "T 1");
  // T = 2: probabilities proportional to sqrt(p).
  std::vector<double> sq = {0, std::sqrt(0.5), std::sqrt(0.3), std::sqrt(0.1), std::sqrt(0.06), std::sqrt(0.04)};
  double total = 0;
  for (double v : sq) total += v;
  for (double& v : sq) v /= total;
  expect_frequencies(frequencies(sampling(2, 2.0)), sq, "T 2");
}

TEST(Search, TopKAndTopPRestrictTheDraws) {
  // top_p 0.75: A (0.5) does not reach it, A + B (0.8) does: the nucleus is {A, B}, renormalised.
  expect_frequencies(frequencies(sampling(3, 1.0, 0, 0.75)), {0, 0.625, 0.375, 0, 0, 0}, "top_p 0.75");
  // top_p 0.45: A alone reaches it.
  expect_frequencies(frequencies(sampling(4, 1.0, 0, 0.45)), {0, 1, 0, 0, 0, 0}, "top_p 0.45");
  // top_k 3: A, B, C renormalised (0.5, 0.3, 0.1) / 0.9.
  expect_frequencies(frequencies(sampling(5, 1.0, 3)), {0, 0.5 / 0.9, 0.3 / 0.9, 0.1 / 0.9, 0, 0}, "top_k 3");
  // top_k 3 at T = 2: proportional to sqrt(p) over A, B, C.
  const double z = std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.1);
  expect_frequencies(frequencies(sampling(8, 2.0, 3)), {0, std::sqrt(0.5) / z, std::sqrt(0.3) / z, std::sqrt(0.1) / z, 0, 0},
                     "top_k 3, T 2");
  // top_k 3 then top_p 0.6 over the renormalised top 3: A (0.556) does not reach it, A + B does.
  expect_frequencies(frequencies(sampling(6, 1.0, 3, 0.6)), {0, 0.625, 0.375, 0, 0, 0}, "top_k 3, top_p 0.6");
  // top_p 0.95 keeps A..D (0.96), not E.
  expect_frequencies(frequencies(sampling(7, 1.0, 0, 0.95)), {0, 0.5 / 0.96, 0.3 / 0.96, 0.1 / 0.96, 0.06 / 0.96, 0},
                     "top_p 0.95");
}

TEST(Search, HostReadsOnlyTheSelectedCandidates) {
  // Greedy and beam read two small tensors per step (values and indices of the selection).
  TableScorer g({kC}, {}, no_eos_rule), b({kC}, {}, no_eos_rule);
  {
    HostWaitRecorder rec;
    greedy(g, request({kC}, kEos, 5));
    EXPECT_EQ(rec.counts().value_reads, 2u * 5u);
  }
  {
    HostWaitRecorder rec;
    beam(b, request({kC}, kEos, 5), beam_options(3));
    EXPECT_EQ(rec.counts().value_reads, 2u * 5u);
  }
}

TEST(Search, RunsOnTheScorersDevice) {
  // With the log-probabilities on a GPU the selection runs there: the same hypotheses as on the CPU (the
  // float64 sums are exact on both), two small reads per step, and sampling deterministic per seed.
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const RandomCase c = random_case(seed);
    const std::string what = "seed " + std::to_string(seed);
    auto on = [&](Device device) {
      TableScorer scorer = random_scorer(c);
      scorer.device = device;
      return scorer;
    };
    TableScorer g0 = on(Device::cpu()), g1 = on(Device::cuda(0)), b0 = on(Device::cpu()), b1 = on(Device::cuda(0));
    expect_same(greedy(g0, c.request), greedy(g1, c.request), "greedy, " + what);
    expect_same(beam(b0, c.request, beam_options(3, 3, 0.6)), beam(b1, c.request, beam_options(3, 3, 0.6)),
                "beam, " + what);
    EXPECT_EQ(b0.reorders, b1.reorders) << what;
    TableScorer s0 = on(Device::cpu()), s1 = on(Device::cuda(0));
    expect_same(sample(s0, c.request, sampling(seed, 0.8, 1)), sample(s1, c.request, sampling(seed, 0.8, 1)),
                "top_k 1, " + what);
    TableScorer t1 = on(Device::cuda(0)), t2 = on(Device::cuda(0));
    expect_same(sample(t1, c.request, sampling(seed, 0.8, 3, 0.9)), sample(t2, c.request, sampling(seed, 0.8, 3, 0.9)),
                "top_k 3, top_p 0.9, " + what);
  }
  TableScorer b({kC}, {}, no_eos_rule);
  b.device = Device::cuda(0);
  HostWaitRecorder rec;
  beam(b, request({kC}, kEos, 5), beam_options(3));
  EXPECT_EQ(rec.counts().value_reads, 2u * 5u);
}

namespace {

// A scorer returning whatever `make` builds for N rows.
class FixedScorer : public StepScorer {
 public:
  explicit FixedScorer(std::function<Tensor(int64_t)> make) : make_(std::move(make)) {}
  Tensor next_log_probs(const std::vector<int64_t>& last) override { return make_(static_cast<int64_t>(last.size())); }
  void reorder(const std::vector<int64_t>&) override {}

 private:
  std::function<Tensor(int64_t)> make_;
};

// Whether fn throws sru::Error with `part` in its message.
template <typename F>
::testing::AssertionResult fails_with(F&& fn, const std::string& part) {
  const std::string message = error_of(fn);
  if (message.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "error \"" << message << "\" does not contain \"" << part << "\"";
}

}  // namespace

TEST(Search, RejectsBadOptionsAndBadScorers) {
  TableScorer s({kC}, case1());
  const Request r = request({kC});
  EXPECT_TRUE(fails_with([&] { beam(s, r, beam_options(0)); }, "beam_size must be >= 1, got 0"));
  EXPECT_TRUE(fails_with([&] { beam(s, r, beam_options(2, 3)); }, "n_best must be in [1, beam_size = 2], got 3"));
  EXPECT_TRUE(fails_with([&] { beam(s, r, beam_options(2, 0)); }, "n_best must be in"));
  EXPECT_TRUE(fails_with([&] { sample(s, r, sampling(1, 0.0)); }, "temperature must be > 0"));
  EXPECT_TRUE(fails_with([&] { sample(s, r, sampling(1, -1.0)); }, "temperature must be > 0"));
  EXPECT_TRUE(fails_with([&] { sample(s, r, sampling(1, 1.0, -1)); }, "top_k must be >= 0"));
  EXPECT_TRUE(fails_with([&] { sample(s, r, sampling(1, 1.0, 0, 0.0)); }, "top_p must be in (0, 1]"));
  EXPECT_TRUE(fails_with([&] { sample(s, r, sampling(1, 1.0, 0, 1.5)); }, "top_p must be in (0, 1]"));
  EXPECT_TRUE(s.calls.empty());  // options are checked before the first step

  Request bad = request({kC, kC});
  bad.source_lengths = {1};
  EXPECT_TRUE(fails_with([&] { greedy(s, bad); }, "1 source lengths for 2 sentences"));
  bad = request({kC}, kEos, -1);
  EXPECT_TRUE(fails_with([&] { greedy(s, bad); }, "maximum length of sentence 0"));
  bad = request({kC});
  bad.min_length = -1;
  EXPECT_TRUE(fails_with([&] { greedy(s, bad); }, "min_length must be >= 0"));

  auto log_probs = [](int64_t rows, int64_t V) { return Tensor::full({rows, V}, std::log(1.0 / V), DType::F64); };
  FixedScorer extra_row([&](int64_t n) { return log_probs(n + 1, 4); });
  EXPECT_TRUE(fails_with([&] { greedy(extra_row, r); }, "shape (2, 4) for 1 live rows; expected (1, V)"));
  FixedScorer flat([&](int64_t) { return Tensor::zeros({4}, DType::F64); });
  EXPECT_TRUE(fails_with([&] { beam(flat, r, beam_options(2)); }, "for 1 live rows; expected (1, V)"));
  FixedScorer ints([&](int64_t n) { return Tensor::zeros({n, 4}, DType::I64); });
  EXPECT_TRUE(fails_with([&] { sample(ints, r, sampling(1)); }, "expected a floating tensor"));
  FixedScorer small([&](int64_t n) { return log_probs(n, 4); });
  EXPECT_TRUE(fails_with([&] { greedy(small, request({kC}, 7)); }, "eos 7 is not in the scorer's vocabulary of 4"));
  int64_t calls = 0;
  FixedScorer growing([&](int64_t n) {
    Tensor t = log_probs(n, 4 + calls++);
    t.data<double>()[0] = -kInf;  // never the eos, so there is a second step
    return t;
  });
  EXPECT_TRUE(fails_with([&] { greedy(growing, r); }, "vocabulary changed from 4 to 5 at step 1"));
  FixedScorer nan([&](int64_t n) { return Tensor::full({n, 4}, std::nan(""), DType::F64); });
  EXPECT_TRUE(fails_with([&] { greedy(nan, r); }, "NaN"));
  EXPECT_TRUE(fails_with([&] { beam(nan, r, beam_options(2)); }, "NaN"));
  EXPECT_TRUE(fails_with([&] { sample(nan, r, sampling(1)); }, "NaN"));
  EXPECT_TRUE(fails_with([&] { sample(nan, r, sampling(1, 1.0, 2)); }, "NaN"));
}
