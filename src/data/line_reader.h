// Reads a text file line by line without loading it whole, so multi-GB files (pretrained word
// vectors) stream in constant memory. Plain files, gzip (.gz) and zip (.zip: the archive's first
// member, deflated or stored, ZIP64 sizes included) are read transparently. Bytes are passed
// through as they are (no encoding is assumed); "\r\n" line ends lose their "\r".
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace sru::data {

// A source of raw bytes.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to n bytes into buf; returns how many (0 at the end). Throws sru::Error on corrupt data.
  virtual size_t read(char* buf, size_t n) = 0;
};

// Opens `path` as a byte source (plain, .gz or .zip by its name). Errors name the path.
std::unique_ptr<ByteSource> open_byte_source(const std::string& path);
// The member of zip archive `path` named `member` (or whose file name is `member`, or the archive's only
// member), found through the central directory (ZIP64 included), streamed. Errors name the path.
std::unique_ptr<ByteSource> open_zip_member(const std::string& path, const std::string& member);

class LineReader {
 public:
  explicit LineReader(const std::string& path);
  // The next line without its line end; false at the end of the file.
  bool next(std::string& line);
  // Reads exactly n raw bytes (for binary formats mixing text and data); false if the file ends first.
  bool read_exact(char* out, size_t n);
  // Reads bytes up to (not including) `delimiter`, which is consumed; false at the end of the file.
  bool read_until(char delimiter, std::string& out);
  int64_t line_number() const { return line_number_; }  // 1-based number of the last line returned
  const std::string& path() const { return path_; }

 private:
  bool fill();
  std::string path_;
  std::unique_ptr<ByteSource> source_;
  std::string buffer_;
  size_t pos_ = 0;
  int64_t line_number_ = 0;
};

}  // namespace sru::data
