// Streaming byte sources (plain, gzip, zip member) and the line reader on top of them.
#include "data/line_reader.h"

#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace sru::data {

namespace {

uint64_t little_endian(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Plain files and gzip streams: zlib's gzread passes uncompressed files through unchanged.
class GzipSource : public ByteSource {
 public:
  explicit GzipSource(const std::string& path) : path_(path) {
    file_ = gzopen(path.c_str(), "rb");
    SRU_CHECK(file_ != nullptr, "cannot open '", path, "'");
    gzbuffer(file_, 1 << 18);
  }
  ~GzipSource() override { gzclose(file_); }
  size_t read(char* buf, size_t n) override {
    const int got = gzread(file_, buf, static_cast<unsigned>(n));
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(file_, &code);
      SRU_FAIL("'", path_, "': read error (", msg ? msg : "zlib", "): the file is corrupted or truncated");
    }
    return static_cast<size_t>(got);
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
};

// The first member of a zip archive, streamed: deflate needs no sizes (the stream ends itself),
// stored members take theirs from the local header or its ZIP64 extra field.
class ZipMemberSource : public ByteSource {
 public:
  explicit ZipMemberSource(const std::string& path) : path_(path), in_(1 << 18) {
    file_ = std::fopen(path.c_str(), "rb");
    SRU_CHECK(file_ != nullptr, "cannot open '", path, "'");
    unsigned char h[30];
    SRU_CHECK(std::fread(h, 1, 30, file_) == 30 && little_endian(h, 4) == 0x04034b50, "'", path,
              "' is not a zip archive (no local file header at its start)");
    const unsigned flags = static_cast<unsigned>(little_endian(h + 6, 2));
    method_ = static_cast<unsigned>(little_endian(h + 8, 2));
    uint64_t stored_size = little_endian(h + 22, 4);
    const size_t name_len = little_endian(h + 26, 2), extra_len = little_endian(h + 28, 2);
    std::vector<unsigned char> name_extra(name_len + extra_len);
    SRU_CHECK(std::fread(name_extra.data(), 1, name_extra.size(), file_) == name_extra.size(), "'", path,
              "': truncated zip header");
    if (stored_size == 0xffffffffu) {  // ZIP64: the real sizes are in extra field 0x0001
      for (size_t at = name_len; at + 4 <= name_extra.size();) {
        const uint64_t id = little_endian(&name_extra[at], 2), len = little_endian(&name_extra[at + 2], 2);
        if (id == 1 && len >= 8) stored_size = little_endian(&name_extra[at + 4], 8);
        at += 4 + len;
      }
    }
    if (method_ == 0) {
      SRU_CHECK(!(flags & 8), "'", path, "': stored zip member without sizes in its header is not supported");
      remaining_ = stored_size;
    } else {
      SRU_CHECK(method_ == 8, "'", path, "': zip compression method ", method_, " is not supported (stored and deflate are)");
      SRU_CHECK(inflateInit2(&z_, -MAX_WBITS) == Z_OK, "zlib: cannot initialise inflate");
      inflating_ = true;
    }
  }
  ~ZipMemberSource() override {
    if (inflating_) inflateEnd(&z_);
    std::fclose(file_);
  }
  size_t read(char* buf, size_t n) override {
    if (method_ == 0) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(n, remaining_));
      const size_t got = std::fread(buf, 1, want, file_);
      SRU_CHECK(got == want, "'", path_, "' is truncated (the zip member ends early)");
      remaining_ -= got;
      return got;
    }
    if (done_) return 0;
    z_.next_out = reinterpret_cast<Bytef*>(buf);
    z_.avail_out = static_cast<uInt>(n);
    while (z_.avail_out == n) {
      if (z_.avail_in == 0) {
        const size_t got = std::fread(in_.data(), 1, in_.size(), file_);
        SRU_CHECK(got > 0, "'", path_, "' is truncated (the compressed data ends early)");
        z_.next_in = in_.data();
        z_.avail_in = static_cast<uInt>(got);
      }
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        done_ = true;
        break;
      }
      SRU_CHECK(rc == Z_OK || rc == Z_BUF_ERROR, "'", path_, "': the compressed data is corrupted (zlib ", rc, ")");
    }
    return n - z_.avail_out;
  }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  unsigned method_ = 0;
  uint64_t remaining_ = 0;
  z_stream z_{};
  bool inflating_ = false, done_ = false;
  std::vector<unsigned char> in_;
};

}  // namespace

std::unique_ptr<ByteSource> open_byte_source(const std::string& path) {
  if (path.ends_with(".zip")) return std::make_unique<ZipMemberSource>(path);
  return std::make_unique<GzipSource>(path);
}

LineReader::LineReader(const std::string& path) : path_(path), source_(open_byte_source(path)) {}

bool LineReader::fill() {
  if (pos_ > 0) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  const size_t old = buffer_.size(), chunk = 1 << 18;
  buffer_.resize(old + chunk);
  const size_t got = source_->read(buffer_.data() + old, chunk);
  buffer_.resize(old + got);
  return got > 0;
}

bool LineReader::read_until(char delimiter, std::string& out) {
  for (size_t scanned = pos_;;) {
    const size_t at = buffer_.find(delimiter, scanned);
    if (at != std::string::npos) {
      out.assign(buffer_, pos_, at - pos_);
      pos_ = at + 1;
      return true;
    }
    scanned = buffer_.size() - pos_;  // offsets are relative to pos_ = 0 after fill()
    if (!fill()) {
      if (pos_ >= buffer_.size()) return false;
      out.assign(buffer_, pos_, std::string::npos);  // a last line without a line end
      pos_ = buffer_.size();
      return true;
    }
  }
}

bool LineReader::next(std::string& line) {
  if (!read_until('\n', line)) return false;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  ++line_number_;
  return true;
}

bool LineReader::read_exact(char* out, size_t n) {
  while (buffer_.size() - pos_ < n)
    if (!fill()) return false;
  std::memcpy(out, buffer_.data() + pos_, n);
  pos_ += n;
  return true;
}

}  // namespace sru::data
