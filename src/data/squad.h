// SQuAD v1.1 reading comprehension data: the JSON reader (validated: every error names the file, the
// article, the question id), a tokenizer that keeps byte offsets into the text, and the mapping of
// answers onto token spans for training (DrQA's rule). The official metric is in squad_metric.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace sru::data {

struct SquadAnswer {
  std::string text;
  int64_t answer_start = 0;  // as in the file: code points (Python str index) into the context
  int64_t begin = 0, end = 0;  // bytes into the UTF-8 context: context.substr(begin, end - begin) == text
};

struct SquadQuestion {
  std::string id, question;
  std::vector<SquadAnswer> answers;  // at least one (training files have one, dev files several)
};

struct SquadParagraph {
  int64_t article = 0;  // index into SquadDataset::titles
  std::string context;
  std::vector<SquadQuestion> questions;
};

struct SquadDataset {
  std::string path, version;  // version: the file's "version" ("1.1"), "" when it has none
  std::vector<std::string> titles;         // the articles' titles, in file order
  std::vector<SquadParagraph> paragraphs;  // every article's paragraphs, in file order
  int64_t questions = 0, answers = 0;
};

// Reads and validates a SQuAD v1.1 file ({"version": "1.1", "data": [articles]}). Each article needs
// "title" (string) and "paragraphs" (array); each paragraph "context" (string) and "qas" (array);
// each question "id" (string, unique in the file), "question" (string) and "answers" (a non-empty
// array of {"text": string, "answer_start": integer}), where answer_start (code points) points at
// the answer text in the context. Other keys are ignored. Malformed JSON, a missing key, a wrong
// type, a bad answer_start, an empty answer list or a SQuAD v2.0 "is_impossible" question: a
// sru::Error naming the file, the article (index and title), the question (index and id).
SquadDataset read_squad(const std::string& path);

// Parses a JSON file; malformed JSON gives an error naming `path`, the byte position and the
// parser's reason. `what` names the file's role in the messages ("SQuAD file", "predictions file").
nlohmann::json read_json_file(const std::string& path, const char* what);
// A JSON value for an error message: its type, and for a string, number, boolean or null the value
// itself (escaped to ASCII, cut after 60 characters).
std::string describe_json(const nlohmann::json& value);

// A token of a text: maximal runs of word characters (ASCII letters and digits, Unicode letters,
// marks, Nd/Nl digits, soft hyphen and zero-width (non-)joiners), with ',' or '.' between two ASCII
// digits kept inside the run (1,000 and 3.14 are one token); every other character (ASCII or
// Unicode punctuation, dashes, quotes, symbols, No numbers such as '²') is a token by itself.
// Separators: Python's whitespace (U+0020, U+00A0, U+2000-U+200A, U+3000, ...) and the invisible
// U+200B, U+200E, U+200F, U+2060, U+FEFF. A byte that is not well-formed UTF-8 is a token by itself.
struct Token {
  std::string text;   // text.substr(begin, end - begin)
  std::string lower;  // Python's str.lower() of text (Unicode), for vocabularies and features
  int64_t begin = 0, end = 0;  // bytes
};
std::vector<Token> tokenize(std::string_view text);

// Whether the code point at byte `pos` of text separates tokens (the tokenizer's separators).
bool is_token_separator(std::string_view text, size_t pos);

// An answer as tokens first..last (inclusive).
struct TokenSpan {
  int64_t first = 0, last = 0;
};

// DrQA's alignment: the byte range [begin, end) of `context` is trimmed of separators at both ends;
// it aligns when a token begins exactly at its begin and a token ends exactly at its end. `tokens`
// must be tokenize(context). Returns nothing for an answer that does not align (or is empty).
std::optional<TokenSpan> align_answer(std::string_view context, const std::vector<Token>& tokens, int64_t begin,
                                      int64_t end);

// Training spans of a whole data set: every paragraph tokenized once, every answer aligned.
struct SquadSpanExample {
  int64_t paragraph = 0;  // index into SquadDataset::paragraphs and SquadSpans::contexts
  int64_t question = 0;   // index into that paragraph's questions
  std::vector<TokenSpan> spans;  // the question's aligned answers in file order (DrQA trains on the first)
};
struct SquadSpans {
  std::vector<std::vector<Token>> contexts;  // tokenize() of each paragraph's context
  std::vector<SquadSpanExample> examples;    // the questions with at least one aligned answer
  int64_t answers = 0, unaligned_answers = 0;
  std::vector<std::string> skipped_questions;  // ids of questions none of whose answers aligned
};
SquadSpans map_answer_spans(const SquadDataset& dataset);

}  // namespace sru::data
