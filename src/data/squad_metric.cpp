// The official SQuAD v1.1 metric. Each step mirrors one line of evaluate-v1.1.py, with Python's
// Unicode semantics from data/unicode.h; the arithmetic is done in the script's order, so the
// results agree to the last bit.
#include "data/squad_metric.h"

#include <algorithm>
#include <unordered_set>

#include "core/error.h"
#include "data/unicode.h"

namespace sru::data {

namespace {

// string.punctuation: ASCII only, so removing these bytes never cuts a UTF-8 sequence.
bool is_python_punctuation(char c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}

// re.sub(r'\b(a|an|the)\b', ' ', text): a match is always a whole maximal run of word characters,
// so every run that is exactly "a", "an" or "the" becomes one space.
std::string remove_articles(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    unicode::Decoded d = unicode::decode_utf8(text, pos);
    if (!unicode::is_python_word(d.code_point)) {
      out.append(text.substr(pos, d.length));
      pos += d.length;
      continue;
    }
    size_t end = pos + d.length;
    while (end < text.size() && unicode::is_python_word((d = unicode::decode_utf8(text, end)).code_point)) end += d.length;
    const std::string_view word = text.substr(pos, end - pos);
    if (word == "a" || word == "an" || word == "the")
      out.push_back(' ');
    else
      out.append(word);
    pos = end;
  }
  return out;
}

// text.split(): the runs between Python whitespace.
std::vector<std::string> split_python_whitespace(std::string_view text) {
  std::vector<std::string> words;
  size_t pos = 0, start = 0;
  bool in_word = false;
  while (pos < text.size()) {
    const unicode::Decoded d = unicode::decode_utf8(text, pos);
    const bool space = unicode::is_python_space(d.code_point);
    if (space && in_word) words.emplace_back(text.substr(start, pos - start));
    if (!space && !in_word) start = pos;
    in_word = !space;
    pos += d.length;
  }
  if (in_word) words.emplace_back(text.substr(start));
  return words;
}

}  // namespace

std::vector<std::string> normalized_tokens(std::string_view text) {
  std::string lowered = unicode::python_lower(text);
  lowered.erase(std::remove_if(lowered.begin(), lowered.end(), is_python_punctuation), lowered.end());
  return split_python_whitespace(remove_articles(lowered));
}

std::string normalize_answer(std::string_view text) {
  std::string out;
  for (const std::string& token : normalized_tokens(text)) {
    if (!out.empty()) out.push_back(' ');
    out += token;
  }
  return out;
}

bool exact_match_score(std::string_view prediction, std::string_view ground_truth) {
  return normalized_tokens(prediction) == normalized_tokens(ground_truth);
}

double f1_score(std::string_view prediction, std::string_view ground_truth) {
  const std::vector<std::string> predicted = normalized_tokens(prediction);
  const std::vector<std::string> truth = normalized_tokens(ground_truth);
  // Counter(predicted) & Counter(truth), summed.
  std::unordered_map<std::string_view, int64_t> remaining;
  for (const std::string& t : truth) ++remaining[t];
  int64_t num_same = 0;
  for (const std::string& t : predicted) {
    const auto it = remaining.find(t);
    if (it != remaining.end() && it->second > 0) --it->second, ++num_same;
  }
  if (num_same == 0) return 0;
  const double precision = 1.0 * static_cast<double>(num_same) / static_cast<double>(predicted.size());
  const double recall = 1.0 * static_cast<double>(num_same) / static_cast<double>(truth.size());
  return (2 * precision * recall) / (precision + recall);
}

namespace {
template <typename Metric>
double max_over_ground_truths(Metric metric, std::string_view prediction, const std::vector<std::string>& truths) {
  SRU_CHECK(!truths.empty(), "SQuAD metric: no ground-truth answers for the prediction '", prediction, "'");
  double best = metric(prediction, truths[0]);
  for (size_t i = 1; i < truths.size(); ++i) best = std::max(best, static_cast<double>(metric(prediction, truths[i])));
  return best;
}
}  // namespace

double max_exact_match(std::string_view prediction, const std::vector<std::string>& ground_truths) {
  return max_over_ground_truths(exact_match_score, prediction, ground_truths);
}

double max_f1(std::string_view prediction, const std::vector<std::string>& ground_truths) {
  return max_over_ground_truths(f1_score, prediction, ground_truths);
}

SquadScore score_squad(const SquadDataset& dataset, const SquadPredictions& predictions) {
  SquadScore score;
  int64_t exact_match = 0;  // a sum of booleans in the script: an integer
  double f1 = 0;            // summed in question order, as the script does
  std::vector<std::string> truths;
  std::unordered_set<std::string_view> ids;
  for (const SquadParagraph& paragraph : dataset.paragraphs)
    for (const SquadQuestion& question : paragraph.questions) {
      ++score.questions;
      ids.insert(question.id);
      const auto it = predictions.find(question.id);
      if (it == predictions.end()) {
        score.unanswered.push_back(question.id);
        continue;
      }
      ++score.answered;
      truths.clear();
      for (const SquadAnswer& answer : question.answers) truths.push_back(answer.text);
      SRU_CHECK(!truths.empty(), "SQuAD question '", question.id, "' has no answers: it cannot be scored");
      exact_match += max_exact_match(it->second, truths) != 0 ? 1 : 0;
      f1 += max_f1(it->second, truths);
    }
  SRU_CHECK(score.questions > 0, "SQuAD data '", dataset.path, "' has no questions to score");
  for (const auto& [id, text] : predictions) score.unknown_predictions += ids.contains(id) ? 0 : 1;
  score.exact_match = 100.0 * static_cast<double>(exact_match) / static_cast<double>(score.questions);
  score.f1 = 100.0 * f1 / static_cast<double>(score.questions);
  return score;
}

SquadPredictions read_squad_predictions(const std::string& path) {
  const nlohmann::json json = read_json_file(path, "predictions file");
  SRU_CHECK(json.is_object(), "predictions file '", path,
            "' must be a JSON object {\"question id\": \"answer text\", ...}, got ", json.type_name());
  SquadPredictions out;
  out.reserve(json.size());
  for (auto it = json.begin(); it != json.end(); ++it) {
    SRU_CHECK(it->is_string(), "predictions file '", path, "': the prediction for question '", it.key(),
              "' must be a string, got ", describe_json(*it));
    out.emplace(it.key(), it->get<std::string>());
  }
  return out;
}

}  // namespace sru::data
