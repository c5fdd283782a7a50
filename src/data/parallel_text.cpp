// Sentence-aligned parallel text (see parallel_text.h).
#include "data/parallel_text.h"

#include <filesystem>
#include <memory>
#include <system_error>

#include "core/error.h"
#include "data/line_reader.h"
#include "data/unicode.h"

namespace sru::data {

void TextLines::push_back(std::string_view line) {
  bytes_.append(line);
  offsets_.push_back(static_cast<int64_t>(bytes_.size()));
}

std::vector<int64_t> TokenSequences::lengths() const {
  std::vector<int64_t> out(static_cast<size_t>(size()));
  for (int64_t i = 0; i < size(); ++i) out[i] = length(i);
  return out;
}

void TokenSequences::push_back(std::span<const int32_t> ids) {
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  offsets_.push_back(static_cast<int64_t>(ids_.size()));
}

void TokenSequences::append(const TokenSequences& other) {
  const int64_t base = static_cast<int64_t>(ids_.size());
  ids_.insert(ids_.end(), other.ids_.begin(), other.ids_.end());
  offsets_.reserve(offsets_.size() + other.offsets_.size() - 1);
  for (size_t i = 1; i < other.offsets_.size(); ++i) offsets_.push_back(base + other.offsets_[i]);
}

int64_t invalid_utf8_offset(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const unicode::Decoded d = unicode::decode_utf8(text, pos);
    if (d.code_point == unicode::kInvalid) return static_cast<int64_t>(pos);
    pos += static_cast<size_t>(d.length);
  }
  return -1;
}

namespace {

bool blank(std::string_view line) { return line.find_first_not_of(" \t\v\f") == std::string_view::npos; }

// One side's file, read line by line with its checks.
class Side {
 public:
  Side(const std::string& path, const char* side) : path_(path), side_(side) {
    std::error_code ec;
    SRU_CHECK(std::filesystem::exists(path, ec), "cannot read the ", side, " text '", path, "': no such file");
    SRU_CHECK(!std::filesystem::is_directory(path, ec), "cannot read the ", side, " text '", path,
              "': it is a directory");
    reader_ = std::make_unique<LineReader>(path);
  }
  // The next line, checked (UTF-8; its BOM dropped on line 1); false at the end of the file.
  bool next(std::string& line) {
    if (!reader_->next(line)) return false;
    if (reader_->line_number() == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);
    const int64_t bad = invalid_utf8_offset(line);
    SRU_CHECK(bad < 0, "'", path_, "':", reader_->line_number(), ": invalid UTF-8 (byte ", bad + 1, " of the line is 0x",
              hex(static_cast<unsigned char>(line[static_cast<size_t>(bad)])), "); the ", side_,
              " text must be UTF-8");
    return true;
  }
  // Counts the lines left (for the message about different line counts).
  int64_t count_rest() {
    std::string line;
    while (reader_->next(line)) {
    }
    return reader_->line_number();
  }
  int64_t line_number() const { return reader_->line_number(); }
  const std::string& path() const { return path_; }
  const char* side() const { return side_; }
  // Plain files: their size, to reserve the text buffer once; 0 for compressed ones.
  int64_t plain_size() const {
    if (path_.ends_with(".gz") || path_.ends_with(".zip")) return 0;
    std::error_code ec;
    const auto n = std::filesystem::file_size(path_, ec);
    return ec ? 0 : static_cast<int64_t>(n);
  }

 private:
  static std::string hex(unsigned char b) {
    const char* digits = "0123456789ABCDEF";
    return {digits[b >> 4], digits[b & 15]};
  }
  std::string path_;
  const char* side_;
  std::unique_ptr<LineReader> reader_;
};

}  // namespace

ParallelText read_parallel(const std::string& source_path, const std::string& target_path,
                           const ParallelReadOptions& options) {
  Side src(source_path, "source"), tgt(target_path, "target");
  ParallelText out;
  out.source.reserve_bytes(src.plain_size());
  out.target.reserve_bytes(tgt.plain_size());
  std::string s, t;
  for (;;) {
    const bool has_s = src.next(s), has_t = tgt.next(t);
    if (!has_s || !has_t) {
      if (has_s || has_t) {
        const int64_t ns = has_s ? src.count_rest() : src.line_number();
        const int64_t nt = has_t ? tgt.count_rest() : tgt.line_number();
        SRU_FAIL("parallel text of different lengths: the source '", source_path, "' has ", ns,
                 " lines but the target '", target_path, "' has ", nt,
                 " (line i of one file must translate line i of the other)");
      }
      break;
    }
    const bool empty_s = blank(s), empty_t = blank(t);
    if (empty_s || empty_t) {
      if (options.skip_empty) {
        out.skipped_lines.push_back(src.line_number());
        continue;
      }
      const Side& side = empty_s ? src : tgt;
      SRU_FAIL("'", side.path(), "':", side.line_number(), ": empty line (the pair at line ", side.line_number(),
               " has no ", side.side(), " sentence); remove the pair from both files or set ", options.skip_empty_key,
               " to leave such pairs out");
    }
    out.source.push_back(s);
    out.target.push_back(t);
  }
  SRU_CHECK(out.size() > 0, "no sentence pairs in '", source_path, "' and '", target_path, "'",
            out.skipped_lines.empty() ? "" : " (every pair has an empty side)");
  return out;
}

}  // namespace sru::data
