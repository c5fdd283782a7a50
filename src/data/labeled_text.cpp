// Labelled sentence files, tokenisation, vocabulary and fold construction.
#include "data/labeled_text.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string_view>

#include "core/error.h"
#include "data/line_reader.h"

namespace sru::data {

LabeledFile read_labeled_file(const std::string& path) {
  LineReader in(path);
  LabeledFile out;
  std::string line;
  while (in.next(line)) {
    size_t i = 0;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == line.size()) continue;  // blank line
    const size_t start = i;
    int64_t label = 0;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9' && i - start < 9) label = label * 10 + (line[i++] - '0');
    SRU_CHECK(i > start && (i == line.size() || line[i] == ' ' || line[i] == '\t'), path, ":", in.line_number(),
              ": expected \"LABEL text\" with LABEL a non-negative integer, got '", line.substr(0, 40), "'");
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == line.size()) {
      out.lines_without_words.push_back(in.line_number());
      continue;
    }
    out.sentences.push_back({label, line.substr(i), in.line_number()});
  }
  SRU_CHECK(!out.sentences.empty(), "'", path, "' holds no labelled sentences");
  return out;
}

std::string ascii_lower(std::string text) {
  for (char& c : text)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return text;
}

std::vector<std::string> split_words(const std::string& text, bool lowercase) {
  std::vector<std::string> words;
  std::string w;
  for (char c : lowercase ? ascii_lower(text) : text) {
    if (c == ' ' || c == '\t') {
      if (!w.empty()) words.push_back(std::move(w)), w.clear();
      continue;
    }
    w.push_back(c);
  }
  if (!w.empty()) words.push_back(std::move(w));
  return words;
}

namespace {

// Replaces every occurrence of `pattern` (left to right, not overlapping) by `replacement`.
std::string replace_all(const std::string& text, const std::string& pattern, const std::string& replacement) {
  std::string out;
  size_t start = 0;
  for (size_t hit; (hit = text.find(pattern, start)) != std::string::npos; start = hit + pattern.size())
    out.append(text, start, hit - start).append(replacement);
  return out.append(text, start, std::string::npos);
}

bool kept_by_clean_str(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         std::string_view("(),!?'`").find(c) != std::string_view::npos;
}

}  // namespace

std::vector<std::string> clean_str_words(const std::string& text, bool lowercase) {
  std::string s = text;
  for (char& c : s)
    if (!kept_by_clean_str(c)) c = ' ';
  // The reference's substitutions in its order; the runs of spaces they leave do not matter, as
  // split_words skips them (the reference collapses them, then splits).
  static const std::pair<const char*, const char*> kRules[] = {
      {"'s", " 's"}, {"'ve", " 've"}, {"n't", " n't"}, {"'re", " 're"}, {"'d", " 'd"},   {"'ll", " 'll"},
      {",", " , "},  {"!", " ! "},    {"(", " \\( "},   {")", " \\) "},   {"?", " \\? "}};
  for (const auto& [pattern, replacement] : kRules) s = replace_all(s, pattern, replacement);
  return split_words(s, lowercase);
}

// ---- SentencePiece ----

namespace {

class VectorSentences : public sentencepiece::SentenceIterator {
 public:
  explicit VectorSentences(const std::vector<std::string>& s) : s_(s) {}
  bool done() const override { return i_ >= s_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return s_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& s_;
  size_t i_ = 0;
};

}  // namespace

SubwordModel::SubwordModel() : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SubwordModel::SubwordModel(SubwordModel&&) noexcept = default;
SubwordModel& SubwordModel::operator=(SubwordModel&&) noexcept = default;
SubwordModel::~SubwordModel() = default;

SubwordModel SubwordModel::train(const std::vector<std::string>& sentences, int64_t vocab_size, uint64_t seed) {
  VectorSentences it(sentences);
  std::string proto;
  // hard_vocab_limit=false: a small training split may not support the requested size; the model
  // then gets as many pieces as the data allows instead of failing.
  const std::unordered_map<std::string, std::string> args = {
      {"vocab_size", std::to_string(vocab_size)}, {"model_type", "unigram"},  {"character_coverage", "1.0"},
      {"hard_vocab_limit", "false"},              {"num_threads", "1"},        {"minloglevel", "2"},
      {"input_sentence_size", "0"}};
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(seed));
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &proto);
  SRU_CHECK(status.ok(), "SentencePiece training failed (data.tokenizer: sentencepiece): ", status.ToString());
  return from_serialized(proto, "the trained SentencePiece model");
}

SubwordModel SubwordModel::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SRU_CHECK(in.good(), "cannot read SentencePiece model '", path, "' (data.sentencepiece_model)");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return from_serialized(bytes, path);
}

SubwordModel SubwordModel::from_serialized(const std::string& bytes, const std::string& source) {
  SubwordModel m;
  const auto status = m.processor_->LoadFromSerializedProto(bytes);
  SRU_CHECK(status.ok(), "'", source, "' is not a SentencePiece model: ", status.ToString());
  m.serialized_ = bytes;
  return m;
}

std::vector<std::string> SubwordModel::pieces(const std::string& text) const {
  std::vector<std::string> out;
  const auto status = processor_->Encode(text, &out);
  SRU_CHECK(status.ok(), "SentencePiece could not encode a sentence: ", status.ToString());
  return out;
}

// ---- vocabulary ----

Vocabulary::Vocabulary() {
  add("<pad>");
  add("<unk>");
}

void Vocabulary::add(const std::string& word) {
  ids_.emplace(word, static_cast<int64_t>(words_.size()));
  words_.push_back(word);
}

Vocabulary Vocabulary::build(const std::vector<std::vector<std::string>>& sentences, int64_t min_count) {
  std::map<std::string, int64_t> counts;
  for (const auto& s : sentences)
    for (const auto& w : s) ++counts[w];
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  Vocabulary v;
  for (const auto& [w, n] : sorted)
    if (n >= min_count && !v.ids_.count(w)) v.add(w);
  return v;
}

std::string Vocabulary::serialize() const {
  std::string out;
  for (size_t i = 2; i < words_.size(); ++i) out += words_[i] + "\n";
  return out;
}

std::vector<std::string> newline_terminated_lines(const std::string& text, const std::string& what) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    SRU_CHECK(end != std::string::npos, "malformed ", what, ": the last line has no line end");
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

Vocabulary Vocabulary::deserialize(const std::string& text) {
  Vocabulary v;
  for (const std::string& word : newline_terminated_lines(text, "vocabulary")) v.add(word);
  return v;
}

int64_t Vocabulary::id(const std::string& word) const {
  auto it = ids_.find(word);
  return it == ids_.end() ? kUnk : it->second;
}

// ---- splits ----

std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[i] = i;
  std::mt19937_64 rng(seed);
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(idx[i], idx[j]);
  }
  return idx;
}

namespace {

// Moves valid_fraction of `pool` (in a seeded order) to split.valid and the rest to split.train.
void hold_out(const std::vector<int64_t>& pool, double valid_fraction, uint64_t seed, FoldSplit& split) {
  const auto order = shuffled_indices(static_cast<int64_t>(pool.size()), seed ^ 0x9e3779b97f4a7c15ull);
  const size_t n_valid = static_cast<size_t>(static_cast<double>(pool.size()) * valid_fraction);
  for (size_t i = 0; i < order.size(); ++i) (i < n_valid ? split.valid : split.train).push_back(pool[order[i]]);
  std::sort(split.train.begin(), split.train.end());
  std::sort(split.valid.begin(), split.valid.end());
}

}  // namespace

FoldSplit cross_validation_split(int64_t n, int64_t folds, int64_t test_fold, double valid_fraction, uint64_t seed) {
  SRU_CHECK(folds >= 2 && folds <= n, "cross-validation needs 2 <= data.folds <= examples (", n, "), got ", folds);
  SRU_CHECK(test_fold >= 0 && test_fold < folds, "data.fold must be in [0, ", folds, "), got ", test_fold);
  const auto order = shuffled_indices(n, seed);
  FoldSplit split;
  std::vector<int64_t> rest;
  for (int64_t i = 0; i < n; ++i) (i % folds == test_fold ? split.test : rest).push_back(order[i]);
  std::sort(split.test.begin(), split.test.end());
  hold_out(rest, valid_fraction, seed + static_cast<uint64_t>(test_fold), split);
  return split;
}

FoldSplit holdout_split(int64_t n, double valid_fraction, uint64_t seed) {
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) all[i] = i;
  FoldSplit split;
  hold_out(all, valid_fraction, seed, split);
  return split;
}

}  // namespace sru::data
