// Plain and zipped byte files. The zip reader handles what data sets ship: one or a few members,
// stored or deflated (zlib raw inflate), sizes from the central directory (ZIP64 not supported).
#include "data/byte_file.h"

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"

namespace sru::data {

namespace {

uint32_t u32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}
uint16_t u16(const std::string& s, size_t at) {
  return static_cast<uint16_t>(static_cast<unsigned char>(s[at]) | (static_cast<unsigned char>(s[at + 1]) << 8));
}


}  // namespace

std::string unzip_member(const std::string& zip, const std::string& path) {
  // End of central directory: signature 0x06054b50 within the last 64 kB + 22 bytes.
  SRU_CHECK(zip.size() >= 22, "'", path, "' is too short to be a zip archive");
  size_t eocd = std::string::npos;
  for (size_t i = zip.size() - 22 + 1; i-- > 0 && zip.size() - i <= 65557;)
    if (u32(zip, i) == 0x06054b50) {
      eocd = i;
      break;
    }
  SRU_CHECK(eocd != std::string::npos, "'", path, "' is not a zip archive (no end-of-central-directory record)");
  const uint16_t entries = u16(zip, eocd + 10);
  size_t at = u32(zip, eocd + 16);
  const std::string wanted = std::filesystem::path(path).stem().string();
  size_t chosen = std::string::npos;
  uint32_t method = 0, packed = 0, size = 0;
  std::string names;
  for (uint16_t e = 0; e < entries; ++e) {
    SRU_CHECK(at + 46 <= zip.size() && u32(zip, at) == 0x02014b50, "'", path, "': corrupted central directory");
    const uint16_t name_len = u16(zip, at + 28), extra_len = u16(zip, at + 30), comment_len = u16(zip, at + 32);
    const std::string name = zip.substr(at + 46, name_len);
    names += (names.empty() ? "" : ", ") + name;
    if (!name.ends_with("/") && (entries == 1 || name == wanted || std::filesystem::path(name).filename() == wanted)) {
      chosen = u32(zip, at + 42);
      method = u16(zip, at + 10);
      packed = u32(zip, at + 20);
      size = u32(zip, at + 24);
    }
    at += 46 + name_len + extra_len + comment_len;
  }
  SRU_CHECK(chosen != std::string::npos, "'", path, "': no member named '", wanted, "' (members: ", names, ")");
  SRU_CHECK(packed != 0xffffffffu && size != 0xffffffffu, "'", path, "': ZIP64 archives are not supported; unzip it first");
  SRU_CHECK(chosen + 30 <= zip.size() && u32(zip, chosen) == 0x04034b50, "'", path, "': corrupted local header");
  const size_t data_at = chosen + 30 + u16(zip, chosen + 26) + u16(zip, chosen + 28);
  SRU_CHECK(data_at + packed <= zip.size(), "'", path, "' is truncated (member data runs past the end)");
  if (method == 0) return zip.substr(data_at, size);
  SRU_CHECK(method == 8, "'", path, "': compression method ", method, " is not supported (stored and deflate are)");

  std::string out(size, '\0');
  z_stream z{};
  SRU_CHECK(inflateInit2(&z, -MAX_WBITS) == Z_OK, "zlib: cannot initialise inflate");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zip.data() + data_at));
  z.avail_in = packed;
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = size;
  const int rc = inflate(&z, Z_FINISH);
  const uLong produced = z.total_out;
  inflateEnd(&z);
  SRU_CHECK(rc == Z_STREAM_END && produced == size, "'", path, "': the compressed data is corrupted (zlib ", rc, ", ",
            produced, " of ", size, " bytes)");
  return out;
}

std::string read_byte_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SRU_CHECK(in.good(), "cannot open data file '", path, "' (data.path)");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (path.ends_with(".zip")) return unzip_member(bytes, path);
  return bytes;
}

}  // namespace sru::data
