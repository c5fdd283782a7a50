// The shared SentencePiece model of translation (see sentencepiece_model.h).
#include "data/sentencepiece_model.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <exception>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/error.h"
#include "core/parallel.h"

namespace sru::data {

namespace {

// The lines of several TextLines, one after the other, for SentencePiece's trainer.
class LinesIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LinesIterator(const std::vector<const TextLines*>& texts) : texts_(texts) { settle(); }
  bool done() const override { return text_ >= texts_.size(); }
  void Next() override {
    ++line_;
    settle();
  }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  // Moves past exhausted texts and copies the current line.
  void settle() {
    while (text_ < texts_.size() && line_ >= texts_[text_]->size()) ++text_, line_ = 0;
    if (text_ < texts_.size()) value_.assign((*texts_[text_])[line_]);
  }
  const std::vector<const TextLines*>& texts_;
  size_t text_ = 0;
  int64_t line_ = 0;
  std::string value_;
};

// SentencePiece's messages start with the source location and the failed condition
// ("./src/trainer_interface.cc(660) [(a) == (b)] Vocabulary size too high ..."): keep the sentence.
std::string readable(const sentencepiece::util::Status& status) {
  std::string msg = status.error_message();
  const size_t cond = msg.find(") [");
  if (cond != std::string::npos) {
    const size_t end = msg.find("] ", cond);
    if (end != std::string::npos) msg = msg.substr(end + 2);
  }
  return msg.empty() ? status.ToString() : msg;
}

// SentencePiece's random seed is one process-wide setting, read by a generator each thread creates once.
std::mutex& training_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

SentencePieceModel::SentencePieceModel() : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SentencePieceModel::SentencePieceModel(SentencePieceModel&&) noexcept = default;
SentencePieceModel& SentencePieceModel::operator=(SentencePieceModel&&) noexcept = default;
SentencePieceModel::~SentencePieceModel() = default;

SentencePieceModel SentencePieceModel::train(const std::vector<const TextLines*>& texts,
                                             const SubwordTrainOptions& options) {
  SRU_CHECK(options.model_type == "unigram" || options.model_type == "bpe", options.model_type_key, ": '",
            options.model_type, "' is not one of: unigram, bpe");
  SRU_CHECK(options.vocab_size >= 5 && options.vocab_size <= (int64_t{1} << 30), options.vocab_size_key, ": ",
            options.vocab_size, " is out of range: must be >= 5 (4 special pieces and at least one more)");
  SRU_CHECK(options.threads >= 1, "SentencePiece training needs threads >= 1, got ", options.threads);
  SRU_CHECK(options.max_sentences >= 0, "SentencePiece training: max_sentences must be >= 0, got ",
            options.max_sentences);
  int64_t lines = 0;
  for (const TextLines* t : texts) lines += t->size();
  SRU_CHECK(lines > 0, "SentencePiece training needs at least one sentence");

  const std::unordered_map<std::string, std::string> args = {
      {"vocab_size", std::to_string(options.vocab_size)},
      {"model_type", options.model_type},
      {"character_coverage", std::to_string(options.character_coverage)},
      {"input_sentence_size", std::to_string(options.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(options.threads)},
      {"hard_vocab_limit", "true"},
      {"pad_id", std::to_string(kPad)},
      {"unk_id", std::to_string(kUnk)},
      {"bos_id", std::to_string(kBos)},
      {"eos_id", std::to_string(kEos)},
      {"minloglevel", "2"}};
  std::string proto;
  sentencepiece::util::Status status;
  {
    std::lock_guard<std::mutex> lock(training_mutex());
    // The seed as SentencePiece takes it (32 bits; 0xFFFFFFFF means "none" there, so it is avoided).
    unsigned seed32 = static_cast<unsigned>(options.seed ^ (options.seed >> 32));
    if (seed32 == 0xFFFFFFFFu) seed32 = 0x9E3779B9u;
    sentencepiece::SetRandomGeneratorSeed(seed32);
    // A fresh thread, so that every random generator the trainer reaches starts from the seed (SentencePiece
    // keeps one per thread, seeded when the thread first uses it).
    std::exception_ptr failure;
    std::thread worker([&] {
      try {
        LinesIterator it(texts);
        status = sentencepiece::SentencePieceTrainer::Train(args, &it, &proto);
      } catch (...) {
        failure = std::current_exception();
      }
    });
    worker.join();
    if (failure) std::rethrow_exception(failure);
  }
  SRU_CHECK(status.ok(), "SentencePiece training failed (", options.vocab_size_key, " = ", options.vocab_size,
            ", model type ", options.model_type, ", ", lines, " sentences): ", readable(status));
  return from_bytes(std::move(proto), "the trained SentencePiece model");
}

SentencePieceModel SentencePieceModel::train(const ParallelText& data, const SubwordTrainOptions& options) {
  return train(std::vector<const TextLines*>{&data.source, &data.target}, options);
}

SentencePieceModel SentencePieceModel::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SRU_CHECK(in.good(), "cannot read the SentencePiece model '", path, "'");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  SRU_CHECK(!in.bad(), "cannot read the SentencePiece model '", path, "'");
  return from_bytes(std::move(bytes), "'" + path + "'");
}

SentencePieceModel SentencePieceModel::from_bytes(std::string bytes, const std::string& what) {
  SentencePieceModel m;
  SRU_CHECK(!bytes.empty(), what, " is not a SentencePiece model: it is empty");
  const auto status = m.processor_->LoadFromSerializedProto(bytes);
  SRU_CHECK(status.ok(), what, " is not a SentencePiece model (corrupt or another format): ", readable(status));
  const auto* p = m.processor_.get();
  SRU_CHECK(p->pad_id() == kPad && p->unk_id() == kUnk && p->bos_id() == kBos && p->eos_id() == kEos, what,
            " has the special ids pad ", p->pad_id(), ", unk ", p->unk_id(), ", bos ", p->bos_id(), ", eos ", p->eos_id(),
            "; translation needs pad 0, unk 1, bos 2, eos 3 (spm_train --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3)");
  SRU_CHECK(p->GetPieceSize() > 4, what, " has no pieces besides the special ones");
  m.bytes_ = std::move(bytes);
  return m;
}

int64_t SentencePieceModel::piece_size() const { return processor_->GetPieceSize(); }

std::string SentencePieceModel::piece(int32_t id) const {
  SRU_CHECK(id >= 0 && id < piece_size(), "subword id ", id, " is out of range: the model has ", piece_size(),
            " pieces");
  return processor_->IdToPiece(id);
}

std::vector<int32_t> SentencePieceModel::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  SRU_CHECK(status.ok(), "SentencePiece could not encode a sentence: ", readable(status));
  return std::vector<int32_t>(ids.begin(), ids.end());
}

TokenSequences SentencePieceModel::encode_all(const TextLines& lines) const {
  const int64_t n = lines.size();
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(num_threads(), n / 256));
  std::vector<TokenSequences> parts(static_cast<size_t>(chunks));
  std::vector<std::string> errors(static_cast<size_t>(chunks));
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    std::vector<int> ids;
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
      for (int64_t i = begin; i < end && errors[c].empty(); ++i) {
        const auto status = processor_->Encode(lines[i], &ids);
        if (!status.ok()) {
          errors[c] = "SentencePiece could not encode line " + std::to_string(i + 1) + ": " + readable(status);
          break;
        }
        static_assert(sizeof(int) == sizeof(int32_t));
        parts[c].push_back(std::span<const int32_t>(reinterpret_cast<const int32_t*>(ids.data()), ids.size()));
      }
    }
  });
  for (const std::string& e : errors) SRU_CHECK(e.empty(), e);
  TokenSequences out = std::move(parts[0]);
  for (size_t c = 1; c < parts.size(); ++c) out.append(parts[c]);
  return out;
}

std::string SentencePieceModel::decode(std::span<const int32_t> ids) const {
  const int64_t size = piece_size();
  std::vector<int> v(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    SRU_CHECK(ids[i] >= 0 && ids[i] < size, "cannot decode subword id ", ids[i], " (position ", i,
              "): the model has ", size, " pieces");
    v[i] = ids[i];
  }
  std::string text;
  const auto status = processor_->Decode(v, &text);
  SRU_CHECK(status.ok(), "SentencePiece could not decode: ", readable(status));
  return text;
}

}  // namespace sru::data
