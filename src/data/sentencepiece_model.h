// The subword model of translation: one SentencePiece model shared by the source and target languages,
// trained here with SentencePiece's own trainer on the training text of both sides (or loaded from a
// .model file), kept as its serialized bytes so that a checkpoint can carry it and rebuild it exactly.
// Special ids are fixed: pad 0, unk 1, bos 2, eos 3 (a loaded model must have the same).
//
// (The classify task's `SubwordModel` in labeled_text.h is a separate, smaller wrapper: pieces as
// strings, no special ids, a soft vocabulary limit.)
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/parallel_text.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace sru::data {

struct SubwordTrainOptions {
  int64_t vocab_size = 8000;         // pieces in the model, specials included; exactly this many or an error
  std::string model_type = "unigram";  // "unigram" or "bpe"
  double character_coverage = 1.0;   // share of characters the model must cover (rarer ones become unk)
  // Sentences the trainer reads: a sample of this many (drawn with `seed`) when the text has more; 0: all.
  int64_t max_sentences = 2000000;
  // Trainer threads. The model depends on it (and records it), so it is a fixed setting, not the core count.
  int threads = 1;
  uint64_t seed = 1;
  // The caller's names for vocab_size and model_type, for error messages.
  std::string vocab_size_key = "vocab_size";
  std::string model_type_key = "model_type";
};

class SentencePieceModel {
 public:
  static constexpr int32_t kPad = 0, kUnk = 1, kBos = 2, kEos = 3;

  // Trains on every line of `texts` (for translation: the source and the target side of the training
  // data). Deterministic: the same lines and options give the same bytes. The trainer's error (e.g. a
  // vocab_size too large for the data) is passed on with options.vocab_size_key named.
  static SentencePieceModel train(const std::vector<const TextLines*>& texts, const SubwordTrainOptions& options);
  static SentencePieceModel train(const ParallelText& data, const SubwordTrainOptions& options);
  // A .model file written by SentencePiece (spm_train or bytes() saved). Errors name the path: a missing
  // or unreadable file, bytes that are no SentencePiece model, special ids other than the fixed ones.
  static SentencePieceModel load(const std::string& path);
  // The model from bytes() (a checkpoint); `what` names their origin in error messages.
  static SentencePieceModel from_bytes(std::string bytes, const std::string& what);

  SentencePieceModel(SentencePieceModel&&) noexcept;
  SentencePieceModel& operator=(SentencePieceModel&&) noexcept;
  ~SentencePieceModel();

  const std::string& bytes() const { return bytes_; }  // the serialized ModelProto, as a .model file holds it
  int64_t piece_size() const;                           // vocabulary size, specials included
  std::string piece(int32_t id) const;                  // "<pad>", "<unk>", "<s>", "</s>", "▁the", ...

  // The ids of a sentence's pieces (SentencePiece's normalisation applied; no bos/eos added).
  std::vector<int32_t> encode(std::string_view text) const;
  // Every line encoded, on the OpenMP threads; the same result as encode() line by line.
  TokenSequences encode_all(const TextLines& lines) const;
  // Detokenised text of ids: pieces joined, "▁" turned back into spaces. pad, bos and eos decode to
  // nothing, unk to " ⁇ " (SentencePiece's surface for it); an id outside [0, piece_size()) is an error.
  std::string decode(std::span<const int32_t> ids) const;

 private:
  SentencePieceModel();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::string bytes_;
};

}  // namespace sru::data
