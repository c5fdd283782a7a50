// Data files: byte files (plain and zip), the streaming line reader (plain, gzip, zip, ZIP64) and
// pretrained word vectors in every supported format, with clear errors.
#include <gtest/gtest.h>

#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "data/byte_file.h"
#include "data/line_reader.h"
#include "data/word_vectors.h"
#include "testing.h"

using namespace sru;
using sru::testing::error_of;
using sru::testing::temp_file;

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

void put64(std::string& s, uint64_t v) { put32(s, static_cast<uint32_t>(v)), put32(s, static_cast<uint32_t>(v >> 32)); }

// A zip archive of stored members; with zip64_directory the end records are the ZIP64 ones (the
// classic record says 0xffff entries at offset 0xffffffff), as tools write for large archives.
std::string make_zip_members(const std::vector<std::pair<std::string, std::string>>& members, bool zip64_directory) {
  std::string zip, central;
  for (const auto& [name, content] : members) {
    const uint32_t offset = static_cast<uint32_t>(zip.size());
    const uint32_t crc = crc32(0, reinterpret_cast<const Bytef*>(content.data()), static_cast<uInt>(content.size()));
    put32(zip, 0x04034b50); put16(zip, 20); put16(zip, 0); put16(zip, 0); put32(zip, 0);
    put32(zip, crc); put32(zip, static_cast<uint32_t>(content.size())); put32(zip, static_cast<uint32_t>(content.size()));
    put16(zip, static_cast<uint32_t>(name.size())); put16(zip, 0);
    zip += name + content;
    put32(central, 0x02014b50); put16(central, 20); put16(central, 20); put16(central, 0); put16(central, 0);
    put32(central, 0); put32(central, crc); put32(central, static_cast<uint32_t>(content.size()));
    put32(central, static_cast<uint32_t>(content.size())); put16(central, static_cast<uint32_t>(name.size()));
    put16(central, 0); put16(central, 0); put16(central, 0); put16(central, 0); put32(central, 0); put32(central, offset);
    central += name;
  }
  const uint64_t cd_offset = zip.size(), cd_size = central.size(), n = members.size();
  zip += central;
  if (zip64_directory) {
    const uint64_t record = zip.size();
    put32(zip, 0x06064b50); put64(zip, 44); put16(zip, 45); put16(zip, 45); put32(zip, 0); put32(zip, 0);
    put64(zip, n); put64(zip, n); put64(zip, cd_size); put64(zip, cd_offset);
    put32(zip, 0x07064b50); put32(zip, 0); put64(zip, record); put32(zip, 1);
  }
  put32(zip, 0x06054b50); put16(zip, 0); put16(zip, 0);
  put16(zip, zip64_directory ? 0xffff : static_cast<uint32_t>(n)); put16(zip, zip64_directory ? 0xffff : static_cast<uint32_t>(n));
  put32(zip, zip64_directory ? 0xffffffffu : static_cast<uint32_t>(cd_size));
  put32(zip, zip64_directory ? 0xffffffffu : static_cast<uint32_t>(cd_offset)); put16(zip, 0);
  return zip;
}

}  // namespace

TEST(ByteFile, MemberChosenByNameThroughTheDirectory) {
  const std::vector<std::pair<std::string, std::string>> members = {
      {"README", "not this one"}, {"data/enwik8", "the wanted bytes\n"}, {"other", "nor this"}};
  for (bool zip64 : {false, true}) {
    SCOPED_TRACE(zip64 ? "ZIP64 directory" : "classic directory");
    EXPECT_EQ(data::read_byte_file(temp_file("enwik8.zip", make_zip_members(members, zip64))), "the wanted bytes\n");
    const std::string message = error_of([&] { data::read_byte_file(temp_file("text8.zip", make_zip_members(members, zip64))); });
    EXPECT_NE(message.find("no member named 'text8' (members: README, data/enwik8, other)"), std::string::npos) << message;
  }
  // A single member is taken whatever its name.
  EXPECT_EQ(data::read_byte_file(temp_file("enwik8.zip", make_zip_members({{"x.txt", "only"}}, false))), "only");
}

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

// ---- streaming line reader and pretrained word vectors ----

namespace {

std::string gzip_file(const std::string& name, const std::string& bytes) {
  const std::string path = sru::testing::tmp_dir() + name;
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  return path;
}

// A stored zip member whose local header gives its size only in a ZIP64 extra field.
std::string make_zip64_stored(const std::string& name, const std::string& content) {
  std::string zip;
  put32(zip, 0x04034b50); put16(zip, 45); put16(zip, 0); put16(zip, 0); put32(zip, 0);
  put32(zip, crc32(0, reinterpret_cast<const Bytef*>(content.data()), static_cast<uInt>(content.size())));
  put32(zip, 0xffffffffu); put32(zip, 0xffffffffu);
  put16(zip, static_cast<uint32_t>(name.size())); put16(zip, 20);
  zip += name;
  put16(zip, 1); put16(zip, 16);
  put32(zip, static_cast<uint32_t>(content.size())); put32(zip, 0);  // uncompressed (u64)
  put32(zip, static_cast<uint32_t>(content.size())); put32(zip, 0);  // compressed (u64)
  return zip + content;
}

// word2vec binary: "count dim\n" then "word " + dim little-endian floats (+ "\n" when newline).
std::string word2vec_binary(const std::vector<std::pair<std::string, std::vector<float>>>& rows, bool newline) {
  std::string out = std::to_string(rows.size()) + " " + std::to_string(rows[0].second.size()) + "\n";
  for (const auto& [w, v] : rows) {
    out += w + " ";
    out.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    if (newline) out += "\n";
  }
  return out;
}

const std::string kGlove = "the 0.1 0.2 0.3\nof -1 0 2.5\n. . . 7 8 9\ncat 1e-2 -3 4\n";

}  // namespace

TEST(LineReader, PlainGzipZipAndZip64GiveTheSameLines) {
  std::string text;
  for (int i = 0; i < 40000; ++i) text += "line " + std::to_string(i) + (i % 3 ? "\n" : "\r\n");  // > one buffer
  text += "last line without end";
  const std::vector<std::string> paths = {temp_file("lines.txt", text), gzip_file("lines.txt.gz", text),
                                          temp_file("lines.zip", make_zip("lines.txt", text, true)),
                                          temp_file("lines_stored.zip", make_zip("lines.txt", text, false)),
                                          temp_file("lines64.zip", make_zip64_stored("lines.txt", text))};
  for (const auto& path : paths) {
    data::LineReader in(path);
    std::string line;
    int64_t n = 0;
    while (in.next(line)) {
      if (n < 40000) { ASSERT_EQ(line, "line " + std::to_string(n)) << path; }
      ++n;
    }
    EXPECT_EQ(n, 40001) << path;
    EXPECT_EQ(line, "last line without end") << path;
  }
  std::string truncated = make_zip("lines.txt", text, true);
  truncated.resize(truncated.size() / 2);
  EXPECT_NE(error_of([&] {
              data::LineReader in(temp_file("trunc.zip", truncated));
              std::string l;
              while (in.next(l)) {
              }
            }).find("truncated"),
            std::string::npos);
  // A gzip file cut short is an error too, not a shorter file (zlib reports it only through gzerror).
  std::ifstream whole(gzip_file("lines_whole.txt.gz", text), std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(whole)), std::istreambuf_iterator<char>());
  gz.resize(gz.size() / 2);
  EXPECT_NE(error_of([&] {
              data::LineReader in(temp_file("trunc.txt.gz", gz));
              std::string l;
              while (in.next(l)) {
              }
            }).find("truncated"),
            std::string::npos);
}

TEST(WordVectors, TextWithoutHeaderKeepsOnlyWantedWords) {
  const auto v = data::load_word_vectors(temp_file("glove.txt", kGlove), {"the", "cat", ". . .", "dog"});
  EXPECT_EQ(v.dim, 3);
  EXPECT_EQ(v.rows_read, 4);
  ASSERT_EQ(v.vectors.size(), 3u);  // "of" not wanted, "dog" not in the file
  EXPECT_EQ(v.vectors.at("the"), (std::vector<float>{0.1f, 0.2f, 0.3f}));
  EXPECT_EQ(v.vectors.at(". . ."), (std::vector<float>{7, 8, 9}));  // a word with spaces (GloVe 840B has some)
  EXPECT_EQ(v.vectors.at("cat"), (std::vector<float>{0.01f, -3, 4}));
}

TEST(WordVectors, HeaderGzipAndZipContainers) {
  const std::string with_header = "4 3\n" + kGlove;  // fastText .vec / word2vec text
  for (const auto& path : {temp_file("wiki.vec", with_header), gzip_file("glove.txt.gz", kGlove),
                           temp_file("glove.zip", make_zip("glove.txt", kGlove, true))}) {
    const auto v = data::load_word_vectors(path, {"of"});
    EXPECT_EQ(v.dim, 3) << path;
    EXPECT_EQ(v.rows_read, 4) << path;
    EXPECT_EQ(v.vectors.at("of"), (std::vector<float>{-1, 0, 2.5f})) << path;
  }
}

TEST(WordVectors, Word2VecBinaryWithAndWithoutNewlines) {
  const std::vector<std::pair<std::string, std::vector<float>>> rows = {
      {"king", {0.5f, -0.25f}}, {"queen", {3, 4}}, {"</s>", {1e-3f, 2}}};
  for (bool newline : {true, false}) {
    for (const std::string& name : {std::string("w2v.bin"), std::string("w2v.bin.gz")}) {
      const std::string bytes = word2vec_binary(rows, newline);
      const std::string path = name == "w2v.bin" ? temp_file(name, bytes) : gzip_file(name, bytes);
      const auto v = data::load_word_vectors(path, {"queen", "</s>"});
      EXPECT_EQ(v.dim, 2);
      EXPECT_EQ(v.rows_read, 3);
      EXPECT_EQ(v.vectors.at("queen"), (std::vector<float>{3, 4}));
      EXPECT_EQ(v.vectors.at("</s>"), (std::vector<float>{1e-3f, 2}));
      EXPECT_FALSE(v.vectors.count("king"));
    }
  }
  // Unit normalisation: (3, 4) -> (0.6, 0.8).
  const auto n = data::load_word_vectors(temp_file("w2v_n.bin", word2vec_binary(rows, true)), {"queen"}, "word2vec", true);
  EXPECT_NEAR(n.vectors.at("queen")[0], 0.6f, 1e-7);
  EXPECT_NEAR(n.vectors.at("queen")[1], 0.8f, 1e-7);
  std::string cut = word2vec_binary(rows, true);
  cut.resize(cut.size() - 5);
  EXPECT_NE(error_of([&] { data::load_word_vectors(temp_file("cut.bin", cut), {"x"}); }).find("truncated"),
            std::string::npos);
}

TEST(WordVectors, MalformedTextNamesFileAndLine) {
  const std::string path = temp_file("bad.txt", "a 1 2\nb 1 x\n");
  EXPECT_NE(error_of([&] { data::load_word_vectors(path, {"b"}); }).find("bad.txt:2: 'x' is not a number"),
            std::string::npos);
  EXPECT_NE(error_of([&] { data::load_word_vectors(temp_file("short.txt", "a 1 2\nb 1\n"), {"b"}); }).find("short.txt:2"),
            std::string::npos);
  EXPECT_NE(error_of([&] { data::load_word_vectors("/no/such/vectors.txt", {"b"}); }).find("cannot open"),
            std::string::npos);
  EXPECT_NE(error_of([&] { data::load_word_vectors(path, {"b"}, "glove"); }).find("unknown word vector format"),
            std::string::npos);
}

// The real published vectors: 100-row samples mirrored beside the project (skipped without them).
TEST(WordVectors, PublishedSamplesWhenMirrored) {
  const std::string dir = std::string(SRU_SOURCE_DIR) + "/../shared/data/vectors-sample/";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no vector samples at " << dir;
  const auto glove100 = data::load_word_vectors(dir + "glove.6B.100d.sample.txt.gz", {"the", "of"});
  EXPECT_EQ(glove100.dim, 100);
  EXPECT_EQ(glove100.rows_read, 100);
  EXPECT_EQ(glove100.vectors.size(), 2u);
  EXPECT_NEAR(glove100.vectors.at("the")[0], -0.038194f, 1e-6);  // first value of GloVe 6B 100d "the"
  const auto glove300 = data::load_word_vectors(dir + "glove.6B.300d.sample.txt.gz", {"the"});
  EXPECT_EQ(glove300.dim, 300);
  const auto cased = data::load_word_vectors(dir + "glove.840B.300d.zip", {",", "the"});
  EXPECT_EQ(cased.dim, 300);
  EXPECT_EQ(cased.rows_read, 100);
  EXPECT_TRUE(cased.vectors.count(","));
  const auto fasttext = data::load_word_vectors(dir + "wiki.en.vec", {"the"}, "auto", true);
  EXPECT_EQ(fasttext.dim, 300);  // header "2519370 300"
  EXPECT_EQ(fasttext.rows_read, 99);  // the sample's 100 lines are the header and 99 vectors
  double norm = 0;
  for (float x : fasttext.vectors.at("the")) norm += x * x;
  EXPECT_NEAR(norm, 1.0, 1e-5);
}
