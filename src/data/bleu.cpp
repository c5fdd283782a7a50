// sacreBLEU 2.6.0's default corpus BLEU (metrics/bleu.py, tokenizers/tokenizer_13a.py and
// tokenizer_re.py, metrics/helpers.py). Each step follows the Python code's semantics; the comments
// name the Python expression a step reproduces.
#include "data/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <unordered_map>

#include "core/error.h"
#include "data/line_reader.h"
#include "data/unicode.h"

namespace sru::data {

namespace {

// Python's str.replace(old, new): every non-overlapping occurrence, left to right. The patterns are
// ASCII, so working on UTF-8 bytes never cuts a character.
void replace_all(std::string& text, std::string_view old_text, std::string_view new_text) {
  size_t pos = text.find(old_text);
  if (pos == std::string::npos) return;
  std::string out;
  out.reserve(text.size());
  size_t from = 0;
  for (; pos != std::string::npos; pos = text.find(old_text, from)) {
    out.append(text, from, pos - from);
    out.append(new_text);
    from = pos + old_text.size();
  }
  out.append(text, from, std::string::npos);
  text = std::move(out);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }  // re's [0-9]: ASCII digits only
bool is_period_or_comma(char c) { return c == '.' || c == ','; }

// 13a's first rule, re.sub(r'([\{-\~\[-\` -\&\(-\+\:-\@\/])', r' \1 ', line): the ASCII characters
// { | } ~ [ \ ] ^ _ ` space ! " # $ % & ( ) * + : ; < = > ? @ / get a space on each side.
bool is_13a_punctuation(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') ||
         (c >= ':' && c <= '@') || c == '/';
}

// re.sub of a two-character pattern (first class, second class) with a replacement of the two groups
// and spaces: matches are found left to right in the original string and do not overlap. Every class
// here either names ASCII characters or is [^0-9] next to an ASCII one, so scanning UTF-8 bytes gives
// the code-point result: a match's [^0-9] byte is always a whole character's first (rule 3) or last
// (rule 2) byte, the other bytes of that character being copied unchanged just before or after it.
template <typename First, typename Second>
std::string substitute_pairs(const std::string& text, First first, Second second, const char* before,
                             const char* middle, const char* after) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  size_t i = 0;
  while (i < text.size()) {
    if (i + 1 < text.size() && first(text[i]) && second(text[i + 1])) {
      out += before;
      out += text[i];
      out += middle;
      out += text[i + 1];
      out += after;
      i += 2;
    } else {
      out += text[i++];
    }
  }
  return out;
}

// ' '.join(text.split()): the runs between Python whitespace, one space apart.
std::string join_python_words(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0, start = 0;
  bool in_word = false;
  const auto emit = [&](size_t end) {
    if (!out.empty()) out.push_back(' ');
    out.append(text.substr(start, end - start));
  };
  while (pos < text.size()) {
    const unicode::Decoded d = unicode::decode_utf8(text, pos);
    const bool space = unicode::is_python_space(d.code_point);
    if (space && in_word) emit(pos);
    if (!space && !in_word) start = pos;
    in_word = !space;
    pos += d.length;
  }
  if (in_word) emit(text.size());
  return out;
}

// str.rstrip(): drops trailing Python whitespace.
std::string_view python_rstrip(std::string_view text) {
  size_t pos = 0, end = 0;
  while (pos < text.size()) {
    const unicode::Decoded d = unicode::decode_utf8(text, pos);
    pos += d.length;
    if (!unicode::is_python_space(d.code_point)) end = pos;
  }
  return text.substr(0, end);
}

// The byte offset of the first invalid UTF-8 sequence, or npos. Python strings are always valid, so
// sacreBLEU never sees such text: it is refused rather than scored some other way.
size_t invalid_utf8_at(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const unicode::Decoded d = unicode::decode_utf8(text, pos);
    if (d.code_point == unicode::kInvalid) return pos;
    pos += d.length;
  }
  return std::string_view::npos;
}

// Counter(all n-grams of order 1..max_order) of a tokenized segment, as extract_all_word_ngrams. The
// tokens of a 13a segment are separated by single spaces, so an n-gram is the substring from its first
// token's start to its last token's end (the number of spaces tells the order). The views point into
// `tokenized`, which must outlive the map.
using NgramCounts = std::unordered_map<std::string_view, int64_t>;
int64_t count_ngrams(std::string_view tokenized, int max_order, NgramCounts& counts) {
  std::vector<size_t> starts, ends;
  for (size_t pos = 0; pos < tokenized.size();) {
    size_t end = tokenized.find(' ', pos);
    if (end == std::string_view::npos) end = tokenized.size();
    starts.push_back(pos);
    ends.push_back(end);
    pos = end + 1;
  }
  const int64_t length = static_cast<int64_t>(starts.size());
  for (int64_t n = 1; n <= max_order; ++n)
    for (int64_t i = 0; i + n <= length; ++i)
      ++counts[tokenized.substr(starts[i], ends[i + n - 1] - starts[i])];
  return length;
}

// The references' length closest to the hypothesis length, the shorter on a tie (_get_closest_ref_len).
int64_t closest_reference_length(int64_t hyp_len, const std::vector<int64_t>& ref_lens) {
  int64_t closest_diff = -1, closest_len = -1;
  for (const int64_t ref_len : ref_lens) {
    const int64_t diff = std::abs(hyp_len - ref_len);
    if (closest_diff == -1 || diff < closest_diff) {
      closest_diff = diff;
      closest_len = ref_len;
    } else if (diff == closest_diff && ref_len < closest_len) {
      closest_len = ref_len;
    }
  }
  return closest_len;
}

// Refuses invalid UTF-8, naming where() (e.g. "hypothesis line 3", built only on failure) and the byte.
template <typename Where>
void check_utf8(std::string_view text, Where where) {
  const size_t at = invalid_utf8_at(text);
  SRU_CHECK(at == std::string_view::npos, "BLEU: ", where(), " is not valid UTF-8 (byte ", at + 1, ")");
}

std::string format_fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

}  // namespace

std::string tokenize_13a(std::string_view line) {
  std::string text(line);
  replace_all(text, "<skipped>", "");
  replace_all(text, "-\n", "");
  replace_all(text, "\n", " ");
  if (text.find('&') != std::string::npos) {
    replace_all(text, "&quot;", "\"");
    replace_all(text, "&amp;", "&");
    replace_all(text, "&lt;", "<");
    replace_all(text, "&gt;", ">");
  }
  // The regular expressions run on f' {line} '.
  std::string spaced;
  spaced.reserve(text.size() * 2 + 2);
  spaced.push_back(' ');
  for (const char c : text) {
    if (is_13a_punctuation(c)) {
      spaced.push_back(' ');
      spaced.push_back(c);
      spaced.push_back(' ');
    } else {
      spaced.push_back(c);
    }
  }
  spaced.push_back(' ');
  const auto not_digit = [](char c) { return !is_digit(c); };
  const auto is_dash = [](char c) { return c == '-'; };
  // ([^0-9])([\.,]) -> '\1 \2 ';  ([\.,])([^0-9]) -> ' \1 \2';  ([0-9])(-) -> '\1 \2 '
  spaced = substitute_pairs(spaced, not_digit, is_period_or_comma, "", " ", " ");
  spaced = substitute_pairs(spaced, is_period_or_comma, not_digit, " ", " ", "");
  spaced = substitute_pairs(spaced, is_digit, is_dash, "", " ", " ");
  return join_python_words(spaced);
}

std::string preprocess_bleu_segment(std::string_view segment, const BleuOptions& options) {
  if (!options.lowercase) return tokenize_13a(python_rstrip(segment));
  const std::string lowered = unicode::python_lower(segment);
  return tokenize_13a(python_rstrip(lowered));
}

BleuStats& BleuStats::operator+=(const BleuStats& other) {
  SRU_CHECK(counts.size() == other.counts.size() && totals.size() == other.totals.size(),
            "BLEU: cannot add statistics of different n-gram orders (", counts.size(), " and ", other.counts.size(),
            ")");
  sys_len += other.sys_len;
  ref_len += other.ref_len;
  for (size_t n = 0; n < counts.size(); ++n) {
    counts[n] += other.counts[n];
    totals[n] += other.totals[n];
  }
  return *this;
}

std::vector<BleuStats> bleu_line_statistics(const std::vector<std::string>& hypotheses,
                                            const std::vector<std::vector<std::string>>& references,
                                            const BleuOptions& options) {
  const int order = options.max_ngram_order;
  SRU_CHECK(order >= 1, "BLEU: max_ngram_order must be at least 1, got ", order);
  SRU_CHECK(!references.empty(), "BLEU: no references (give at least one reference per hypothesis)");
  for (size_t k = 0; k < references.size(); ++k)
    SRU_CHECK(references[k].size() == hypotheses.size(), "BLEU: reference set ", k + 1, " has ",
              references[k].size(), " lines but there are ", hypotheses.size(), " hypotheses");

  std::vector<BleuStats> lines(hypotheses.size());
  std::vector<std::string> ref_tokens(references.size());
  std::vector<int64_t> ref_lens(references.size());
  NgramCounts ref_ngrams, this_ref, hyp_ngrams;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    // _extract_reference_info: each n-gram's largest count over the references.
    ref_ngrams.clear();
    for (size_t k = 0; k < references.size(); ++k) {
      check_utf8(references[k][i],
                 [&] { return "reference set " + std::to_string(k + 1) + " line " + std::to_string(i + 1); });
      ref_tokens[k] = preprocess_bleu_segment(references[k][i], options);
      this_ref.clear();
      ref_lens[k] = count_ngrams(ref_tokens[k], order, this_ref);
      for (const auto& [ngram, count] : this_ref) {
        int64_t& best = ref_ngrams[ngram];
        best = std::max(best, count);
      }
    }
    // _compute_segment_statistics.
    check_utf8(hypotheses[i], [&] { return "hypothesis line " + std::to_string(i + 1); });
    const std::string hyp_tokens = preprocess_bleu_segment(hypotheses[i], options);
    hyp_ngrams.clear();
    BleuStats& stats = lines[i];
    stats.sys_len = count_ngrams(hyp_tokens, order, hyp_ngrams);
    stats.ref_len = closest_reference_length(stats.sys_len, ref_lens);
    stats.counts.assign(order, 0);
    stats.totals.assign(order, 0);
    for (const auto& [ngram, count] : hyp_ngrams) {
      const size_t n = static_cast<size_t>(std::count(ngram.begin(), ngram.end(), ' '));
      stats.totals[n] += count;
      const auto ref = ref_ngrams.find(ngram);
      if (ref != ref_ngrams.end()) stats.counts[n] += std::min(count, ref->second);
    }
  }
  return lines;
}

BleuStats bleu_statistics(const std::vector<std::string>& hypotheses,
                          const std::vector<std::vector<std::string>>& references, const BleuOptions& options) {
  BleuStats sum;
  sum.counts.assign(std::max(options.max_ngram_order, 0), 0);
  sum.totals.assign(std::max(options.max_ngram_order, 0), 0);
  for (const BleuStats& line : bleu_line_statistics(hypotheses, references, options)) sum += line;
  return sum;
}

BleuScore bleu_from_statistics(const BleuStats& stats) {
  const size_t order = stats.counts.size();
  SRU_CHECK(order >= 1 && stats.totals.size() == order,
            "BLEU: statistics need counts and totals of the same order >= 1 (got ", stats.counts.size(), " and ",
            stats.totals.size(), ")");
  BleuScore out;
  out.counts = stats.counts;
  out.totals = stats.totals;
  out.sys_len = stats.sys_len;
  out.ref_len = stats.ref_len;
  out.precisions.assign(order, 0.0);
  // bp = exp(1 - ref_len / sys_len) if sys_len < ref_len (0.0 when sys_len is 0), else 1.
  out.bp = 1.0;
  if (stats.sys_len < stats.ref_len)
    out.bp = stats.sys_len > 0
                 ? std::exp(1.0 - static_cast<double>(stats.ref_len) / static_cast<double>(stats.sys_len))
                 : 0.0;
  // "Early stop if there are no matches (#141)".
  bool any_match = false;
  for (const int64_t c : stats.counts) any_match = any_match || c != 0;
  if (!any_match) return out;
  double smooth_mteval = 1.0;
  for (size_t n = 0; n < order; ++n) {
    if (stats.totals[n] == 0) break;
    if (stats.counts[n] == 0) {
      smooth_mteval *= 2;
      out.precisions[n] = 100.0 / (smooth_mteval * static_cast<double>(stats.totals[n]));
    } else {
      out.precisions[n] = 100.0 * static_cast<double>(stats.counts[n]) / static_cast<double>(stats.totals[n]);
    }
  }
  // bp * exp(sum(my_log(p) for p in precisions) / order), summed left to right from 0 as Python's
  // sum() does (3.11; 3.12's compensated float sum can differ in the last bit); my_log(0) = -9999999999.
  double log_sum = 0.0;
  for (const double p : out.precisions) log_sum += p == 0.0 ? -9999999999.0 : std::log(p);
  out.score = out.bp * std::exp(log_sum / static_cast<double>(order));
  return out;
}

std::string bleu_signature(int num_references, const BleuOptions& options) {
  return "nrefs:" + std::to_string(num_references) + "|case:" + (options.lowercase ? "lc" : "mixed") +
         "|eff:no|tok:13a|smooth:exp|version:" + kSacrebleuVersion;
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references, const BleuOptions& options) {
  BleuScore score = bleu_from_statistics(bleu_statistics(hypotheses, references, options));
  score.signature = bleu_signature(static_cast<int>(references.size()), options);
  return score;
}

std::string format_bleu(const BleuScore& score, int width, bool with_signature) {
  std::string out = "BLEU";
  if (with_signature && !score.signature.empty()) out += "|" + score.signature;
  out += " = " + format_fixed(score.score, width) + " ";
  for (size_t n = 0; n < score.precisions.size(); ++n) {
    if (n > 0) out += "/";
    out += format_fixed(score.precisions[n], 1);
  }
  // ratio = sys_len / ref_len if ref_len else 0
  const double ratio =
      score.ref_len != 0 ? static_cast<double>(score.sys_len) / static_cast<double>(score.ref_len) : 0.0;
  out += " (BP = " + format_fixed(score.bp, 3) + " ratio = " + format_fixed(ratio, 3) +
         " hyp_len = " + std::to_string(score.sys_len) + " ref_len = " + std::to_string(score.ref_len) + ")";
  return out;
}

namespace {

std::vector<std::string> read_utf8_lines(const std::string& path) {
  LineReader reader(path);
  std::vector<std::string> lines;
  std::string line;
  while (reader.next(line)) {
    const size_t at = invalid_utf8_at(line);
    SRU_CHECK(at == std::string_view::npos, "'", path, "' line ", reader.line_number(),
              " is not valid UTF-8 (byte ", at + 1, " of the line)");
    lines.push_back(line);
  }
  return lines;
}

}  // namespace

BleuCorpus read_bleu_files(const std::string& hypothesis_path, const std::vector<std::string>& reference_paths) {
  SRU_CHECK(!reference_paths.empty(), "BLEU: no reference file given for '", hypothesis_path, "'");
  BleuCorpus corpus;
  corpus.hypotheses = read_utf8_lines(hypothesis_path);
  for (const std::string& path : reference_paths) {
    corpus.references.push_back(read_utf8_lines(path));
    SRU_CHECK(corpus.references.back().size() == corpus.hypotheses.size(), "BLEU: reference file '", path,
              "' has ", corpus.references.back().size(), " lines but hypothesis file '", hypothesis_path,
              "' has ", corpus.hypotheses.size());
  }
  return corpus;
}

BleuScore corpus_bleu_files(const std::string& hypothesis_path, const std::vector<std::string>& reference_paths,
                            const BleuOptions& options) {
  const BleuCorpus corpus = read_bleu_files(hypothesis_path, reference_paths);
  return corpus_bleu(corpus.hypotheses, corpus.references, options);
}

}  // namespace sru::data
