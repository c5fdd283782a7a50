// Streaming readers for word2vec binary and GloVe / fastText / word2vec text vectors.
#include "data/word_vectors.h"

#include <cmath>
#include <cstring>
#include <string_view>

#include "core/error.h"
#include "data/line_reader.h"

namespace sru::data {

namespace {

std::vector<std::string_view> split_spaces(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

bool parse_int(std::string_view s, int64_t& v) {
  if (s.empty() || s.size() > 18) return false;
  v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  return true;
}

bool parse_float(std::string_view s, float& v) {
  char buf[64];
  if (s.empty() || s.size() >= sizeof buf) return false;
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = '\0';
  char* end = nullptr;
  v = std::strtof(buf, &end);
  return end == buf + s.size();
}

void normalise(std::vector<float>& v) {
  double sq = 0;
  for (float x : v) sq += static_cast<double>(x) * x;
  if (sq > 0) {
    const float inv = static_cast<float>(1.0 / std::sqrt(sq));
    for (float& x : v) x *= inv;
  }
}

// "count dim" (word2vec and fastText headers).
bool parse_header(const std::string& line, int64_t& count, int64_t& dim) {
  const auto f = split_spaces(line);
  return f.size() == 2 && parse_int(f[0], count) && parse_int(f[1], dim) && dim > 0;
}

void keep(WordVectors& out, std::string word, std::vector<float>&& v, bool unit) {
  if (unit) normalise(v);
  out.vectors.emplace(std::move(word), std::move(v));
}

WordVectors read_text(const std::string& path, const std::unordered_set<std::string>& wanted, bool unit) {
  LineReader in(path);
  WordVectors out;
  std::string line;
  bool first = true;
  while (in.next(line)) {
    if (line.empty()) continue;
    if (first) {
      first = false;
      int64_t count = 0, dim = 0;
      if (parse_header(line, count, dim)) {
        out.dim = dim;
        continue;
      }
      out.dim = static_cast<int64_t>(split_spaces(line).size()) - 1;
      SRU_CHECK(out.dim > 0, path, ":", in.line_number(), ": expected a word and its vector values");
    }
    const auto f = split_spaces(line);
    const int64_t n = static_cast<int64_t>(f.size());
    SRU_CHECK(n > out.dim, path, ":", in.line_number(), ": expected a word and ", out.dim, " values, found ", n,
              " fields");
    ++out.rows_read;
    // The word is everything before the last D fields (it may contain spaces).
    const size_t word_end = static_cast<size_t>(f[n - out.dim - 1].data() + f[n - out.dim - 1].size() - line.data());
    const std::string word = line.substr(static_cast<size_t>(f[0].data() - line.data()), word_end - (f[0].data() - line.data()));
    if (!wanted.count(word) || out.vectors.count(word)) continue;
    std::vector<float> v(static_cast<size_t>(out.dim));
    for (int64_t j = 0; j < out.dim; ++j)
      SRU_CHECK(parse_float(f[n - out.dim + j], v[j]), path, ":", in.line_number(), ": '",
                std::string(f[n - out.dim + j]), "' is not a number (value ", j + 1, " of word '", word, "')");
    keep(out, word, std::move(v), unit);
  }
  SRU_CHECK(out.dim > 0, "'", path, "' holds no word vectors");
  return out;
}

WordVectors read_word2vec_binary(const std::string& path, const std::unordered_set<std::string>& wanted, bool unit) {
  LineReader in(path);
  WordVectors out;
  std::string header, word;
  int64_t count = 0;
  SRU_CHECK(in.next(header) && parse_header(header, count, out.dim), path,
            ": not a word2vec binary file (the first line must be \"count dimension\")");
  // Published vectors have at most a few thousand dimensions; a larger header is a damaged file, not a
  // request for terabytes.
  SRU_CHECK(out.dim <= (int64_t{1} << 20), path, ": dimension ", out.dim, " in the header is implausible (at most ",
            int64_t{1} << 20, "): not a word2vec binary file?");
  std::vector<char> raw(static_cast<size_t>(out.dim) * 4);
  for (int64_t i = 0; i < count; ++i) {
    SRU_CHECK(in.read_until(' ', word), path, ": ends after ", i, " of ", count, " vectors");
    while (!word.empty() && (word.front() == '\n' || word.front() == '\r')) word.erase(0, 1);
    SRU_CHECK(in.read_exact(raw.data(), raw.size()), path, ": truncated in the vector of word ", i + 1, " ('", word, "')");
    ++out.rows_read;
    if (!wanted.count(word) || out.vectors.count(word)) continue;
    std::vector<float> v(static_cast<size_t>(out.dim));
    for (int64_t j = 0; j < out.dim; ++j) {
      const uint32_t bits = static_cast<uint32_t>(static_cast<unsigned char>(raw[4 * j])) |
                            static_cast<uint32_t>(static_cast<unsigned char>(raw[4 * j + 1])) << 8 |
                            static_cast<uint32_t>(static_cast<unsigned char>(raw[4 * j + 2])) << 16 |
                            static_cast<uint32_t>(static_cast<unsigned char>(raw[4 * j + 3])) << 24;
      std::memcpy(&v[j], &bits, 4);
      SRU_CHECK(std::isfinite(v[j]), path, ": the vector of word '", word, "' holds a non-finite value "
                "(is this a word2vec binary file? use format text for text files)");
    }
    keep(out, word, std::move(v), unit);
  }
  return out;
}

}  // namespace

WordVectors load_word_vectors(const std::string& path, const std::unordered_set<std::string>& wanted,
                              const std::string& format, bool unit_normalise) {
  std::string f = format;
  if (f == "auto") f = path.ends_with(".bin") || path.ends_with(".bin.gz") ? "word2vec" : "text";
  if (f == "word2vec") return read_word2vec_binary(path, wanted, unit_normalise);
  SRU_CHECK(f == "text", "unknown word vector format '", format, "' (auto, text or word2vec)");
  return read_text(path, wanted, unit_normalise);
}

}  // namespace sru::data
