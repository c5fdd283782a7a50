// Parallel text for translation: two UTF-8 files (plain, .gz or .zip), one sentence a line, line i of the
// source translating line i of the target (Multi30k, WMT). Lines are kept in one buffer per side and
// token ids in one array per side, so millions of pairs cost their bytes plus 8 bytes an offset, not a
// std::string or std::vector each.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sru::data {

// Lines of text in one buffer: line i is bytes [offsets[i], offsets[i + 1]).
class TextLines {
 public:
  int64_t size() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  bool empty() const { return size() == 0; }
  std::string_view operator[](int64_t i) const {
    return std::string_view(bytes_).substr(static_cast<size_t>(offsets_[i]),
                                           static_cast<size_t>(offsets_[i + 1] - offsets_[i]));
  }
  void push_back(std::string_view line);
  void reserve_bytes(int64_t n) { bytes_.reserve(static_cast<size_t>(n)); }
  int64_t total_bytes() const { return static_cast<int64_t>(bytes_.size()); }

 private:
  std::string bytes_;
  std::vector<int64_t> offsets_{0};
};

// Token-id sequences in one array: sequence i is ids [offsets[i], offsets[i + 1]).
class TokenSequences {
 public:
  int64_t size() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  std::span<const int32_t> operator[](int64_t i) const {
    return std::span<const int32_t>(ids_).subspan(static_cast<size_t>(offsets_[i]),
                                                  static_cast<size_t>(offsets_[i + 1] - offsets_[i]));
  }
  int64_t length(int64_t i) const { return offsets_[i + 1] - offsets_[i]; }
  std::vector<int64_t> lengths() const;  // length(i) for every i, as the batching functions take them
  void push_back(std::span<const int32_t> ids);
  void append(const TokenSequences& other);  // other's sequences after this one's
  int64_t total_tokens() const { return static_cast<int64_t>(ids_.size()); }

 private:
  std::vector<int32_t> ids_;
  std::vector<int64_t> offsets_{0};
};

struct ParallelReadOptions {
  // false (the default): an empty line (nothing but spaces and tabs) on either side is an error naming
  // the file and line. true: such pairs are left out, and counted (ParallelText::skipped_lines).
  bool skip_empty = false;
  std::string skip_empty_key = "skip_empty";  // the caller's name for skip_empty, for the error message
};

struct ParallelText {
  TextLines source, target;           // pair i is (source[i], target[i])
  std::vector<int64_t> skipped_lines;  // 1-based line numbers of the pairs left out by skip_empty
  int64_t size() const { return source.size(); }
};

// Reads a sentence-aligned pair of files. Each line is checked to be well-formed UTF-8 (no overlong
// forms, surrogates or code points above U+10FFFF); a UTF-8 byte-order mark at the start of a file
// and the "\r" of "\r\n" line ends are dropped; the text is otherwise kept as it is. Errors
// (sru::Error): a missing file (named, with its side), files with different numbers of lines (both
// files and both counts), invalid UTF-8 (file, line and byte), an empty line (file and line; unless
// skip_empty), no pairs at all, and the gzip/zip errors of line_reader.h.
ParallelText read_parallel(const std::string& source_path, const std::string& target_path,
                           const ParallelReadOptions& options = {});

// The byte offset of the first byte of `text` that is not part of well-formed UTF-8, or -1 when all is.
int64_t invalid_utf8_offset(std::string_view text);

}  // namespace sru::data
