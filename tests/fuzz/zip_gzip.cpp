// Fuzz target: the streaming byte sources of data/line_reader.h on zip archives (local headers,
// central directory, ZIP64 records, deflate) and gzip/plain files, read to the end.
#include "data/line_reader.h"
#include "fuzz_support.h"

namespace {
void drain(sru::data::ByteSource& source) {
  char buf[4096];
  size_t total = 0;
  while (size_t n = source.read(buf, sizeof buf)) {
    total += n;
    if (total > (64u << 20)) break;  // a deflate bomb is valid input; stop reading it
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  {
    const sru::fuzz::TempFile zip(bytes, ".zip");
    sru::fuzz::expect_only_sru_errors([&] { drain(*sru::data::open_byte_source(zip.path())); });
    sru::fuzz::expect_only_sru_errors([&] { drain(*sru::data::open_zip_member(zip.path(), "enwik8")); });
  }
  const sru::fuzz::TempFile gz(bytes, ".gz");
  sru::fuzz::expect_only_sru_errors([&] { drain(*sru::data::open_byte_source(gz.path())); });
  return 0;
}
