// Byte files: plain files and zip archives (stored and deflated members), with clear errors.
#include <gtest/gtest.h>

#include <zlib.h>

#include <cstdio>
#include <fstream>

#include "data/byte_file.h"
#include "testing.h"

using namespace sru;
using sru::testing::error_of;

namespace {

void put16(std::string& s, uint32_t v) { s += static_cast<char>(v & 0xff), s += static_cast<char>((v >> 8) & 0xff); }
void put32(std::string& s, uint32_t v) { put16(s, v & 0xffff), put16(s, v >> 16); }

// A one-member zip archive of `content` named `name`, stored (method 0) or deflated (8).
std::string make_zip(const std::string& name, const std::string& content, bool compress) {
  std::string data = content;
  if (compress) {
    z_stream z{};
    deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    std::string out(deflateBound(&z, content.size()), '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(content.data()));
    z.avail_in = static_cast<uInt>(content.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    data = out;
  }
  const uint32_t crc = crc32(0, reinterpret_cast<const Bytef*>(content.data()), static_cast<uInt>(content.size()));
  std::string zip;
  put32(zip, 0x04034b50); put16(zip, 20); put16(zip, 0); put16(zip, compress ? 8 : 0); put32(zip, 0);
  put32(zip, crc); put32(zip, static_cast<uint32_t>(data.size())); put32(zip, static_cast<uint32_t>(content.size()));
  put16(zip, static_cast<uint32_t>(name.size())); put16(zip, 0);
  zip += name + data;
  const uint32_t central = static_cast<uint32_t>(zip.size());
  put32(zip, 0x02014b50); put16(zip, 20); put16(zip, 20); put16(zip, 0); put16(zip, compress ? 8 : 0); put32(zip, 0);
  put32(zip, crc); put32(zip, static_cast<uint32_t>(data.size())); put32(zip, static_cast<uint32_t>(content.size()));
  put16(zip, static_cast<uint32_t>(name.size())); put16(zip, 0); put16(zip, 0); put16(zip, 0); put16(zip, 0);
  put32(zip, 0); put32(zip, 0);
  zip += name;
  const uint32_t central_size = static_cast<uint32_t>(zip.size()) - central;
  put32(zip, 0x06054b50); put16(zip, 0); put16(zip, 0); put16(zip, 1); put16(zip, 1);
  put32(zip, central_size); put32(zip, central); put16(zip, 0);
  return zip;
}

std::string temp_file(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

}  // namespace

TEST(ByteFile, PlainStoredAndDeflatedZip) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "<page>" + std::to_string(i * 7919 % 1000) + "</page>\n";
  EXPECT_EQ(data::read_byte_file(temp_file("plain.txt", text)), text);
  EXPECT_EQ(data::read_byte_file(temp_file("stored.zip", make_zip("stored", text, false))), text);
  const std::string packed = make_zip("enwik8", text, true);
  EXPECT_LT(packed.size(), text.size() / 3) << "really deflated";
  EXPECT_EQ(data::read_byte_file(temp_file("enwik8.zip", packed)), text);
}

TEST(ByteFile, BrokenArchivesAreClearErrors) {
  const std::string zip = make_zip("enwik8", std::string(10000, 'a'), true);
  EXPECT_NE(error_of([&] { data::read_byte_file(temp_file("junk.zip", "not a zip file at all........")); })
                .find("is not a zip archive"), std::string::npos);
  std::string corrupt = zip;
  corrupt[40] ^= 0x55;  // inside the deflated data
  EXPECT_NE(error_of([&] { data::read_byte_file(temp_file("bad.zip", corrupt)); }).find("corrupted"), std::string::npos);
  EXPECT_NE(error_of([] { data::read_byte_file("/no/such/enwik8.zip"); }).find("cannot open data file"),
            std::string::npos);
}
