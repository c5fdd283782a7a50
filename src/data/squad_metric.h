// The official SQuAD v1.1 metric (evaluate-v1.1.py), computed exactly as the Python script does:
// normalise both strings (str.lower(), drop the characters of string.punctuation, replace the
// articles a/an/the matched by \b(a|an|the)\b with a space, ' '.join(s.split())), then exact match
// and token F1 (0 when no token is shared, so two empty answers have F1 0 and EM 1), the maximum
// over a question's ground truths, averaged over every question of the data file (a question without
// a prediction scores 0), times 100. Unicode: see data/unicode.h (Python's own tables).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/squad.h"

namespace sru::data {

std::string normalize_answer(std::string_view text);
// The tokens of normalize_answer(text), split on its single spaces.
std::vector<std::string> normalized_tokens(std::string_view text);

bool exact_match_score(std::string_view prediction, std::string_view ground_truth);
double f1_score(std::string_view prediction, std::string_view ground_truth);
// The maximum over ground truths (at least one), as metric_max_over_ground_truths.
double max_exact_match(std::string_view prediction, const std::vector<std::string>& ground_truths);
double max_f1(std::string_view prediction, const std::vector<std::string>& ground_truths);

// Question id -> predicted answer text.
using SquadPredictions = std::unordered_map<std::string, std::string>;

struct SquadScore {
  double exact_match = 0, f1 = 0;  // percentages, as evaluate-v1.1.py prints them
  int64_t questions = 0;           // every question of the data set (the denominator)
  int64_t answered = 0;            // questions that had a prediction
  int64_t unknown_predictions = 0; // predictions whose id is no question of the data set (ignored)
  std::vector<std::string> unanswered;  // ids of the questions without a prediction (scored 0)
};
SquadScore score_squad(const SquadDataset& dataset, const SquadPredictions& predictions);

// Reads a predictions file: a JSON object whose values are all strings ({"id": "answer", ...}).
// Anything else (malformed JSON, an array, a non-string value) is a sru::Error naming the file
// (and the offending id).
SquadPredictions read_squad_predictions(const std::string& path);

}  // namespace sru::data
