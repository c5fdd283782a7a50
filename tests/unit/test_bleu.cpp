// BLEU as sacreBLEU 2.6.0 computes it by default (data/bleu.h): sacreBLEU's own test vectors (its
// test/test_bleu.py, test/test_sentence_bleu.py inputs and README examples: the inputs and expected
// numbers copied as data), the 13a tokenizer on tricky text and hand cases (empty hypotheses, no match,
// exact match, brevity penalty, multiple references, lower case, Unicode), every expected value as
// sacrebleu 2.6.0 prints it. The file reader's errors. scripts/check_bleu.py compares with the package
// itself on thousands of generated lines (ctest bleu_matches_sacrebleu).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/bleu.h"
#include "testing.h"

using namespace sru::data;
using sru::testing::error_of;
using sru::testing::temp_file;

namespace {

using Lines = std::vector<std::string>;
using RefSets = std::vector<Lines>;

// sacreBLEU's README / test_bleu.py corpus: three hypotheses, two reference sets.
const Lines kHyps = {"The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."};
const RefSets kRefs = {{"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
                       {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};

BleuScore score_of(const std::string& hyp, const std::vector<std::string>& refs, bool lowercase = false) {
  RefSets sets;
  for (const auto& r : refs) sets.push_back({r});
  BleuOptions options;
  options.lowercase = lowercase;
  return corpus_bleu({hyp}, sets, options);
}

}  // namespace

TEST(Bleu, Tokenizer13aAsSacrebleu) {
  // Input -> sacrebleu.tokenizers.tokenizer_13a.Tokenizer13a()(input), from sacrebleu 2.6.0.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"Hello, world!", "Hello , world !"},
      {"The U.S. economy grew 3.5% in 2019, to $1,000.50.", "The U . S . economy grew 3.5 % in 2019 , to $ 1,000.50 ."},
      {"e.g., i.e. etc.", "e . g . , i . e . etc ."},
      {"don't stop-believing 1990-2000 3-4 a-b -5", "don't stop-believing 1990 - 2000 3 - 4 a-b -5"},
      {"<skipped> text <skipped>", "text"},
      {"hyphen-\nated line\nbreak", "hyphenated line break"},
      {"&quot;quoted&quot; &amp; &lt;tag&gt; &amp;quot; &amp;lt;", "\" quoted \" & < tag > & quot ; <"},
      {"a&b &ampx; R&amp;D", "a & b & ampx ; R & D"},
      {"{braces} [brackets] (parens) <angle> a/b a\\b a|b a~b a^b a_b a`b",
       "{ braces } [ brackets ] ( parens ) < angle > a / b a \\ b a | b a ~ b a ^ b a _ b a ` b"},
      {"#hash @at *star +plus =eq ?q :colon ;semi", "# hash @ at * star + plus = eq ? q : colon ; semi"},
      {".5 5. 5.5 .a a. ,5 5, 5,5 ,a a,", ". 5 5 . 5.5 . a a . , 5 5 , 5,5 , a a ,"},
      {"x.. y,, 1..2 3,,4 ...", "x . . y , , 1 . . 2 3 , , 4 . . ."},
      {"“curly quotes” ‘single’ — dash – en…", "“curly quotes” ‘single’ — dash – en…"},
      {"naïve café Ωmega 東京 ٣.٤ ３．４", "naïve café Ωmega 東京 ٣ . ٤ ３．４"},
      {"tab\there  two\u00a0nbsp\u3000ideographic\u200bzwsp\u2028ls", "tab here two nbsp ideographic\u200bzwsp ls"},
      {"   leading and trailing   ", "leading and trailing"},
      {"", ""},
      {"'apostrophes' 'n' rock'n'roll", "'apostrophes' 'n' rock'n'roll"},
      {"1,2,3.4.5-6-7", "1,2,3.4.5 - 6 - 7"},
      {"5-\n6", "56"},
  };
  for (const auto& [input, expected] : cases) EXPECT_EQ(tokenize_13a(input), expected) << input;
  // The segment is right-stripped before the tokenizer, so a final "-\n" is not joined away.
  EXPECT_EQ(tokenize_13a("trailing -\n"), "trailing");
  EXPECT_EQ(preprocess_bleu_segment("trailing -\n"), "trailing -");
  BleuOptions lc;
  lc.lowercase = true;
  EXPECT_EQ(preprocess_bleu_segment("İSTANBUL ΟΔΟΣ ΣΟΦΟΣ ẞ STRASSE", lc),
            "i\u0307stanbul \u03bf\u03b4\u03bf\u03c2 \u03c3\u03bf\u03c6\u03bf\u03c2 \u00df strasse");
}

TEST(Bleu, SacrebleuTestVectors) {
  // test_bleu.py test_corpus_bleu (EPSILON 1e-8) and the README's printed line and signature.
  const BleuScore s = corpus_bleu(kHyps, kRefs);
  EXPECT_NEAR(s.score, 48.530827, 1e-8);
  EXPECT_EQ(format_bleu(s), "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)");
  EXPECT_EQ(s.signature, "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
  EXPECT_EQ(format_bleu(s, 1, true),
            "BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = 48.5 82.4/50.0/45.5/37.5 (BP = 0.943 "
            "ratio = 0.944 hyp_len = 17 ref_len = 18)");
  EXPECT_EQ(s.counts, (std::vector<int64_t>{14, 7, 5, 3}));
  EXPECT_EQ(s.totals, (std::vector<int64_t>{17, 14, 11, 8}));
  // Empty hypotheses are scored, not removed.
  EXPECT_EQ(corpus_bleu({"", "", ""}, kRefs).score, 0.0);
  // README: an empty first reference.
  RefSets with_empty = kRefs;
  with_empty[0][0] = "";
  EXPECT_EQ(format_bleu(corpus_bleu(kHyps, with_empty)),
            "BLEU = 29.44 82.4/42.9/27.3/12.5 (BP = 0.889 ratio = 0.895 hyp_len = 17 ref_len = 19)");
  // test_raw_bleu: no match at all is 0 (#141); an exact match is 100.
  EXPECT_EQ(corpus_bleu({"this is a test", "another test"}, {{"ref1", "ref2"}}).score, 0.0);
  EXPECT_NEAR(corpus_bleu({"this is a test"}, {{"this is a test"}}).score / 100, 1.0, 1e-8);
  // test_statistics.
  const BleuStats st = bleu_statistics({"am I am a character sequence"}, {{"I am a symbol string sequence a a"}});
  EXPECT_EQ(st.counts, (std::vector<int64_t>{4, 2, 1, 0}));
  EXPECT_EQ(st.totals, (std::vector<int64_t>{6, 5, 4, 3}));
  // test_scoring and the degenerate all-zero statistics.
  BleuStats given{11, 11, {9, 7, 5, 3}, {10, 8, 6, 4}};
  EXPECT_NEAR(bleu_from_statistics(given).score / 100, 0.8375922397, 1e-8);
  EXPECT_EQ(bleu_from_statistics(BleuStats{0, 0, {0, 0, 0, 0}, {0, 0, 0, 0}}).score, 0.0);
  EXPECT_EQ(bleu_from_statistics(BleuStats{0, 1, {0, 0, 0, 0}, {4, 4, 2, 1}}).score, 0.0);
  // test_max_ngram_order.
  const char* by_order[] = {"77.65", "60.50", "53.93", "48.53", "46.14", "43.28"};
  for (int order = 1; order <= 6; ++order) {
    BleuOptions options;
    options.max_ngram_order = order;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", corpus_bleu(kHyps, kRefs, options).score);
    EXPECT_EQ(std::string(buf), by_order[order - 1]) << "order " << order;
  }
  // test_sentence_bleu.py's sentence (#98), scored with the default eff:no (the test's 8.493 is eff:yes and
  // happens to agree): sacrebleu 2.6.0 gives 8.493098745313148, counts 5/2/0/0 of 14/13/12/11, ref_len 10.
  const std::string ref98 = "producţia de zahăr brut se exprimă în zahăr alb;";
  const std::string sys98 = "Producția de zahăr primă va fi exprimată în ceea ce privește zahărul alb;";
  const BleuScore s98 = score_of(sys98, {ref98});
  EXPECT_NEAR(s98.score, 8.493, 1e-3);
  EXPECT_EQ(s98.score, 8.493098745313148);
  EXPECT_EQ(format_bleu(s98), "BLEU = 8.49 35.7/15.4/4.2/2.3 (BP = 1.000 ratio = 1.400 hyp_len = 14 ref_len = 10)");
  EXPECT_EQ(score_of(sys98, {ref98}, true).score, 8.493098745313148);  // only "P" changes case
  // test_sentence_bleu.py's zero case (#141).
  EXPECT_EQ(score_of("this is a cat", {"okay thanks"}).score, 0.0);
}

// Each expected value is sacrebleu 2.6.0's, as a double (printed with repr) or its text line.
TEST(Bleu, HandCases) {
  // Empty hypothesis: BP 0; empty hypothesis and reference: BP 1; both score 0.
  EXPECT_EQ(format_bleu(score_of("", {"a b"})),
            "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 2)");
  EXPECT_EQ(format_bleu(score_of("", {""})),
            "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 0.000 hyp_len = 0 ref_len = 0)");
  EXPECT_EQ(corpus_bleu({}, {{}}).score, 0.0);
  // No match.
  const BleuScore none = score_of("x y z", {"a b c"});
  EXPECT_EQ(none.score, 0.0);
  EXPECT_EQ(none.precisions, (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(none.totals, (std::vector<int64_t>{3, 2, 1, 0}));
  // Exact match: 100 (exp(log(100)) = 100.00000000000004, as in Python).
  EXPECT_EQ(score_of("this is a test", {"this is a test"}).score, 100.00000000000004);
  // An exact match shorter than 4 tokens has no 4-gram: 0 without effective order.
  const BleuScore short_match = score_of("a test", {"a test"});
  EXPECT_EQ(short_match.score, 0.0);
  EXPECT_EQ(short_match.precisions, (std::vector<double>{100, 100, 0, 0}));
  // "exp" smoothing: the k-th zero count gives 100 / (2^k total).
  const BleuScore fest = score_of("this is a fest", {"this is a test"});
  EXPECT_EQ(fest.score, 59.460355750136046);
  EXPECT_EQ(fest.precisions, (std::vector<double>{75.0, 100.0 * 2 / 3, 50.0, 50.0}));
  const BleuScore zeros = score_of("the the the the the the the", {"the cat is on the mat"});
  EXPECT_EQ(zeros.score, 7.809849842300637);
  EXPECT_EQ(zeros.precisions, (std::vector<double>{100.0 * 2 / 7, 100.0 / (2 * 6), 100.0 / (4 * 5), 100.0 / (8 * 4)}));
  // Brevity penalty exp(1 - 7/5).
  const BleuScore brief = score_of("the cat sat on the", {"the cat sat on the mat ."});
  EXPECT_EQ(brief.bp, 0.6703200460356393);
  EXPECT_EQ(brief.score, 67.03200460356396);
  EXPECT_EQ(score_of("a b c d e", {"a b c x d e"}).score, 40.93653765389909);
  // Multiple references: n-gram counts are the maximum over them; the closest length, the shorter on a tie.
  const BleuScore tie = score_of("one two three four five", {"one two three four", "one two three four five six"});
  EXPECT_EQ(tie.ref_len, 4);
  EXPECT_EQ(tie.bp, 1.0);
  EXPECT_EQ(tie.signature, "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
  EXPECT_EQ(score_of("one two three four five", {"one two three four five six", "one two three four"}).ref_len, 4);
  EXPECT_EQ(score_of("a b c", {"a b c d e f g", "a", "a b c d"}).ref_len, 4);
  const BleuStats clipped = bleu_statistics({"a a a b"}, {{"a b"}, {"a a c"}});
  EXPECT_EQ(clipped.counts, (std::vector<int64_t>{3, 2, 0, 0}));  // a: min(3, max(1, 2)), b: 1; "a a", "a b"
  // Lower case: Python's str.lower() (İ to i + U+0307, final sigma, ẞ to ß).
  EXPECT_EQ(score_of("THE DOG BIT THE MAN .", {"the dog bit the man ."}).score, 8.116697886877475);
  const BleuScore lc = score_of("THE DOG BIT THE MAN .", {"the dog bit the man ."}, true);
  EXPECT_EQ(lc.score, 100.00000000000004);
  EXPECT_EQ(lc.signature, "nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:2.6.0");
  const std::string upper = "İSTANBUL ΟΔΟΣ ΣΟΦΟΣ ẞ STRASSE";
  const std::string lower = "i\u0307stanbul \u03bf\u03b4\u03bf\u03c2 \u03c3\u03bf\u03c6\u03bf\u03c2 \u00df strasse";
  EXPECT_EQ(score_of(upper, {lower}, true).score, 100.00000000000004);
  EXPECT_EQ(score_of(upper, {lower}).score, 0.0);
  // Unicode whitespace separates tokens (U+00A0, U+3000, U+2009); U+200B does not.
  const BleuScore spaces = score_of("a\u00a0b\u3000c\u2009d e\u200bf", {"a b c d e f"});
  EXPECT_EQ(spaces.sys_len, 5);
  EXPECT_EQ(spaces.score, 54.75182535069452);
  // Corpus statistics are the sums of the lines'.
  const std::vector<BleuStats> lines = bleu_line_statistics(kHyps, kRefs);
  ASSERT_EQ(lines.size(), 3u);
  BleuStats sum = lines[0];
  sum += lines[1];
  sum += lines[2];
  EXPECT_EQ(sum.counts, bleu_statistics(kHyps, kRefs).counts);
  EXPECT_EQ(bleu_from_statistics(sum).score, corpus_bleu(kHyps, kRefs).score);
}

TEST(Bleu, RefusesBadInput) {
  EXPECT_NE(error_of([] { corpus_bleu({"a"}, {}); }).find("no references"), std::string::npos);
  EXPECT_NE(error_of([] { corpus_bleu({"a", "b"}, {{"a", "b"}, {"a"}}); })
                .find("reference set 2 has 1 lines but there are 2 hypotheses"),
            std::string::npos);
  EXPECT_NE(error_of([] { corpus_bleu({"a", "b\xff"}, {{"a", "b"}}); }).find("hypothesis line 2 is not valid UTF-8"),
            std::string::npos);
  EXPECT_NE(error_of([] { corpus_bleu({"a"}, {{"\xc3("}}); }).find("reference set 1 line 1 is not valid UTF-8"),
            std::string::npos);
  BleuOptions zero;
  zero.max_ngram_order = 0;
  EXPECT_NE(error_of([&] { corpus_bleu({"a"}, {{"a"}}, zero); }).find("max_ngram_order"), std::string::npos);
}

TEST(Bleu, ReadsFilesAsSacrebleu) {
  // "\n" ends a line (a last line without it counts, "\r\n" is right-stripped with the segment);
  // the file score equals the in-memory one.
  const std::string hyp =
      temp_file("bleu_hyp.txt", "The dog bit the man.\r\nIt wasn't surprising.\nThe man had just bitten him.");
  const std::string ref1 =
      temp_file("bleu_ref1.txt", "The dog bit the man.\nIt was not unexpected.\nThe man bit him first.\n");
  const std::string ref2 =
      temp_file("bleu_ref2.txt", "The dog had bit the man.\nNo one was surprised.\nThe man had bitten the dog.\n");
  const BleuCorpus corpus = read_bleu_files(hyp, {ref1, ref2});
  EXPECT_EQ(corpus.hypotheses.size(), 3u);
  const BleuScore s = corpus_bleu_files(hyp, {ref1, ref2});
  EXPECT_EQ(s.score, corpus_bleu(kHyps, kRefs).score);
  EXPECT_EQ(s.signature, "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
  // An empty file has no line; "\n" alone is one empty line.
  EXPECT_EQ(read_bleu_files(temp_file("bleu_empty.txt", ""), {temp_file("bleu_empty2.txt", "")}).hypotheses.size(), 0u);
  EXPECT_EQ(read_bleu_files(temp_file("bleu_nl.txt", "\n"), {temp_file("bleu_nl2.txt", "x\n")}).hypotheses.size(), 1u);

  // A line-count mismatch names both files and both counts.
  const std::string short_ref = temp_file("bleu_short.txt", "one\ntwo\n");
  const std::string mismatch = error_of([&] { read_bleu_files(hyp, {ref1, short_ref}); });
  EXPECT_NE(mismatch.find(short_ref), std::string::npos) << mismatch;
  EXPECT_NE(mismatch.find(hyp), std::string::npos) << mismatch;
  EXPECT_NE(mismatch.find("has 2 lines but hypothesis file"), std::string::npos) << mismatch;
  EXPECT_NE(mismatch.find("has 3"), std::string::npos) << mismatch;
  // Invalid UTF-8 names the file and the line.
  const std::string bad = temp_file("bleu_bad.txt", "fine\nalso fine\nbad \xe2\x82 here\n");
  const std::string invalid = error_of([&] { read_bleu_files(bad, {ref1}); });
  EXPECT_NE(invalid.find("'" + bad + "' line 3 is not valid UTF-8"), std::string::npos) << invalid;
  EXPECT_NE(error_of([&] { read_bleu_files(hyp, {}); }).find("no reference file"), std::string::npos);
  EXPECT_NE(error_of([&] { read_bleu_files(hyp, {"/nonexistent/ref.txt"}); }).find("/nonexistent/ref.txt"),
            std::string::npos);
}
