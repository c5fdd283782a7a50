// SQuAD v1.1: the official metric (hand-made cases, and the official script's numbers on the shipped
// sample), the predictions file, the reader's errors, code-point answer offsets, the tokenizer's
// offsets and the answer alignment (every aligned answer of the shipped sample, and of the real
// dev-v1.1.json when the project's mirror is there, maps back to its exact text).
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "data/squad.h"
#include "data/squad_metric.h"
#include "data/unicode.h"
#include "testing.h"

using namespace sru;
using namespace sru::data;
using sru::testing::error_of;
using sru::testing::temp_file;

namespace {

const std::string kSample = std::string(SRU_SOURCE_DIR) + "/data/squad-sample/dev-v1.1.sample.json";

// A valid one-article file, for the error tests to break.
nlohmann::json valid_file() {
  return nlohmann::json::parse(R"({"version": "1.1", "data": [{"title": "Greek", "paragraphs": [
    {"context": "Ωmega café au lait.", "qas": [
      {"id": "q-first", "question": "What?", "answers": [{"text": "café", "answer_start": 6}]},
      {"id": "q-second", "question": "And?", "answers": [{"text": "au lait", "answer_start": 11},
                                                        {"text": "lait", "answer_start": 14}]}]}]}]})");
}

std::string read_error(const std::string& name, const std::string& text) {
  const std::string path = temp_file(name, text);
  return error_of([&] { read_squad(path); });
}

std::vector<std::string> token_texts(const std::vector<Token>& tokens) {
  std::vector<std::string> out;
  for (const Token& t : tokens) out.push_back(t.text);
  return out;
}

// text without the tokenizer's separators at either end.
std::string trim_separators(std::string text) {
  while (!text.empty() && is_token_separator(text, 0)) text.erase(0, unicode::decode_utf8(text, 0).length);
  while (!text.empty()) {
    size_t last = text.size() - 1;
    while (last > 0 && (static_cast<unsigned char>(text[last]) & 0xC0) == 0x80) --last;
    if (!is_token_separator(text, last)) break;
    text.erase(last);
  }
  return text;
}

// Every aligned answer of `dataset` maps back to its exact (trimmed) text; returns the unaligned count.
int64_t check_round_trip(const SquadDataset& dataset) {
  const SquadSpans spans = map_answer_spans(dataset);
  int64_t aligned = 0;
  for (size_t p = 0; p < dataset.paragraphs.size(); ++p) {
    const std::string& context = dataset.paragraphs[p].context;
    const std::vector<Token>& tokens = spans.contexts[p];
    for (const Token& t : tokens) EXPECT_EQ(context.substr(t.begin, t.end - t.begin), t.text);
    for (const SquadQuestion& q : dataset.paragraphs[p].questions)
      for (const SquadAnswer& a : q.answers) {
        EXPECT_EQ(context.substr(a.begin, a.end - a.begin), a.text) << q.id;
        const auto span = align_answer(context, tokens, a.begin, a.end);
        if (!span) continue;
        ++aligned;
        const int64_t begin = tokens[span->first].begin, end = tokens[span->last].end;
        // The answer text trimmed of separators, as the alignment trims it.
        EXPECT_EQ(context.substr(begin, end - begin), trim_separators(a.text)) << q.id;
      }
  }
  EXPECT_EQ(aligned + spans.unaligned_answers, dataset.answers);
  EXPECT_EQ(spans.answers, dataset.answers);
  EXPECT_EQ(static_cast<int64_t>(spans.examples.size() + spans.skipped_questions.size()), dataset.questions);
  return spans.unaligned_answers;
}

}  // namespace

// ---- metric ----

TEST(SquadMetric, NormalizesAsTheOfficialScript) {
  // Expected values are the output of evaluate-v1.1.py's normalize_answer (Python 3.11).
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"The Cat!", "cat"},
      {"  An apple, a pear and THE end. ", "apple pear and end"},
      {"theater anthem", "theater anthem"},
      {"the_end", "theend"},  // '_' is punctuation, removed before the articles
      {"the-end", "theend"},
      {"the/a", "thea"},
      {"the a an", ""},
      {"ÄÉÖ Straße ΣΑΣ", "äéö straße σας"},  // Unicode lower case, final sigma
      {"ΌΣΟΣ", "όσος"},
      {"İ", "i\xCC\x87"},  // U+0130 lower-cases to "i" + U+0307
      {"x\u00a0y\u3000z\u2009w\u2028v", "x y z w v"},  // Unicode whitespace
      {"a\u200bb", "\u200bb"},  // U+200B is no whitespace and no word character: "a" is a whole word
      {"“Quoted” — text", "“quoted” — text"},  // only ASCII punctuation is removed
      {"éthe", "éthe"},
      {"the\u0301", "\u0301"},  // a combining mark is no \w: "the" ends at a word boundary
      {"²the", "²the"},  // '²' is \w (str.isalnum)
      {"", ""},
  };
  for (const auto& [input, expected] : cases) EXPECT_EQ(normalize_answer(input), expected) << input;
}

TEST(SquadMetric, ExactMatchAndF1) {
  EXPECT_TRUE(exact_match_score("The cat", "cat!"));
  EXPECT_FALSE(exact_match_score("cats", "cat"));
  EXPECT_EQ(f1_score("the cat sat", "cat sat down"), 0.8);  // precision 1, recall 2/3
  EXPECT_EQ(f1_score("x x y", "x y y"), 2.0 / 3.0);         // shared tokens counted with multiplicity
  EXPECT_EQ(f1_score("ÉCOLE normale", "école"), 2.0 / 3.0);
  EXPECT_EQ(f1_score("cat", "dog"), 0.0);
  // No shared token gives F1 0, even for two empty answers, while EM compares the normalised strings.
  EXPECT_TRUE(exact_match_score("", ""));
  EXPECT_EQ(f1_score("", ""), 0.0);
  EXPECT_TRUE(exact_match_score("The", ""));
  EXPECT_EQ(f1_score("The", ""), 0.0);
  // The best of several ground truths.
  EXPECT_EQ(max_f1("cat sat", {"dog", "cat", "the cat sat"}), 1.0);
  EXPECT_EQ(max_f1("cat sat", {"dog", "cat"}), 2.0 / 3.0);
  EXPECT_EQ(max_exact_match("cat sat", {"dog", "Cat Sat."}), 1.0);
  EXPECT_EQ(max_exact_match("cat sat", {"dog"}), 0.0);
  EXPECT_NE(error_of([] { max_f1("x", {}); }).find("no ground-truth answers"), std::string::npos);
}

TEST(SquadMetric, ScoresEveryQuestionOfTheDataSet) {
  SquadDataset data;
  data.titles = {"t"};
  SquadParagraph paragraph;
  for (const char* id : {"q1", "q2", "q3"}) paragraph.questions.push_back({id, "?", {{"cat sat", 0, 0, 0}}});
  data.paragraphs.push_back(paragraph);
  const SquadScore s = score_squad(data, {{"q1", "The cat sat."}, {"q2", "cat"}, {"zz", "unknown id"}});
  EXPECT_EQ(s.questions, 3);
  EXPECT_EQ(s.answered, 2);
  EXPECT_EQ(s.unknown_predictions, 1);
  EXPECT_EQ(s.unanswered, std::vector<std::string>{"q3"});
  EXPECT_EQ(s.exact_match, 100.0 / 3.0);  // q3 has no prediction: it scores 0 but counts
  EXPECT_EQ(s.f1, 100.0 * (1.0 + 2.0 / 3.0) / 3.0);
}

TEST(SquadMetric, EqualsTheOfficialScriptOnTheSample) {
  // tests/data/squad_sample_predictions.json: perturbed answers (shifted spans, upper case, added
  // articles and punctuation, Unicode spaces and letters, empty strings), 30 questions without a
  // prediction and one unknown id. evaluate-v1.1.py (Python 3.11) prints
  // {"exact_match": 42.857142857142854, "f1": 58.0873293927523} for it; we must agree to the bit.
  const SquadDataset data = read_squad(kSample);
  const SquadScore s =
      score_squad(data, read_squad_predictions(std::string(SRU_SOURCE_DIR) + "/tests/data/squad_sample_predictions.json"));
  EXPECT_EQ(s.exact_match, 42.857142857142854);
  EXPECT_EQ(s.f1, 58.0873293927523);
  EXPECT_EQ(s.questions, 336);
  EXPECT_EQ(s.answered, 306);
  EXPECT_EQ(s.unknown_predictions, 1);

  SquadPredictions first_truth;
  for (const SquadParagraph& p : data.paragraphs)
    for (const SquadQuestion& q : p.questions) first_truth[q.id] = q.answers[0].text;
  const SquadScore perfect = score_squad(data, first_truth);
  EXPECT_EQ(perfect.exact_match, 100.0);
  EXPECT_EQ(perfect.f1, 100.0);
}

TEST(SquadPredictions, RefusesAnythingButAnObjectOfStrings) {
  const auto error = [](const std::string& name, const std::string& text) {
    const std::string path = temp_file(name, text);
    return error_of([&] { read_squad_predictions(path); });
  };
  std::string e = error("preds_array.json", R"(["a", "b"])");
  EXPECT_NE(e.find("predictions file '" + sru::testing::tmp_dir() + "preds_array.json' must be a JSON object"), std::string::npos) << e;
  e = error("preds_number.json", R"({"q1": "ok", "q2": 3})");
  EXPECT_NE(e.find("preds_number.json': the prediction for question 'q2' must be a string, got number 3"), std::string::npos) << e;
  e = error("preds_null.json", R"({"q1": null})");
  EXPECT_NE(e.find("'q1' must be a string, got null"), std::string::npos) << e;
  e = error("preds_list.json", R"({"q1": ["a"]})");
  EXPECT_NE(e.find("'q1' must be a string, got array"), std::string::npos) << e;
  e = error("preds_bad.json", "{\"q1\": \"a\",\n \"q2\" 5}");
  EXPECT_NE(e.find("predictions file '" + sru::testing::tmp_dir() + "preds_bad.json' is not valid JSON (at byte 19, counting from 1)"),
            std::string::npos) << e;
  e = error_of([] { read_squad_predictions(sru::testing::tmp_dir() + "no_such_preds.json"); });
  EXPECT_NE(e.find("cannot open predictions file"), std::string::npos) << e;
  // A repeated id keeps the last value, as Python's json.load does.
  const SquadPredictions p = read_squad_predictions(temp_file("preds_dup.json", R"({"q": "first", "q": "last"})"));
  EXPECT_EQ(p.at("q"), "last");
  EXPECT_TRUE(read_squad_predictions(temp_file("preds_empty.json", "{}")).empty());
}

// ---- reader ----

TEST(SquadReader, ReadsCodePointOffsetsAsBytes) {
  const SquadDataset data = read_squad(temp_file("squad_ok.json", valid_file().dump()));
  ASSERT_EQ(data.paragraphs.size(), 1u);
  EXPECT_EQ(data.version, "1.1");
  EXPECT_EQ(data.titles, std::vector<std::string>{"Greek"});
  EXPECT_EQ(data.questions, 2);
  EXPECT_EQ(data.answers, 3);
  const SquadParagraph& p = data.paragraphs[0];
  const SquadAnswer& cafe = p.questions[0].answers[0];
  EXPECT_EQ(cafe.answer_start, 6);
  EXPECT_EQ(cafe.begin, 7);  // "Ω" is two bytes
  EXPECT_EQ(cafe.end, 12);   // "é" too
  const SquadAnswer& lait = p.questions[1].answers[1];
  EXPECT_EQ(lait.begin, 16);
  EXPECT_EQ(p.context.substr(lait.begin, lait.end - lait.begin), "lait");
}

TEST(SquadReader, ErrorsNameTheFileArticleAndQuestion) {
  const std::string dir = sru::testing::tmp_dir();
  struct Case {
    const char* name;
    void (*edit)(nlohmann::json&);
    std::string expected;
  };
  const std::string q2 = "SQuAD file '" + dir + "%s', article data[0] (title 'Greek'), paragraphs[0], question qas[1] (id 'q-second')";
  const auto at_q2 = [&](const char* file) {
    std::string s = q2;
    return s.replace(s.find("%s"), 2, file);
  };
  const std::vector<Case> cases = {
      {"no_context.json", [](nlohmann::json& j) { j["data"][0]["paragraphs"][0].erase("context"); },
       "SQuAD file '" + dir + "no_context.json', article data[0] (title 'Greek'), paragraphs[0]: missing key 'context'"},
      {"no_title.json", [](nlohmann::json& j) { j["data"][0].erase("title"); },
       "SQuAD file '" + dir + "no_title.json', article data[0]: missing key 'title'"},
      {"answers_string.json", [](nlohmann::json& j) { j["data"][0]["paragraphs"][0]["qas"][1]["answers"] = "lait"; },
       at_q2("answers_string.json") + ": 'answers' must be an array, got string \"lait\""},
      {"id_number.json", [](nlohmann::json& j) { j["data"][0]["paragraphs"][0]["qas"][1]["id"] = 7; },
       "question qas[1]: 'id' must be a string, got number 7"},
      {"qas_object.json", [](nlohmann::json& j) { j["data"][0]["paragraphs"][0]["qas"] = nlohmann::json::object(); },
       "paragraphs[0]: 'qas' must be an array, got object"},
      {"start_string.json", [](nlohmann::json& j) { j["data"][0]["paragraphs"][0]["qas"][1]["answers"][1]["answer_start"] = "14"; },
       at_q2("start_string.json") + ", answers[1]: 'answer_start' must be an integer, got string \"14\""},
      {"start_float.json", [](nlohmann::json& j) { j["data"][0]["paragraphs"][0]["qas"][1]["answers"][1]["answer_start"] = 14.5; },
       "'answer_start' must be an integer, got number 14.5"},
      {"start_negative.json", [](nlohmann::json& j) { j["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]["answer_start"] = -1; },
       at_q2("start_negative.json") + ", answers[0]: answer_start -1 is negative"},
      {"start_beyond.json", [](nlohmann::json& j) { j["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]["answer_start"] = 40; },
       at_q2("start_beyond.json") + ", answers[0]: answer_start 40 is beyond the context (19 characters)"},
      {"start_wrong.json", [](nlohmann::json& j) { j["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]["answer_start"] = 12; },
       at_q2("start_wrong.json") + ", answers[0]: answer_start 12 does not point at the answer text 'au lait': the context "
                                   "there reads 'u lait.'"},
      {"start_bytes.json", [](nlohmann::json& j) { j["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 7; },
       "(id 'q-first'), answers[0]: answer_start 7 does not point at the answer text 'café'"},  // a byte offset
      {"no_answers.json", [](nlohmann::json& j) { j["data"][0]["paragraphs"][0]["qas"][1]["answers"] = nlohmann::json::array(); },
       at_q2("no_answers.json") + ": 'answers' is empty"},
      {"impossible.json", [](nlohmann::json& j) { j["data"][0]["paragraphs"][0]["qas"][1]["is_impossible"] = true; },
       at_q2("impossible.json") + ": 'is_impossible' is a SQuAD v2.0 question"},
      {"duplicate_id.json", [](nlohmann::json& j) { j["data"][0]["paragraphs"][0]["qas"][1]["id"] = "q-first"; },
       "question qas[1] (id 'q-first'): the id is used twice (first in paragraph 0 of the file, question 0)"},
      {"data_object.json", [](nlohmann::json& j) { j["data"] = nlohmann::json::object(); },
       "SQuAD file '" + dir + "data_object.json': 'data' must be an array, got object"},
      {"article_array.json", [](nlohmann::json& j) { j["data"][0] = nlohmann::json::array(); },
       "article data[0]: expected a JSON object, got array"},
      {"version_number.json", [](nlohmann::json& j) { j["version"] = 1.1; }, "'version' must be a string, got number 1.1"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = valid_file();
    c.edit(j);
    const std::string e = read_error(c.name, j.dump());
    EXPECT_NE(e.find(c.expected), std::string::npos) << c.name << ": " << e;
  }
  std::string e = read_error("truncated.json", valid_file().dump().substr(0, 50));
  EXPECT_NE(e.find("SQuAD file '" + dir + "truncated.json' is not valid JSON (at byte 51, counting from 1)"), std::string::npos) << e;
  e = read_error("top_array.json", "[]");
  EXPECT_NE(e.find("top_array.json': expected a JSON object"), std::string::npos) << e;
  e = read_error("bad_utf8.json", "{\"data\": [{\"title\": \"\xff\"}]}");
  EXPECT_NE(e.find("bad_utf8.json' is not valid JSON (at byte 22, counting from 1)"), std::string::npos) << e;
  e = error_of([&] { read_squad(dir + "no_such_squad.json"); });
  EXPECT_NE(e.find("cannot open SQuAD file '" + dir + "no_such_squad.json'"), std::string::npos) << e;
}

// ---- tokenizer and alignment ----

TEST(SquadTokenizer, SplitsWordsNumbersAndPunctuationWithOffsets) {
  using V = std::vector<std::string>;
  EXPECT_EQ(token_texts(tokenize("Hello, world!")), (V{"Hello", ",", "world", "!"}));
  EXPECT_EQ(token_texts(tokenize("1,000 and 3.14. U.S. 20–18, $5")),
            (V{"1,000", "and", "3.14", ".", "U", ".", "S", ".", "20", "–", "18", ",", "$", "5"}));
  EXPECT_EQ(token_texts(tokenize("café—naïve “quote” 10²\u00a0km")),
            (V{"café", "—", "naïve", "“", "quote", "”", "10", "²", "km"}));
  EXPECT_EQ(token_texts(tokenize("元朝 (Yuan) Tōghūn's")), (V{"元朝", "(", "Yuan", ")", "Tōghūn", "'", "s"}));
  EXPECT_EQ(token_texts(tokenize("e\u0301t a\u200bb \u00a0\u3000c\u2009d")), (V{"e\u0301t", "a", "b", "c", "d"}));
  EXPECT_EQ(token_texts(tokenize("ab\xff" "cd")), (V{"ab", "\xff", "cd"}));  // a stray byte is its own token
  EXPECT_TRUE(tokenize(" \t\n").empty());

  const std::string text = "ÉCOLE  Σ ΣΑΣ";
  const std::vector<Token> tokens = tokenize(text);
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(tokens[0].lower, "école");
  EXPECT_EQ(tokens[1].lower, "σ");
  EXPECT_EQ(tokens[2].lower, "σας");
  EXPECT_EQ(tokens[1].begin, 8);  // "ÉCOLE" is six bytes, then two spaces
  for (const Token& t : tokens) EXPECT_EQ(text.substr(t.begin, t.end - t.begin), t.text);
}

TEST(SquadAlign, AlignsOnlyAtTokenBoundaries) {
  const std::string context = "The golden age of 1,000 ships ended.";
  const std::vector<Token> tokens = tokenize(context);
  const auto align = [&](const std::string& answer, int64_t extend = 0) {
    const int64_t begin = static_cast<int64_t>(context.find(answer));
    return align_answer(context, tokens, begin - extend, begin + static_cast<int64_t>(answer.size()) + extend);
  };
  auto span = align("golden age");
  ASSERT_TRUE(span);
  EXPECT_EQ(span->first, 1);
  EXPECT_EQ(span->last, 2);
  span = align("age", 1);  // " age " is trimmed
  ASSERT_TRUE(span);
  EXPECT_EQ(span->first, 2);
  EXPECT_EQ(span->last, 2);
  EXPECT_TRUE(align("1,000 ships"));
  EXPECT_FALSE(align("gold"));  // inside "golden"
  EXPECT_FALSE(align("1"));     // inside "1,000"
  EXPECT_FALSE(align(" "));     // nothing left after trimming
  EXPECT_NE(error_of([&] { align_answer(context, tokens, 30, 80); }).find("not inside a context"), std::string::npos);
}

TEST(SquadSample, EveryAlignedAnswerMapsBackToItsText) {
  const SquadDataset data = read_squad(kSample);
  EXPECT_EQ(data.version, "1.1");
  EXPECT_EQ(data.titles, (std::vector<std::string>{"Black_Death", "Yuan_dynasty"}));
  EXPECT_EQ(data.paragraphs.size(), 70u);
  EXPECT_EQ(data.questions, 336);
  EXPECT_EQ(data.answers, 1000);
  // One answer does not align: "y through the port's trade ..." starts inside "probably".
  EXPECT_EQ(check_round_trip(data), 1);
  const SquadSpans spans = map_answer_spans(data);
  EXPECT_TRUE(spans.skipped_questions.empty());  // that question has other, aligned answers
  EXPECT_EQ(spans.examples.size(), 336u);
}

TEST(SquadDev, EveryAlignedAnswerMapsBackToItsText) {
  const std::string path = std::string(SRU_SOURCE_DIR) + "/../shared/data/squad/dev-v1.1.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no SQuAD dev set at " << path;
  const SquadDataset data = read_squad(path);
  EXPECT_EQ(data.titles.size(), 48u);
  EXPECT_EQ(data.paragraphs.size(), 2067u);
  EXPECT_EQ(data.questions, 10570);
  EXPECT_EQ(data.answers, 34726);
  const int64_t unaligned = check_round_trip(data);
  // Measured: 76 of 34,726 answers (0.22%) do not align, nearly all annotations that start or end
  // inside a word ("gold" of "golden", "Japan" of "Japanese"); one question has no aligned answer.
  std::cout << "dev-v1.1: " << unaligned << " of " << data.answers << " answers do not align\n";
  EXPECT_LT(static_cast<double>(unaligned) / static_cast<double>(data.answers), 0.003);
}
