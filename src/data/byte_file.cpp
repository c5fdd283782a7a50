// Plain and zipped byte files. Zip archives are read through the streaming zip member source of
// data/line_reader.h (stored or deflated members, ZIP64 included), choosing the member by name.
#include "data/byte_file.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "data/line_reader.h"

namespace sru::data {

std::string read_byte_file(const std::string& path, const std::string& key) {
  std::ifstream in(path, std::ios::binary);
  SRU_CHECK(in.good() && !std::filesystem::is_directory(path), "cannot open data file '", path, "' (", key, ")");
  if (!path.ends_with(".zip")) return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::unique_ptr<ByteSource> member = open_zip_member(path, std::filesystem::path(path).stem().string());
  std::string bytes;
  constexpr size_t kChunk = 1 << 20;
  for (;;) {
    const size_t old = bytes.size();
    bytes.resize(old + kChunk);  // capacity grows geometrically: amortised linear
    const size_t got = member->read(bytes.data() + old, kChunk);
    bytes.resize(old + got);
    if (got == 0) break;
  }
  return bytes;
}

}  // namespace sru::data
