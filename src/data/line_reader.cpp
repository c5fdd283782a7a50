// Streaming byte sources (plain, gzip, zip member: the first, or one named through the central
// directory) and the line reader on top of them.
#include "data/line_reader.h"

#include <zlib.h>

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <filesystem>
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
    // A stream cut short reads as a clean end (0) with Z_BUF_ERROR set, not as an error.
    int end_code = Z_OK;
    if (got == 0 && n > 0) gzerror(file_, &end_code);
    if (got < 0 || end_code == Z_BUF_ERROR) {
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

// A member of a zip archive as its central directory describes it.
struct ZipEntry {
  uint64_t local_header = 0;
  uint64_t size = 0;  // uncompressed
};

// Reads n bytes at `offset` of the file; throws naming the path when the file is shorter.
std::vector<unsigned char> read_at(std::FILE* f, uint64_t offset, size_t n, const std::string& path) {
  std::vector<unsigned char> out(n);
  SRU_CHECK(std::fseek(f, static_cast<long>(offset), SEEK_SET) == 0 && std::fread(out.data(), 1, n, f) == n, "'",
            path, "' is truncated or corrupted (its zip directory points past the end)");
  return out;
}

// Finds the member named `wanted` (or the file name part of a member's path equal to it, or the only
// member) in the central directory, ZIP64 records included. Throws naming the path and the members.
ZipEntry find_zip_member(std::FILE* f, const std::string& path, const std::string& wanted) {
  SRU_CHECK(std::fseek(f, 0, SEEK_END) == 0, "cannot read '", path, "'");
  const uint64_t file_size = static_cast<uint64_t>(std::ftell(f));
  SRU_CHECK(file_size >= 22, "'", path, "' is too short to be a zip archive");
  // End of central directory: signature 0x06054b50 within the last 64 KiB + 22 bytes.
  const uint64_t tail_size = std::min<uint64_t>(file_size, 65557);
  const std::vector<unsigned char> tail = read_at(f, file_size - tail_size, tail_size, path);
  int64_t eocd = -1;
  for (int64_t i = static_cast<int64_t>(tail_size) - 22; i >= 0 && eocd < 0; --i)
    if (little_endian(&tail[i], 4) == 0x06054b50) eocd = i;
  SRU_CHECK(eocd >= 0, "'", path, "' is not a zip archive (no end-of-central-directory record)");
  uint64_t entries = little_endian(&tail[eocd + 10], 2), cd_size = little_endian(&tail[eocd + 12], 4);
  uint64_t cd_offset = little_endian(&tail[eocd + 16], 4);
  if ((entries == 0xffff || cd_offset == 0xffffffffu) && eocd >= 20 && little_endian(&tail[eocd - 20], 4) == 0x07064b50) {
    const std::vector<unsigned char> z64 = read_at(f, little_endian(&tail[eocd - 12], 8), 56, path);
    SRU_CHECK(little_endian(z64.data(), 4) == 0x06064b50, "'", path, "': corrupted ZIP64 directory record");
    entries = little_endian(&z64[32], 8);
    cd_size = little_endian(&z64[40], 8);
    cd_offset = little_endian(&z64[48], 8);
  }
  SRU_CHECK(cd_size <= file_size && cd_offset <= file_size - cd_size, "'", path, "': corrupted central directory");
  const std::vector<unsigned char> cd = read_at(f, cd_offset, static_cast<size_t>(cd_size), path);
  std::string names;
  bool found = false;
  ZipEntry chosen;
  for (uint64_t e = 0, at = 0; e < entries; ++e) {
    SRU_CHECK(at + 46 <= cd.size() && little_endian(&cd[at], 4) == 0x02014b50, "'", path, "': corrupted central directory");
    const size_t name_len = little_endian(&cd[at + 28], 2), extra_len = little_endian(&cd[at + 30], 2);
    const size_t comment_len = little_endian(&cd[at + 32], 2);
    SRU_CHECK(at + 46 + name_len + extra_len <= cd.size(), "'", path, "': corrupted central directory");
    const std::string name(reinterpret_cast<const char*>(&cd[at + 46]), name_len);
    names += (names.empty() ? "" : ", ") + name;
    if (!name.ends_with("/") &&
        (entries == 1 || name == wanted || std::filesystem::path(name).filename().string() == wanted)) {
      ZipEntry entry{little_endian(&cd[at + 42], 4), little_endian(&cd[at + 24], 4)};
      const uint64_t packed = little_endian(&cd[at + 20], 4);
      // ZIP64 extra field (id 1): the 8-byte values of those fields that are 0xffffffff, in this order.
      for (size_t x = at + 46 + name_len, end = x + extra_len; x + 4 <= end;) {
        const uint64_t id = little_endian(&cd[x], 2), len = little_endian(&cd[x + 2], 2);
        if (id == 1) {
          // The field's values end at its stated length or at the entry's extra data, whichever is first.
          const size_t field_end = std::min<size_t>(x + 4 + len, end);
          size_t v = x + 4;
          if (entry.size == 0xffffffffu && v + 8 <= field_end) entry.size = little_endian(&cd[v], 8), v += 8;
          if (packed == 0xffffffffu && v + 8 <= field_end) v += 8;
          if (entry.local_header == 0xffffffffu && v + 8 <= field_end) entry.local_header = little_endian(&cd[v], 8);
        }
        x += 4 + len;
      }
      chosen = entry;
      found = true;
    }
    at += 46 + name_len + extra_len + comment_len;
  }
  SRU_CHECK(found, "'", path, "': no member named '", wanted, "' (members: ", names, ")");
  return chosen;
}

// A member of a zip archive, streamed: the first one, or the one `member` names (found through the
// central directory). Deflate needs no sizes (the stream ends itself); stored members take theirs
// from the local header, its ZIP64 extra field, or the central directory.
class ZipMemberSource : public ByteSource {
 public:
  ZipMemberSource(const std::string& path, const std::string& member) : path_(path), in_(1 << 18) {
    file_ = std::fopen(path.c_str(), "rb");
    SRU_CHECK(file_ != nullptr, "cannot open '", path, "'");
    try {
      open_member(member);
    } catch (...) {  // the destructor does not run for a constructor that throws
      std::fclose(file_);
      throw;
    }
  }

 private:
  void open_member(const std::string& member) {
    const std::string& path = path_;
    ZipEntry entry;
    bool from_directory = false;
    if (!member.empty()) {
      entry = find_zip_member(file_, path, member);
      from_directory = true;
      SRU_CHECK(std::fseek(file_, static_cast<long>(entry.local_header), SEEK_SET) == 0, "cannot read '", path, "'");
    }
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
        if (id == 1 && len >= 8 && at + 12 <= name_extra.size()) stored_size = little_endian(&name_extra[at + 4], 8);
        at += 4 + len;
      }
    }
    if (method_ == 0) {
      if (from_directory) stored_size = entry.size;  // also right when the local header leaves it out
      SRU_CHECK(from_directory || !(flags & 8), "'", path,
                "': stored zip member without sizes in its header is not supported");
      remaining_ = stored_size;
    } else {
      SRU_CHECK(method_ == 8, "'", path, "': zip compression method ", method_, " is not supported (stored and deflate are)");
      SRU_CHECK(inflateInit2(&z_, -MAX_WBITS) == Z_OK, "zlib: cannot initialise inflate");
      inflating_ = true;
    }
  }

 public:
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
  if (path.ends_with(".zip")) return std::make_unique<ZipMemberSource>(path, "");
  return std::make_unique<GzipSource>(path);
}

std::unique_ptr<ByteSource> open_zip_member(const std::string& path, const std::string& member) {
  return std::make_unique<ZipMemberSource>(path, member);
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
