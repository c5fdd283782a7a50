// Fuzz target: the line-oriented readers of user data files: LineReader (lines, read_until,
// read_exact), labelled sentences (read_labeled_file), a word LM's word files (StreamVocabulary::
// words_of, encode_file) and sentence-aligned parallel text (read_parallel; input: source, NUL, target).
#include "data/labeled_text.h"
#include "data/line_reader.h"
#include "data/parallel_text.h"
#include "fuzz_support.h"
#include "tasks/lm.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const sru::fuzz::TempFile file(bytes, ".txt");
  sru::fuzz::expect_only_sru_errors([&] {
    sru::data::LineReader reader(file.path());
    std::string line;
    char raw[7];
    for (int i = 0; reader.next(line); ++i) {
      if (i % 3 == 1 && !reader.read_until(' ', line)) break;
      if (i % 5 == 2 && !reader.read_exact(raw, sizeof raw)) break;
    }
  });
  sru::fuzz::expect_only_sru_errors([&] { (void)sru::data::read_labeled_file(file.path()); });
  sru::fuzz::expect_only_sru_errors([&] {
    const auto vocab = sru::tasks::StreamVocabulary::words_of(file.path(), "data.path");
    (void)vocab.encode_file(file.path(), "data.path");
  });
  const std::vector<std::string> parts = sru::fuzz::split_parts(data, size, 2);
  const sru::fuzz::TempFile source(parts[0], ".src"), target(parts.size() > 1 ? parts[1] : "", ".tgt");
  for (const bool skip_empty : {false, true})
    sru::fuzz::expect_only_sru_errors(
        [&] { (void)sru::data::read_parallel(source.path(), target.path(), {skip_empty, "skip_empty"}); });
  return 0;
}
