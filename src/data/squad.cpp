// SQuAD v1.1: the validating JSON reader, the offset-keeping tokenizer and answer-span alignment.
#include "data/squad.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <unordered_map>

#include "core/error.h"
#include "data/unicode.h"

namespace sru::data {

nlohmann::json read_json_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  SRU_CHECK(in.good(), "cannot open ", what, " '", path, "'");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  SRU_CHECK(!in.bad(), "cannot read ", what, " '", path, "'");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    SRU_FAIL(what, " '", path, "' is not valid JSON (at byte ", e.byte, ", counting from 1): ", e.what());
  } catch (const nlohmann::json::exception& e) {  // e.g. out_of_range: a number too large for a double
    SRU_FAIL(what, " '", path, "' is not valid JSON: ", e.what());
  }
}

std::string describe_json(const nlohmann::json& value) {
  if (!value.is_primitive()) return value.type_name();
  constexpr size_t kShown = 60;
  std::string text = value.dump(-1, ' ', /*ensure_ascii=*/true);  // ASCII: safe to cut anywhere
  if (text.size() > kShown) text = text.substr(0, kShown) + "...";
  return detail::concat(value.type_name(), " ", text);
}

namespace {

// Where in a SQuAD file a check failed, spelled out only when it does.
struct Location {
  const std::string& path;
  int64_t article = -1, paragraph = -1, question = -1, answer = -1;
  const std::string* title = nullptr;
  const std::string* id = nullptr;

  std::string str() const {
    std::string s = "SQuAD file '" + path + "'";
    if (article >= 0) s += ", article data[" + std::to_string(article) + "]";
    if (title) s += " (title '" + *title + "')";
    if (paragraph >= 0) s += ", paragraphs[" + std::to_string(paragraph) + "]";
    if (question >= 0) s += ", question qas[" + std::to_string(question) + "]";
    if (id) s += " (id '" + *id + "')";
    if (answer >= 0) s += ", answers[" + std::to_string(answer) + "]";
    return s;
  }
};

enum class Kind { kString, kArray, kInteger };

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kString: return "a string";
    case Kind::kArray: return "an array";
    case Kind::kInteger: return "an integer";
  }
  return "?";
}

bool has_kind(const nlohmann::json& v, Kind kind) {
  switch (kind) {
    case Kind::kString: return v.is_string();
    case Kind::kArray: return v.is_array();
    case Kind::kInteger: return v.is_number_integer();
  }
  return false;
}

// obj[key], which must exist and be of `kind`; obj itself must be an object.
const nlohmann::json& field(const nlohmann::json& obj, const char* key, Kind kind, const Location& at) {
  SRU_CHECK(obj.is_object(), at.str(), ": expected a JSON object, got ", obj.type_name());
  const auto it = obj.find(key);
  SRU_CHECK(it != obj.end(), at.str(), ": missing key '", key, "'");
  SRU_CHECK(has_kind(*it, kind), at.str(), ": '", key, "' must be ", kind_name(kind), ", got ", describe_json(*it));
  return *it;
}

int64_t code_points(std::string_view text) {
  int64_t n = 0;
  for (size_t pos = 0; pos < text.size(); pos += unicode::decode_utf8(text, pos).length) ++n;
  return n;
}

// The answer's byte range, checked against the context.
SquadAnswer read_answer(const nlohmann::json& a, const std::string& context, const Location& at) {
  SquadAnswer answer;
  answer.text = field(a, "text", Kind::kString, at).get<std::string>();
  const nlohmann::json& start = field(a, "answer_start", Kind::kInteger, at);
  SRU_CHECK(start.is_number_unsigned() ? start.get<uint64_t>() <= (uint64_t{1} << 62) : start.get<int64_t>() >= 0,
            at.str(), ": answer_start ", start.dump(), start.is_number_unsigned() ? " is beyond any context" : " is negative");
  answer.answer_start = start.get<int64_t>();
  answer.begin = unicode::byte_offset_of_code_point(context, answer.answer_start);
  SRU_CHECK(answer.begin >= 0, at.str(), ": answer_start ", answer.answer_start, " is beyond the context (",
            code_points(context), " characters)");
  answer.end = answer.begin + static_cast<int64_t>(answer.text.size());
  if (context.compare(answer.begin, answer.text.size(), answer.text) != 0) {
    const std::string_view rest = std::string_view(context).substr(answer.begin);
    const int64_t shown = unicode::byte_offset_of_code_point(rest, code_points(answer.text));
    SRU_FAIL(at.str(), ": answer_start ", answer.answer_start, " does not point at the answer text '", answer.text,
             "': the context there reads '", rest.substr(0, shown < 0 ? rest.size() : shown), "'");
  }
  return answer;
}

}  // namespace

SquadDataset read_squad(const std::string& path) {
  const nlohmann::json root = read_json_file(path, "SQuAD file");
  SquadDataset out;
  out.path = path;
  const Location top{path};
  SRU_CHECK(root.is_object(), top.str(), ": expected a JSON object {\"version\": ..., \"data\": [...]}, got ",
            root.type_name());
  if (root.contains("version")) {
    SRU_CHECK(root["version"].is_string(), top.str(), ": 'version' must be a string, got ", describe_json(root["version"]));
    out.version = root["version"].get<std::string>();
  }
  const nlohmann::json& articles = field(root, "data", Kind::kArray, top);
  struct Seen {
    int64_t paragraph, question;
  };
  std::unordered_map<std::string, Seen> seen_ids;
  for (size_t a = 0; a < articles.size(); ++a) {
    Location at{path, static_cast<int64_t>(a)};
    const std::string title = field(articles[a], "title", Kind::kString, at).get<std::string>();
    at.title = &title;
    const nlohmann::json& paragraphs = field(articles[a], "paragraphs", Kind::kArray, at);
    out.titles.push_back(title);
    for (size_t p = 0; p < paragraphs.size(); ++p) {
      at.paragraph = static_cast<int64_t>(p);
      SquadParagraph paragraph;
      paragraph.article = static_cast<int64_t>(a);
      paragraph.context = field(paragraphs[p], "context", Kind::kString, at).get<std::string>();
      const nlohmann::json& qas = field(paragraphs[p], "qas", Kind::kArray, at);
      for (size_t q = 0; q < qas.size(); ++q) {
        at.question = static_cast<int64_t>(q);
        at.id = nullptr;
        SquadQuestion question;
        question.id = field(qas[q], "id", Kind::kString, at).get<std::string>();
        at.id = &question.id;
        question.question = field(qas[q], "question", Kind::kString, at).get<std::string>();
        const nlohmann::json& answers = field(qas[q], "answers", Kind::kArray, at);
        const auto impossible = qas[q].find("is_impossible");
        SRU_CHECK(impossible == qas[q].end() || *impossible == false, at.str(),
                  ": 'is_impossible' is a SQuAD v2.0 question; this reader reads SQuAD v1.1");
        SRU_CHECK(!answers.empty(), at.str(),
                  ": 'answers' is empty (every SQuAD v1.1 question has an answer; a SQuAD v2.0 file?)");
        for (size_t k = 0; k < answers.size(); ++k) {
          at.answer = static_cast<int64_t>(k);
          question.answers.push_back(read_answer(answers[k], paragraph.context, at));
        }
        at.answer = -1;
        const Seen here{static_cast<int64_t>(out.paragraphs.size()), static_cast<int64_t>(q)};
        const auto [it, inserted] = seen_ids.emplace(question.id, here);
        SRU_CHECK(inserted, at.str(), ": the id is used twice (first in paragraph ", it->second.paragraph,
                  " of the file, question ", it->second.question, ")");
        out.answers += static_cast<int64_t>(question.answers.size());
        paragraph.questions.push_back(std::move(question));
      }
      at.question = -1;
      at.id = nullptr;
      out.questions += static_cast<int64_t>(paragraph.questions.size());
      out.paragraphs.push_back(std::move(paragraph));
    }
  }
  return out;
}

// ---- tokenizer ----

namespace {

enum class CharClass { kSeparator, kWord, kOther };

CharClass classify(char32_t c) {
  if (c < 0x80) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return CharClass::kWord;
    return unicode::is_python_space(c) ? CharClass::kSeparator : CharClass::kOther;
  }
  if (c == unicode::kInvalid) return CharClass::kOther;
  if (unicode::is_python_space(c) || c == 0x200B || c == 0x200E || c == 0x200F || c == 0x2060 || c == 0xFEFF)
    return CharClass::kSeparator;
  if (unicode::is_letter_or_mark(c) || c == 0xAD || c == 0x200C || c == 0x200D) return CharClass::kWord;
  return CharClass::kOther;
}

bool is_ascii_digit(std::string_view text, size_t pos) { return pos < text.size() && text[pos] >= '0' && text[pos] <= '9'; }

}  // namespace

bool is_token_separator(std::string_view text, size_t pos) {
  return classify(unicode::decode_utf8(text, pos).code_point) == CharClass::kSeparator;
}

std::vector<Token> tokenize(std::string_view text) {
  std::vector<Token> tokens;
  size_t pos = 0;
  while (pos < text.size()) {
    const unicode::Decoded d = unicode::decode_utf8(text, pos);
    const CharClass cls = classify(d.code_point);
    if (cls == CharClass::kSeparator) {
      pos += d.length;
      continue;
    }
    size_t end = pos + d.length;
    if (cls == CharClass::kWord) {
      while (end < text.size()) {
        if ((text[end] == ',' || text[end] == '.') && is_ascii_digit(text, end - 1) && is_ascii_digit(text, end + 1)) {
          end += 2;  // a digit group or decimal point inside a number
          continue;
        }
        const unicode::Decoded next = unicode::decode_utf8(text, end);
        if (classify(next.code_point) != CharClass::kWord) break;
        end += next.length;
      }
    }
    Token token;
    token.text = std::string(text.substr(pos, end - pos));
    token.lower = unicode::python_lower(token.text);
    token.begin = static_cast<int64_t>(pos);
    token.end = static_cast<int64_t>(end);
    tokens.push_back(std::move(token));
    pos = end;
  }
  return tokens;
}

// ---- answer alignment ----

std::optional<TokenSpan> align_answer(std::string_view context, const std::vector<Token>& tokens, int64_t begin,
                                      int64_t end) {
  SRU_CHECK(begin >= 0 && begin <= end && end <= static_cast<int64_t>(context.size()), "align_answer: range [", begin,
            ", ", end, ") is not inside a context of ", context.size(), " bytes");
  while (begin < end && is_token_separator(context, begin)) begin += unicode::decode_utf8(context, begin).length;
  while (begin < end) {
    int64_t last = end - 1;  // the start of the last code point
    while (last > begin && (static_cast<unsigned char>(context[last]) & 0xC0) == 0x80) --last;
    if (!is_token_separator(context, last)) break;
    end = last;
  }
  if (begin == end) return std::nullopt;
  const auto first = std::lower_bound(tokens.begin(), tokens.end(), begin,
                                      [](const Token& t, int64_t v) { return t.begin < v; });
  const auto last = std::lower_bound(tokens.begin(), tokens.end(), end,
                                     [](const Token& t, int64_t v) { return t.end < v; });
  if (first == tokens.end() || first->begin != begin || last == tokens.end() || last->end != end) return std::nullopt;
  return TokenSpan{first - tokens.begin(), last - tokens.begin()};
}

SquadSpans map_answer_spans(const SquadDataset& dataset) {
  SquadSpans out;
  out.contexts.reserve(dataset.paragraphs.size());
  for (size_t p = 0; p < dataset.paragraphs.size(); ++p) {
    const SquadParagraph& paragraph = dataset.paragraphs[p];
    out.contexts.push_back(tokenize(paragraph.context));
    for (size_t q = 0; q < paragraph.questions.size(); ++q) {
      SquadSpanExample example{static_cast<int64_t>(p), static_cast<int64_t>(q), {}};
      for (const SquadAnswer& answer : paragraph.questions[q].answers) {
        ++out.answers;
        if (const auto span = align_answer(paragraph.context, out.contexts.back(), answer.begin, answer.end))
          example.spans.push_back(*span);
        else
          ++out.unaligned_answers;
      }
      if (example.spans.empty())
        out.skipped_questions.push_back(paragraph.questions[q].id);
      else
        out.examples.push_back(std::move(example));
    }
  }
  return out;
}

}  // namespace sru::data
