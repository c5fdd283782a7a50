// Fuzz target: the strings a checkpoint stores for its task: the classify and word-LM vocabularies
// (Vocabulary / StreamVocabulary::deserialize) and SentencePiece model bytes (SentencePieceModel::
// from_bytes for translation, SubwordModel::from_serialized for classify; the protobuf parsing itself
// is the system's libsentencepiece).
#include "data/labeled_text.h"
#include "data/sentencepiece_model.h"
#include "fuzz_support.h"
#include "tasks/lm.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  sru::fuzz::expect_only_sru_errors([&] { (void)sru::data::Vocabulary::deserialize(bytes); });
  sru::fuzz::expect_only_sru_errors([&] { (void)sru::tasks::StreamVocabulary::deserialize(bytes); });
  sru::fuzz::expect_only_sru_errors([&] { (void)sru::data::SentencePieceModel::from_bytes(bytes, "task.spm_model"); });
  sru::fuzz::expect_only_sru_errors([&] { (void)sru::data::SubwordModel::from_serialized(bytes, "task.vocab"); });
  return 0;
}
