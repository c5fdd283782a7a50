// The data layer of translation: parallel text (plain and gzip, every error), the shared SentencePiece
// model (training on a generated corpus: determinism, special ids, round trips, bytes, load, errors) and
// token-budget batching (budget, coverage, determinism per (seed, epoch), long pairs, filtering).
#include <gtest/gtest.h>

#include <sentencepiece_trainer.h>
#include <zlib.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "data/parallel_text.h"
#include "data/sentencepiece_model.h"
#include "tasks/token_batching.h"
#include "testing.h"

using namespace sru;
using sru::data::ParallelReadOptions;
using sru::data::SentencePieceModel;
using sru::data::SubwordTrainOptions;
using sru::data::TextLines;
using sru::testing::error_of;
using sru::testing::temp_file;
using sru::testing::tmp_dir;

namespace {

std::string gz_file(const std::string& name, const std::string& bytes) {
  const std::string path = tmp_dir() + name;
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  return path;
}

std::vector<std::string> lines_of(const TextLines& t) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < t.size(); ++i) out.emplace_back(t[i]);
  return out;
}

// A generated "English"/"German" corpus: sentences of 3-12 words drawn from 300 words built of syllables
// (some with umlauts and ß), the German side a word-by-word mapping with a suffix. Same text every time.
struct Corpus {
  TextLines en, de;
};
Corpus generated_corpus(int n, uint32_t seed = 3) {
  std::mt19937 rng(seed);
  const char* syllables[] = {"ka", "te", "ri", "on", "ma", "sch", "st", "ün", "ei", "au", "ber", "gen", "the", "ing", "qu", "ß"};
  std::vector<std::string> words;
  for (int w = 0; w < 300; ++w) {
    std::string word;
    for (int k = 0, m = 1 + static_cast<int>(rng() % 3); k < m; ++k) word += syllables[rng() % 16];
    words.push_back(word);
  }
  Corpus c;
  for (int i = 0; i < n; ++i) {
    std::string en, de;
    for (int k = 0, m = 3 + static_cast<int>(rng() % 10); k < m; ++k) {
      const size_t w = std::min(rng() % 300, rng() % 300);  // a skewed word distribution
      en += (k ? " " : "") + words[w];
      de += (k ? " " : "") + words[(w * 7) % 300] + (w % 3 == 0 ? "en" : "");
    }
    c.en.push_back(en + ".");
    c.de.push_back(de + ".");
  }
  return c;
}

SubwordTrainOptions small_options(const std::string& type = "unigram", int64_t vocab = 200) {
  SubwordTrainOptions o;
  o.vocab_size = vocab;
  o.model_type = type;
  return o;
}

}  // namespace

// ---- parallel text ----

TEST(ParallelText, ReadsPlainAndGzipFiles) {
  // A byte-order mark and \r\n line ends are dropped; UTF-8 text is kept as it is.
  const std::string src = temp_file("pt_src.en", "\xEF\xBB\xBF" "A dog runs.\r\nTwo men , outside\nÜber straße\n");
  const std::string tgt = gz_file("pt_tgt.de.gz", "Ein Hund läuft.\nZwei Männer draußen\nüber Straße");
  const auto text = data::read_parallel(src, tgt);
  ASSERT_EQ(text.size(), 3);
  EXPECT_EQ(lines_of(text.source), (std::vector<std::string>{"A dog runs.", "Two men , outside", "Über straße"}));
  EXPECT_EQ(lines_of(text.target), (std::vector<std::string>{"Ein Hund läuft.", "Zwei Männer draußen", "über Straße"}));
  EXPECT_TRUE(text.skipped_lines.empty());
  // Both sides gzip, and the same text either way.
  const auto gz = data::read_parallel(gz_file("pt_src.en.gz", "A\nB b\n"), gz_file("pt_tgt2.de.gz", "a\nbb\n"));
  EXPECT_EQ(lines_of(gz.source), (std::vector<std::string>{"A", "B b"}));
  EXPECT_EQ(lines_of(gz.target), (std::vector<std::string>{"a", "bb"}));
  EXPECT_EQ(gz.source.total_bytes(), 4);
}

TEST(ParallelText, DifferentLineCountsNameBothFilesAndCounts) {
  const std::string a = temp_file("pt_count.en", "one\ntwo\nthree\n"), b = gz_file("pt_count.de.gz", "eins\nzwei\n");
  std::string e = error_of([&] { data::read_parallel(a, b); });
  EXPECT_NE(e.find("the source '" + a + "' has 3 lines but the target '" + b + "' has 2"), std::string::npos) << e;
  e = error_of([&] { data::read_parallel(b, a); });
  EXPECT_NE(e.find("the source '" + b + "' has 2 lines but the target '" + a + "' has 3"), std::string::npos) << e;
}

TEST(ParallelText, InvalidUtf8NamesFileLineAndByte) {
  const std::string good = temp_file("pt_utf_good.en", "a\nb\nc\n");
  for (const std::string bad : {"\xC0\xAF", "\xED\xA0\x80", "x\xE2\x82", "\xF5\x80\x80\x80", "\xFF"}) {
    const std::string path = temp_file("pt_utf_bad.de", "gut\nok " + bad + " hier\nc\n");
    const std::string e = error_of([&] { data::read_parallel(good, path); });
    EXPECT_NE(e.find("'" + path + "':2: invalid UTF-8 (byte "), std::string::npos) << e;
    EXPECT_NE(e.find("the target text must be UTF-8"), std::string::npos) << e;
  }
  const std::string latin1 = temp_file("pt_latin1.en", "caf\xE9\n");
  const std::string e = error_of([&] { data::read_parallel(latin1, temp_file("pt_one.de", "x\n")); });
  EXPECT_NE(e.find("'" + latin1 + "':1: invalid UTF-8 (byte 4 of the line is 0xE9); the source text"), std::string::npos)
      << e;
  EXPECT_EQ(data::invalid_utf8_offset("ok ü € 𝄞"), -1);
  EXPECT_EQ(data::invalid_utf8_offset("ab\xC3"), 2);
}

TEST(ParallelText, EmptyLinesAreErrorsOrSkippedOnRequest) {
  const std::string src = temp_file("pt_empty.en", "one\n  \nthree\nfour\n");
  const std::string tgt = temp_file("pt_empty.de", "eins\nzwei\ndrei\n\t\n");
  std::string e = error_of([&] { data::read_parallel(src, tgt); });
  EXPECT_NE(e.find("'" + src + "':2: empty line (the pair at line 2 has no source sentence)"), std::string::npos) << e;
  ParallelReadOptions options;
  options.skip_empty_key = "data.skip_empty";
  e = error_of([&] { data::read_parallel(temp_file("pt_empty3.en", "a\nb\nc\nd\n"), tgt, options); });
  EXPECT_NE(e.find("'" + tgt + "':4: empty line (the pair at line 4 has no target sentence); remove the pair from both "
                   "files or set data.skip_empty"), std::string::npos) << e;
  options.skip_empty = true;
  const auto text = data::read_parallel(src, tgt, options);
  EXPECT_EQ(lines_of(text.source), (std::vector<std::string>{"one", "three"}));
  EXPECT_EQ(lines_of(text.target), (std::vector<std::string>{"eins", "drei"}));
  EXPECT_EQ(text.skipped_lines, (std::vector<int64_t>{2, 4}));
  // Nothing left at all.
  e = error_of([&] { data::read_parallel(temp_file("pt_none.en", ""), temp_file("pt_none.de", "")); });
  EXPECT_NE(e.find("no sentence pairs in"), std::string::npos) << e;
  e = error_of([&] { data::read_parallel(temp_file("pt_blank.en", " \n"), temp_file("pt_blank.de", "x\n"), options); });
  EXPECT_NE(e.find("(every pair has an empty side)"), std::string::npos) << e;
}

TEST(ParallelText, MissingAndCorruptFiles) {
  const std::string good = temp_file("pt_ok.en", "a\n");
  std::string e = error_of([&] { data::read_parallel(good, tmp_dir() + "no-such.de.gz"); });
  EXPECT_NE(e.find("cannot read the target text '" + tmp_dir() + "no-such.de.gz': no such file"), std::string::npos) << e;
  e = error_of([&] { data::read_parallel(tmp_dir() + "no-such.en", good); });
  EXPECT_NE(e.find("cannot read the source text '" + tmp_dir() + "no-such.en': no such file"), std::string::npos) << e;
  // A corrupted gzip file: zlib's error, with the path.
  const std::string full = gz_file("pt_corrupt_full.gz", "Ein Hund.\n");
  std::ifstream in(full, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 24u);
  for (size_t i = bytes.size() - 8; i < bytes.size(); ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5A);  // CRC, size
  const std::string corrupt = temp_file("pt_corrupt.de.gz", bytes);
  e = error_of([&] { data::read_parallel(good, corrupt); });
  EXPECT_NE(e.find("'" + corrupt + "': read error"), std::string::npos) << e;
}

// ---- SentencePiece ----

TEST(SentencePieceModel, TrainingIsDeterministicWithFixedSpecialIds) {
  const Corpus c = generated_corpus(2000);
  for (const std::string type : {"unigram", "bpe"}) {
    SCOPED_TRACE(type);
    const auto a = SentencePieceModel::train({&c.en, &c.de}, small_options(type));
    // Another training with another seed in between: the generators are seeded afresh for each training.
    auto other = small_options(type);
    other.seed = 99;
    other.max_sentences = 1000;
    (void)SentencePieceModel::train({&c.en, &c.de}, other);
    const auto b = SentencePieceModel::train({&c.en, &c.de}, small_options(type));
    EXPECT_EQ(a.bytes(), b.bytes());
    EXPECT_EQ(a.piece_size(), 200);
    EXPECT_EQ(a.piece(SentencePieceModel::kPad), "<pad>");
    EXPECT_EQ(a.piece(SentencePieceModel::kUnk), "<unk>");
    EXPECT_EQ(a.piece(SentencePieceModel::kBos), "<s>");
    EXPECT_EQ(a.piece(SentencePieceModel::kEos), "</s>");
    // Sampling (fewer sentences than the text has) is seeded too.
    auto sampled = small_options(type);
    sampled.max_sentences = 1500;
    EXPECT_EQ(SentencePieceModel::train({&c.en, &c.de}, sampled).bytes(),
              SentencePieceModel::train({&c.en, &c.de}, sampled).bytes());
  }
  const auto unigram = SentencePieceModel::train({&c.en, &c.de}, small_options("unigram"));
  const auto bpe = SentencePieceModel::train({&c.en, &c.de}, small_options("bpe"));
  EXPECT_NE(unigram.bytes(), bpe.bytes());
  // train(ParallelText) is training on both sides.
  const std::string src = temp_file("sp_pt.en", ""), tgt = temp_file("sp_pt.de", "");
  {
    std::ofstream s(src), t(tgt);
    for (int64_t i = 0; i < c.en.size(); ++i) s << c.en[i] << "\n", t << c.de[i] << "\n";
  }
  EXPECT_EQ(SentencePieceModel::train(data::read_parallel(src, tgt), small_options()).bytes(), unigram.bytes());
}

TEST(SentencePieceModel, EncodeDecodeRoundTrip) {
  const Corpus c = generated_corpus(2000);
  const auto m = SentencePieceModel::train({&c.en, &c.de}, small_options());
  for (int64_t i = 0; i < 200; ++i) {
    const auto ids = m.encode(c.de[i]);
    ASSERT_FALSE(ids.empty());
    for (int32_t id : ids) {
      EXPECT_GE(id, 4);  // no specials: the corpus' characters are all covered
      EXPECT_LT(id, m.piece_size());
    }
    EXPECT_EQ(m.decode(ids), std::string(c.de[i]));
  }
  // encode_all is encode line by line.
  const data::TokenSequences all = m.encode_all(c.en);
  ASSERT_EQ(all.size(), c.en.size());
  for (int64_t i = 0; i < c.en.size(); ++i) {
    const auto one = m.encode(c.en[i]);
    ASSERT_EQ(std::vector<int32_t>(all[i].begin(), all[i].end()), one) << i;
    EXPECT_EQ(all.length(i), static_cast<int64_t>(one.size()));
  }
  EXPECT_EQ(all.lengths().size(), static_cast<size_t>(c.en.size()));
  // Specials: bos/eos/pad decode to nothing, unknown characters to unk.
  std::vector<int32_t> ids = m.encode(c.en[0]);
  ids.insert(ids.begin(), SentencePieceModel::kBos);
  ids.push_back(SentencePieceModel::kEos);
  ids.push_back(SentencePieceModel::kPad);
  EXPECT_EQ(m.decode(ids), std::string(c.en[0]));
  const auto unknown = m.encode("ka 中");
  EXPECT_NE(std::find(unknown.begin(), unknown.end(), SentencePieceModel::kUnk), unknown.end());
  // Detokenised: extra spaces are normalised away.
  EXPECT_EQ(m.decode(m.encode("  ka   te  ")), "ka te");
  const std::string e = error_of([&] { m.decode(std::vector<int32_t>{5, 200}); });
  EXPECT_NE(e.find("cannot decode subword id 200 (position 1): the model has 200 pieces"), std::string::npos) << e;
}

TEST(SentencePieceModel, BytesLoadAndFromBytesGiveTheSameModel) {
  const Corpus c = generated_corpus(1000);
  const auto m = SentencePieceModel::train({&c.en, &c.de}, small_options("bpe", 150));
  const std::string path = temp_file("sp_model.model", m.bytes());
  const auto loaded = SentencePieceModel::load(path);
  const auto rebuilt = SentencePieceModel::from_bytes(m.bytes(), "the checkpoint's model");
  EXPECT_EQ(loaded.bytes(), m.bytes());
  EXPECT_EQ(rebuilt.bytes(), m.bytes());
  EXPECT_EQ(loaded.piece_size(), 150);
  for (int64_t i = 0; i < c.de.size(); ++i) {
    const auto ids = m.encode(c.de[i]);
    ASSERT_EQ(loaded.encode(c.de[i]), ids);
    ASSERT_EQ(rebuilt.encode(c.de[i]), ids);
    ASSERT_EQ(rebuilt.decode(ids), m.decode(ids));
  }
}

TEST(SentencePieceModel, CorruptModelsAndWrongSpecialIdsAreRefused) {
  std::string e = error_of([&] { SentencePieceModel::load(tmp_dir() + "none.model"); });
  EXPECT_NE(e.find("cannot read the SentencePiece model '" + tmp_dir() + "none.model'"), std::string::npos) << e;
  const std::string junk = temp_file("junk.model", "this is not a protobuf \x01\x02\xff\xff");
  e = error_of([&] { SentencePieceModel::load(junk); });
  EXPECT_NE(e.find("'" + junk + "' is not a SentencePiece model"), std::string::npos) << e;
  e = error_of([&] { SentencePieceModel::load(temp_file("empty.model", "")); });
  EXPECT_NE(e.find("empty.model' is not a SentencePiece model: it is empty"), std::string::npos) << e;
  const Corpus c = generated_corpus(500);
  const auto m = SentencePieceModel::train({&c.en, &c.de}, small_options("unigram", 100));
  e = error_of([&] { SentencePieceModel::from_bytes(m.bytes().substr(0, m.bytes().size() / 3), "the checkpoint's model"); });
  EXPECT_NE(e.find("the checkpoint's model is not a SentencePiece model"), std::string::npos) << e;
  // A model with SentencePiece's default ids (unk 0, bos 1, eos 2, no pad).
  struct Lines : sentencepiece::SentenceIterator {
    const TextLines* t;
    int64_t i = 0;
    std::string v;
    explicit Lines(const TextLines* text) : t(text) { v = std::string((*t)[0]); }
    bool done() const override { return i >= t->size(); }
    void Next() override {
      if (++i < t->size()) v = std::string((*t)[i]);
    }
    const std::string& value() const override { return v; }
    sentencepiece::util::Status status() const override { return {}; }
  } lines(&c.en);
  std::string proto;
  ASSERT_TRUE(sentencepiece::SentencePieceTrainer::Train({{"vocab_size", "60"}, {"minloglevel", "2"}}, &lines, &proto).ok());
  const std::string other = temp_file("default_ids.model", proto);
  e = error_of([&] { SentencePieceModel::load(other); });
  EXPECT_NE(e.find("'" + other + "' has the special ids pad -1, unk 0, bos 1, eos 2; translation needs pad 0, unk 1, "
                   "bos 2, eos 3"), std::string::npos) << e;
}

TEST(SentencePieceModel, TrainerErrorsNameTheConfigKey) {
  const Corpus c = generated_corpus(300);
  auto o = small_options("unigram", 50000);
  o.vocab_size_key = "data.vocab_size";
  std::string e = error_of([&] { SentencePieceModel::train({&c.en, &c.de}, o); });
  EXPECT_NE(e.find("SentencePiece training failed (data.vocab_size = 50000, model type unigram, 600 sentences): "
                   "Vocabulary size too high (50000). Please set it to a value <= "), std::string::npos) << e;
  o.model_type = "bpe";
  e = error_of([&] { SentencePieceModel::train({&c.en, &c.de}, o); });
  EXPECT_NE(e.find("(data.vocab_size = 50000, model type bpe, 600 sentences): Vocabulary size too high"), std::string::npos)
      << e;
  o.vocab_size = 10;  // fewer pieces than the corpus has characters
  e = error_of([&] { SentencePieceModel::train({&c.en, &c.de}, o); });
  EXPECT_NE(e.find("(data.vocab_size = 10, model type bpe, 600 sentences): Vocabulary size is smaller than required_chars"),
            std::string::npos) << e;
  o.vocab_size = 4;
  e = error_of([&] { SentencePieceModel::train({&c.en, &c.de}, o); });
  EXPECT_NE(e.find("data.vocab_size: 4 is out of range: must be >= 5"), std::string::npos) << e;
  o.vocab_size = 100;
  o.model_type = "word";
  o.model_type_key = "data.subword_type";
  e = error_of([&] { SentencePieceModel::train({&c.en, &c.de}, o); });
  EXPECT_NE(e.find("data.subword_type: 'word' is not one of: unigram, bpe"), std::string::npos) << e;
  const TextLines none;
  e = error_of([&] { SentencePieceModel::train({&none}, small_options()); });
  EXPECT_NE(e.find("needs at least one sentence"), std::string::npos) << e;
}

// ---- token-budget batching ----

namespace {

struct PairLengths {
  std::vector<int64_t> source, target;
};
// n pairs of lengths 1..60 (target near the source's), and `long_pairs` of them 150-300 tokens long.
PairLengths random_lengths(int n, int long_pairs, uint32_t seed = 5) {
  std::mt19937 rng(seed);
  PairLengths p;
  for (int i = 0; i < n; ++i) {
    const int64_t s = 1 + static_cast<int64_t>(rng() % 60);
    p.source.push_back(s);
    p.target.push_back(std::max<int64_t>(1, s + static_cast<int64_t>(rng() % 11) - 5));
  }
  for (int k = 0; k < long_pairs; ++k) p.target[rng() % n] = 150 + static_cast<int64_t>(rng() % 151);
  return p;
}

std::vector<int64_t> all_indices(const tasks::TokenBatches& b) {
  std::vector<int64_t> out;
  for (const auto& batch : b.batches) out.insert(out.end(), batch.begin(), batch.end());
  std::sort(out.begin(), out.end());
  return out;
}

int64_t total_padded(const tasks::TokenBatches& b, const PairLengths& p) {
  int64_t sum = 0;
  for (const auto& batch : b.batches) sum += tasks::padded_tokens(batch, p.source, p.target);
  return sum;
}

}  // namespace

TEST(TokenBatching, BudgetRespectedAndEveryPairOncePerEpoch) {
  const PairLengths p = random_lengths(3000, 7);
  tasks::TokenBatchOptions o;
  o.max_tokens = 128;  // the long pairs (150-300 tokens) exceed it alone
  o.pool = 10;
  std::vector<int64_t> expected(3000);
  std::iota(expected.begin(), expected.end(), 0);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const auto b = tasks::epoch_token_batches(p.source, p.target, o, 17, epoch);
    EXPECT_EQ(all_indices(b), expected);
    EXPECT_EQ(b.too_long, 0);
    int64_t oversized = 0;
    for (const auto& batch : b.batches) {
      ASSERT_FALSE(batch.empty());
      const int64_t padded = tasks::padded_tokens(batch, p.source, p.target);
      if (padded > o.max_tokens) {
        EXPECT_EQ(batch.size(), 1u) << "a batch over the budget must be one long pair alone";
        ++oversized;
      }
    }
    EXPECT_EQ(b.oversized, oversized);
    EXPECT_GE(oversized, 1);  // the 7 long pairs (fewer if two landed on one index)
    EXPECT_LE(oversized, 7);
  }
  // max_sentences caps a batch's sentences as well.
  o.max_sentences = 3;
  for (const auto& batch : tasks::epoch_token_batches(p.source, p.target, o, 17, 0).batches) EXPECT_LE(batch.size(), 3u);
}

TEST(TokenBatching, DeterministicPerSeedAndEpoch) {
  const PairLengths p = random_lengths(2000, 0);
  tasks::TokenBatchOptions o;
  o.max_tokens = 200;
  o.pool = 5;
  const auto a = tasks::epoch_token_batches(p.source, p.target, o, 3, 4);
  EXPECT_EQ(tasks::epoch_token_batches(p.source, p.target, o, 3, 4).batches, a.batches);  // resumable
  EXPECT_NE(tasks::epoch_token_batches(p.source, p.target, o, 3, 5).batches, a.batches);  // another epoch
  EXPECT_NE(tasks::epoch_token_batches(p.source, p.target, o, 4, 4).batches, a.batches);  // another seed
  // Sorting inside pools packs tighter than batches cut from the shuffled order as it is.
  auto unsorted = o;
  unsorted.sort_pool = false;
  const auto u = tasks::epoch_token_batches(p.source, p.target, unsorted, 3, 4);
  EXPECT_EQ(all_indices(u), all_indices(a));
  EXPECT_LT(total_padded(a, p), total_padded(u, p));
  EXPECT_LT(a.batches.size(), u.batches.size());
  // A larger pool sorts more at once: no more padding than small pools.
  auto big_pool = o;
  big_pool.pool = 1000;
  EXPECT_LE(total_padded(tasks::epoch_token_batches(p.source, p.target, big_pool, 3, 4), p), total_padded(a, p));
}

TEST(TokenBatching, MaxLengthFiltersAndCounts) {
  const PairLengths p = random_lengths(1000, 0);
  tasks::TokenBatchOptions o;
  o.max_tokens = 500;
  o.max_length = 40;
  int64_t longer = 0;
  for (size_t i = 0; i < p.source.size(); ++i) longer += (p.source[i] > 40 || p.target[i] > 40);
  ASSERT_GT(longer, 0);
  const auto b = tasks::epoch_token_batches(p.source, p.target, o, 1, 0);
  EXPECT_EQ(b.too_long, longer);
  const auto kept = all_indices(b);
  EXPECT_EQ(static_cast<int64_t>(kept.size()), 1000 - longer);
  EXPECT_EQ(std::set<int64_t>(kept.begin(), kept.end()).size(), kept.size());
  for (int64_t i : kept) EXPECT_TRUE(p.source[i] <= 40 && p.target[i] <= 40) << i;
  EXPECT_EQ(b.oversized, 0);
}

TEST(TokenBatching, EvaluationKeepsEveryPairSortedByLength) {
  const PairLengths p = random_lengths(500, 3);
  tasks::TokenBatchOptions o;
  o.max_tokens = 100;
  o.max_length = 10;  // ignored in evaluation
  const auto b = tasks::evaluation_token_batches(p.source, p.target, o);
  std::vector<int64_t> expected(500);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(all_indices(b), expected);
  EXPECT_EQ(b.too_long, 0);
  int64_t previous = 0;
  for (const auto& batch : b.batches) {
    for (int64_t i : batch) {
      const int64_t w = std::max(p.source[i], p.target[i]);
      EXPECT_GE(w, previous);
      previous = w;
    }
    EXPECT_TRUE(tasks::padded_tokens(batch, p.source, p.target) <= o.max_tokens || batch.size() == 1);
  }
  EXPECT_EQ(tasks::evaluation_token_batches(p.source, p.target, o).batches, b.batches);
  // Zero lengths count as one token (no unbounded batch).
  const std::vector<int64_t> zeros(10, 0);
  o.max_tokens = 4;
  EXPECT_EQ(tasks::evaluation_token_batches(zeros, zeros, o).batches.size(), 3u);
  const std::string e = error_of([&] { tasks::evaluation_token_batches(zeros, p.source, o); });
  EXPECT_NE(e.find("10 source lengths but 500 target lengths"), std::string::npos) << e;
}

// The pieces together: files -> one subword model for both sides -> ids -> token batches.
TEST(TranslationData, FilesToBatches) {
  const Corpus c = generated_corpus(800, 9);
  std::string en, de;
  for (int64_t i = 0; i < c.en.size(); ++i) en += std::string(c.en[i]) + "\n", de += std::string(c.de[i]) + "\n";
  const auto text = data::read_parallel(gz_file("ftb.en.gz", en), temp_file("ftb.de", de));
  const auto model = SentencePieceModel::train(text, small_options("unigram", 120));
  const auto src = model.encode_all(text.source), tgt = model.encode_all(text.target);
  auto tgt_lengths = tgt.lengths();
  for (auto& l : tgt_lengths) ++l;  // with </s>
  tasks::TokenBatchOptions o;
  o.max_tokens = 300;
  const auto b = tasks::epoch_token_batches(src.lengths(), tgt_lengths, o, 1, 0);
  EXPECT_EQ(static_cast<int64_t>(all_indices(b).size()), text.size());
  EXPECT_EQ(b.oversized, 0);
  for (const auto& batch : b.batches)
    for (int64_t i : batch) EXPECT_EQ(model.decode(src[i]), std::string(text.source[i]));
}
