// Corpus BLEU computed exactly as sacreBLEU 2.6.0 computes it with its defaults (`sacrebleu REF < HYP`,
// `sacrebleu.corpus_bleu(hyps, [refs])`): tokenizer 13a, n-grams up to order 4, smoothing "exp",
// no effective order, optionally lower-cased (-lc). The steps, each as sacreBLEU does it:
//   - each segment (hypothesis or reference): Python's str.lower() when lower-casing (data/unicode.h,
//     full mapping and final sigma), then str.rstrip() (Python whitespace), then the 13a tokenizer
//     (tokenize_13a below);
//   - per hypothesis line, over its K references: the reference n-gram counts are the maximum over the
//     references, a hypothesis n-gram matches min(its count, that maximum) times; the reference length
//     is the one closest to the hypothesis length, the shorter of two equally close;
//   - the corpus statistics are the sums of the lines' (sys_len, ref_len, counts, totals);
//   - score = BP * exp(sum_n log(p_n) / N) with p_n = 100 * counts/totals; a zero count takes
//     100 / (2^k * total) for the k-th zero count ("exp", as mteval-v13a.pl); an order with no n-gram
//     at all makes the score 0 (sacreBLEU's log(0) = -9999999999), and so does a corpus without one
//     matched n-gram; BP = exp(1 - ref_len / sys_len) when sys_len < ref_len (0 when sys_len = 0).
// The arithmetic is sacreBLEU's, in its order, so the numbers agree to the last bit (checked against
// the real package by scripts/check_bleu.py: ctest bleu_matches_sacrebleu).
// Not covered: sacreBLEU's other tokenizers and smoothing methods, effective order, and its `None`
// references (a variable number of references per line, "nrefs:var"): every line here has K references
// (an empty reference line is an empty reference, as in sacreBLEU).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sru::data {

// The sacreBLEU version whose numbers and signature this reproduces.
inline constexpr const char* kSacrebleuVersion = "2.6.0";

struct BleuOptions {
  bool lowercase = false;   // sacreBLEU -lc: Python's str.lower() on every segment first
  int max_ngram_order = 4;  // sacreBLEU's BLEU(max_ngram_order=...); 4 is the default and the only CLI value
};

// sacreBLEU's tokenizer_13a (mteval-v13a.pl's normalisation): removes "<skipped>" and "-\n", turns "\n"
// into a space, unescapes &quot; &amp; &lt; &gt; (in that order, each over the whole line), then on
// " line ": spaces around every ASCII punctuation character except ' - . , ; splits "." and "," off
// unless between digits ("3.5", "1,000" stay, "end." and ".5" split on their non-digit side); splits
// "-" after a digit; finally joins the runs between Python whitespace with single spaces.
std::string tokenize_13a(std::string_view line);

// What sacreBLEU scores a segment as: lower-cased (if asked), right-stripped, tokenized by 13a.
std::string preprocess_bleu_segment(std::string_view segment, const BleuOptions& options = {});

// Sufficient statistics: of one line, or summed over a corpus.
struct BleuStats {
  int64_t sys_len = 0, ref_len = 0;  // hypothesis tokens; the chosen references' tokens
  std::vector<int64_t> counts;       // matched n-grams of order 1..N (clipped by the references)
  std::vector<int64_t> totals;       // hypothesis n-grams of order 1..N
  BleuStats& operator+=(const BleuStats& other);
};

// Every line's statistics. `references[k][i]` is the k-th reference of hypothesis i (sacreBLEU's layout:
// K reference streams, each as long as the hypotheses). Errors (sru::Error): no reference stream, a
// stream of another length, text that is not UTF-8 (naming the stream and line), max_ngram_order < 1.
std::vector<BleuStats> bleu_line_statistics(const std::vector<std::string>& hypotheses,
                                            const std::vector<std::vector<std::string>>& references,
                                            const BleuOptions& options = {});
// Their sum: the corpus statistics.
BleuStats bleu_statistics(const std::vector<std::string>& hypotheses,
                          const std::vector<std::vector<std::string>>& references, const BleuOptions& options = {});

struct BleuScore {
  double score = 0;                // 0..100
  std::vector<int64_t> counts, totals;
  std::vector<double> precisions;  // percentages, smoothed as scored; 0 past an order with no n-gram
  double bp = 0;                   // brevity penalty
  int64_t sys_len = 0, ref_len = 0;
  std::string signature;           // e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
};

// sacreBLEU's BLEU.compute_bleu with smoothing "exp" and no effective order, from summed statistics
// (their counts/totals must have max_ngram_order entries). `signature` is left empty.
BleuScore bleu_from_statistics(const BleuStats& stats);

// The signature sacreBLEU 2.6.0 prints for these settings and K references.
std::string bleu_signature(int num_references, const BleuOptions& options = {});

// Corpus BLEU with its signature (K = references.size()).
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references, const BleuOptions& options = {});

// sacreBLEU's text line for a score, e.g. "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944
// hyp_len = 17 ref_len = 18)", with "BLEU|<signature> = ..." when with_signature (as its CLI prints
// it with -f text); `width` is the score's decimals (sacreBLEU -w).
std::string format_bleu(const BleuScore& score, int width = 2, bool with_signature = false);

// A hypothesis file and its reference files, read as sacreBLEU's CLI reads them: UTF-8 text, one segment
// a line (split at "\n" only; a last line without "\n" counts; .gz files are decompressed). Errors
// (sru::Error): a file that cannot be read; invalid UTF-8 (the file and line); a reference file whose
// line count differs from the hypotheses' (both files and both counts); no reference file.
struct BleuCorpus {
  std::vector<std::string> hypotheses;
  std::vector<std::vector<std::string>> references;  // [reference file][line]
};
BleuCorpus read_bleu_files(const std::string& hypothesis_path, const std::vector<std::string>& reference_paths);
BleuScore corpus_bleu_files(const std::string& hypothesis_path, const std::vector<std::string>& reference_paths,
                            const BleuOptions& options = {});

}  // namespace sru::data
