// Fuzz target: pretrained word vectors, GloVe/fastText text (plain and gzip through the same reader)
// and word2vec binary, with a few wanted words so the float parsing runs.
#include "data/word_vectors.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::unordered_set<std::string> wanted = {"the", "a", "x", "</s>"};
  const sru::fuzz::TempFile text(bytes, ".txt"), binary(bytes, ".bin");
  for (const bool normalise : {false, true}) {
    sru::fuzz::expect_only_sru_errors([&] { (void)sru::data::load_word_vectors(text.path(), wanted, "auto", normalise); });
    sru::fuzz::expect_only_sru_errors([&] { (void)sru::data::load_word_vectors(binary.path(), wanted, "auto", normalise); });
  }
  return 0;
}
