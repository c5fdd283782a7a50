// Sentence classification: the labelled-file reader, tokenisation, vocabulary, cross-validation
// folds, SentencePiece, the classifier's padding invariance, learning a synthetic task, and a
// checkpoint that classifies without the training data.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "autograd/engine.h"
#include "core/safetensors.h"
#include "data/labeled_text.h"
#include "nn/checkpoint.h"
#include "optim/optimizer.h"
#include "tasks/classify.h"
#include "train/step.h"
#include "train/trainer.h"
#include "testing.h"

using namespace sru;
using sru::testing::error_of;
using sru::testing::last_word_sentences;
using sru::testing::temp_file;

namespace {

config::Config tiny_config(const std::string& type) {
  config::Config c = config::Config::defaults("classify", type);
  c.task_as<tasks::ClassifyOptions>().valid_fraction = 0.1;
  c.data.batch_size = 16;
  c.data.eval_batch_size = 64;
  c.model.embedding_size = 16;
  c.model.hidden_size = 16;
  c.model.num_layers = 2;
  c.train.seed = 3;
  return c;
}

tasks::ClassifyOptions& options(config::Config& c) { return c.task_as<tasks::ClassifyOptions>(); }

// Trains with srutrain's own step (constant learning rate, Adam).
void train_epochs(tasks::ClassifyTask& task, int epochs, double lr) {
  config::TrainConfig train;
  train.lr = lr;
  const auto optimizer = train::make_optimizer(train, task.model());
  train::TrainingStep step(task, *optimizer, train, train::schedule_options(train, 16, 1));
  int64_t taken = 0;
  for (int e = 0; e < epochs; ++e) {
    task.start_epoch(e, 0);
    for (int64_t i = 0; i < task.steps_per_epoch(); ++i)
      ASSERT_EQ(step.run(i, ++taken, e).kind, train::StepOutcome::Kind::Updated);
  }
}

}  // namespace

TEST(LabeledText, ReadsLabelsAndWordsSkipsLabelOnlyLines) {
  const std::string path = temp_file("sents.txt", "1 a good film .\r\n\n0 dull\t, dull .\n3\n2  Spaced  Out \n");
  const data::LabeledFile f = data::read_labeled_file(path);
  ASSERT_EQ(f.sentences.size(), 3u);
  EXPECT_EQ(f.sentences[0].label, 1);
  EXPECT_EQ(f.sentences[0].text, "a good film .");
  EXPECT_EQ(f.sentences[1].label, 0);
  EXPECT_EQ(f.sentences[2].label, 2);
  EXPECT_EQ(f.sentences[2].line, 5);
  EXPECT_EQ(f.lines_without_words, std::vector<int64_t>{4});
  EXPECT_EQ(data::split_words(f.sentences[1].text, false), (std::vector<std::string>{"dull", ",", "dull", "."}));
  EXPECT_EQ(data::split_words(f.sentences[2].text, true), (std::vector<std::string>{"spaced", "out"}));
  EXPECT_EQ(data::split_words("\xc9t\xc9 ABC", true), (std::vector<std::string>{"\xc9t\xc9", "abc"}));  // Latin-1 kept
}

// Expected tokens from the reference's clean_str (asappresearch/sru classification/dataloader.py)
// run under Python 3 on the same strings.
TEST(LabeledText, CleanStrFollowsTheReferenceRules) {
  using W = std::vector<std::string>;
  EXPECT_EQ(data::clean_str_words("It's a (very) good film, isn't it? Yes!", true),
            (W{"it", "'s", "a", "\\(", "very", "\\)", "good", "film", ",", "is", "n't", "it", "\\?", "yes", "!"}));
  EXPECT_EQ(data::clean_str_words("don't  won't can't I'd we'll they're you've", true),
            (W{"do", "n't", "wo", "n't", "ca", "n't", "i", "'d", "we", "'ll", "they", "'re", "you", "'ve"}));
  // Everything but letters, digits and ( ) , ! ? ' ` goes: '.', '"', '-', '/', tabs, non-ASCII bytes.
  EXPECT_EQ(data::clean_str_words("`quoted' \"double\" -- dash.", true), (W{"`quoted'", "double", "dash"}));
  EXPECT_EQ(data::clean_str_words("caf\xc3\xa9 na\xc3\xafve\t3.5/10", true), (W{"caf", "na", "ve", "3", "5", "10"}));
  EXPECT_EQ(data::clean_str_words("caf\xe9 ok", true), (W{"caf", "ok"}));  // a Latin-1 byte alike
  // Substitutions run one after the other, each left to right without overlaps.
  EXPECT_EQ(data::clean_str_words("'s's n'tn't ''ll", true), (W{"'s", "'s", "n't", "n't", "'", "'ll"}));
  // TREC keeps its case (lowercase false); the rules are the same.
  EXPECT_EQ(data::clean_str_words("What's the (B)est?", false), (W{"What", "'s", "the", "\\(", "B", "\\)", "est", "\\?"}));
  EXPECT_EQ(data::clean_str_words(" . ... ", true), W{});
}

TEST(LabeledText, MalformedLinesNameFileAndLine) {
  EXPECT_NE(error_of([] { data::read_labeled_file(temp_file("bad_label.txt", "1 ok\npos great\n")); })
                .find("bad_label.txt:2: expected \"LABEL text\""),
            std::string::npos);
  EXPECT_NE(error_of([] { data::read_labeled_file(temp_file("neg.txt", "-1 bad\n")); }).find("neg.txt:1"),
            std::string::npos);
  EXPECT_NE(error_of([] { data::read_labeled_file(temp_file("empty.txt", "\n\n")); }).find("no labelled sentences"),
            std::string::npos);
}

TEST(Vocabulary, FrequencyOrderMinCountAndRoundTrip) {
  const auto v = data::Vocabulary::build({{"b", "a", "c", "a"}, {"c", "a", "d"}}, 2);
  EXPECT_EQ(v.words(), (std::vector<std::string>{"<pad>", "<unk>", "a", "c"}));  // a x3, c x2; b, d once
  EXPECT_EQ(v.id("a"), 2);
  EXPECT_EQ(v.id("b"), data::Vocabulary::kUnk);
  const auto back = data::Vocabulary::deserialize(v.serialize());
  EXPECT_EQ(back.words(), v.words());
}

TEST(CrossValidation, FoldsAreDisjointCoverEverythingAndAreReproducible) {
  const int64_t n = 103, k = 10;
  std::set<int64_t> all_test;
  for (int64_t fold = 0; fold < k; ++fold) {
    const auto s = data::cross_validation_split(n, k, fold, 0.1, 7);
    EXPECT_TRUE(s.test.size() == 10 || s.test.size() == 11);
    EXPECT_EQ(s.valid.size(), static_cast<size_t>((n - s.test.size()) * 0.1));
    std::set<int64_t> seen;
    for (const auto* part : {&s.train, &s.valid, &s.test})
      for (int64_t i : *part) EXPECT_TRUE(seen.insert(i).second) << "example " << i << " in two parts of fold " << fold;
    EXPECT_EQ(seen.size(), static_cast<size_t>(n));
    for (int64_t i : s.test) EXPECT_TRUE(all_test.insert(i).second) << "example " << i << " in two test folds";
    const auto again = data::cross_validation_split(n, k, fold, 0.1, 7);
    EXPECT_EQ(again.test, s.test);
    EXPECT_EQ(again.valid, s.valid);
  }
  EXPECT_EQ(all_test.size(), static_cast<size_t>(n));
  EXPECT_NE(data::cross_validation_split(n, k, 0, 0.1, 8).test, data::cross_validation_split(n, k, 0, 0.1, 7).test);
  EXPECT_NE(error_of([] { data::cross_validation_split(5, 10, 0, 0.1, 1); }).find("data.folds"), std::string::npos);
  EXPECT_NE(error_of([] { data::cross_validation_split(50, 10, 10, 0.1, 1); }).find("data.fold"), std::string::npos);
}

TEST(SentencePiece, TrainsEncodesAndRoundTripsThroughBytes) {
  std::vector<std::string> sentences;
  for (int i = 0; i < 300; ++i)
    sentences.push_back("the unbelievable movie was unwatchable number " + std::to_string(i % 17) + " indeed");
  const auto model = data::SubwordModel::train(sentences, 60, 1);
  const auto pieces = model.pieces("the unbelievable movie");
  EXPECT_FALSE(pieces.empty());
  std::string joined;
  for (const auto& p : pieces) joined += p;
  EXPECT_EQ(joined, "\xe2\x96\x81the\xe2\x96\x81unbelievable\xe2\x96\x81movie");  // pieces concatenate back ("▁" = space)
  const auto copy = data::SubwordModel::from_serialized(model.serialized(), "test");
  EXPECT_EQ(copy.pieces("unwatchable indeed"), model.pieces("unwatchable indeed"));
  EXPECT_NE(error_of([] { data::SubwordModel::from_serialized("not a model", "junk"); }).find("not a SentencePiece model"),
            std::string::npos);
}

// A sentence's logits must not depend on what else is in its batch (padding, bucketing).
TEST(Classifier, LogitsDoNotDependOnPaddingInTheBatch) {
  for (const std::string type : {"sru", "lstm"}) {
    for (bool bidirectional : {false, true}) {
      config::Config c = tiny_config(type);
      c.model.bidirectional = bidirectional;
      Generator gen(5);
      tasks::Classifier model(c, 30, 3, gen);
      model.eval();
      const std::vector<int64_t> short_ids = {4, 9, 2, 17}, long_ids = {3, 8, 8, 21, 5, 6, 29, 11, 2};
      Tensor alone = Tensor::from_vector(short_ids, {4, 1});
      std::vector<int64_t> batch(9 * 2, 0);
      for (int t = 0; t < 9; ++t) batch[t * 2 + 1] = long_ids[t];
      for (int t = 0; t < 4; ++t) batch[t * 2] = short_ids[t];
      const Tensor one = model.forward(alone, {4});
      const Tensor both = model.forward(Tensor::from_vector(batch, {9, 2}), {4, 9});
      const auto a = one.to_vector<double>(), b = both.to_vector<double>();
      for (int c = 0; c < 3; ++c) EXPECT_NEAR(a[c], b[c], 1e-5) << type << (bidirectional ? " bidirectional" : "");
    }
  }
}

TEST(ClassifyTask, LearnsASyntheticTaskAndItsCheckpointClassifiesWithoutData) {
  const std::string train = temp_file("last_word_train.txt", last_word_sentences(640, 1));
  const std::string test = temp_file("last_word_test.txt", last_word_sentences(200, 2));
  for (const std::string type : {"sru", "lstm"}) {
    config::Config cfg = tiny_config(type);
    cfg.data.path = train;
    options(cfg).test_path = test;
    Generator gen(11);
    tasks::ClassifyTask task(cfg, gen, {});
    EXPECT_EQ(task.steps_per_epoch(), 36);  // 576 training sentences (10% held out) in batches of 16
    EXPECT_LT(task.evaluate("test", 0).at("accuracy"), 0.75) << "untrained";
    train_epochs(task, 12, 0.01);
    const double accuracy = task.evaluate("test", 0).at("accuracy");
    EXPECT_GE(accuracy, 0.97) << type;
    EXPECT_EQ(task.evaluate("test", 0).at("examples"), 200);

    // The checkpoint carries the vocabulary: a task built from it alone predicts the same classes.
    nn::NamedTensors tensors = task.model().state();
    for (auto& e : task.extra_state()) tensors.push_back(e);
    const std::string path = sru::testing::tmp_dir() + "classify_" + type + ".safetensors";
    safetensors::save(path, tensors);
    const safetensors::File file = safetensors::load(path);
    Generator gen2(99);
    tasks::ClassifyTask restored(cfg, gen2, {/*load_data=*/false, &file});
    nn::load_state_from(restored.model(), file, path, {"task."});
    const std::vector<std::string> sentences = {"w1 w2 yes", "w3 no", "w19 w0 w0 w0 w0 w5 yes", "never-seen no"};
    EXPECT_EQ(restored.predict(sentences), task.predict(sentences));
    EXPECT_EQ(restored.predict(sentences), (std::vector<int64_t>{1, 0, 1, 0}));
    EXPECT_DOUBLE_EQ(restored.evaluate_file(test, 0, 0).at("accuracy"), accuracy);
  }
}

TEST(ClassifyTask, ConfigMistakesAreClearErrors) {
  config::Config cfg = tiny_config("sru");
  cfg.data.path = temp_file("cv.txt", last_word_sentences(100, 3));
  Generator gen(1);
  EXPECT_NE(error_of([&] { tasks::ClassifyTask(cfg, gen, {}); }).find("data.fold is -1"), std::string::npos);
  options(cfg).fold = 0;
  options(cfg).valid_path = cfg.data.path;
  EXPECT_NE(error_of([&] { tasks::ClassifyTask(cfg, gen, {}); }).find("data.valid_path is set"),
            std::string::npos);
  options(cfg).valid_path = "";
  options(cfg).vectors = temp_file("vec3.txt", "w1 1 2 3\n");
  EXPECT_NE(error_of([&] { tasks::ClassifyTask(cfg, gen, {}); }).find("model.embedding_size is 16"),
            std::string::npos);
  cfg.data.path = temp_file("one_class.txt", "0 a b\n0 c\n0 d\n0 e\n0 f\n0 g\n0 h\n0 i\n0 j\n0 k\n0 l\n0 m\n");
  options(cfg).vectors = "";
  EXPECT_NE(error_of([&] { tasks::ClassifyTask(cfg, gen, {}); }).find("two classes"), std::string::npos);
}

TEST(ClassifyTask, PretrainedVectorsFillKnownWordsAndCanBeFrozen) {
  config::Config cfg = tiny_config("sru");
  cfg.data.path = temp_file("vec_train.txt", last_word_sentences(100, 4));
  options(cfg).fold = 0;
  cfg.model.embedding_size = 3;
  cfg.model.freeze_embedding = true;
  options(cfg).vectors = temp_file("vec.txt", "yes 3 0 4\nno 0 0 2\nunused 1 1 1\n");
  Generator gen(1);
  tasks::ClassifyTask task(cfg, gen, {});
  EXPECT_EQ(task.pretrained_words(), 2);
  const Tensor w = task.model().state().front().second;  // embedding.weight
  EXPECT_FALSE(w.requires_grad());
  const auto row = [&](const std::string& word) {
    const auto all = w.to_vector<double>();
    const int64_t id = task.vocabulary().id(word);
    return std::vector<double>(all.begin() + id * 3, all.begin() + id * 3 + 3);
  };
  EXPECT_EQ(row("<pad>"), (std::vector<double>{0, 0, 0}));
  const auto yes = row("yes"), no = row("no"), w1 = row("w1");
  EXPECT_NEAR(yes[0], 0.6, 1e-6);  // unit-normalised (3, 0, 4)
  EXPECT_NEAR(yes[2], 0.8, 1e-6);
  EXPECT_NEAR(no[2], 1.0, 1e-6);
  for (double x : w1) EXPECT_TRUE(x >= -0.25 && x <= 0.25);  // not in the file: U(-0.25, 0.25)
  for (const auto& p : task.model().trainable_parameters()) EXPECT_FALSE(p.shares_storage(w));
}

// The reference protocol's options: the vocabulary from every split, every row normalised (random
// ones and pretrained ones alike, <pad> zero), and fixed batches that repeat every epoch.
TEST(ClassifyTask, ReferenceProtocolOptions) {
  config::Config cfg = tiny_config("sru");
  cfg.data.path = temp_file("proto_train.txt", "1 Good, isn't it?\n0 bad. don't\n1 fine! can't\n0 dull\n1 nice\n0 poor\n");
  options(cfg).test_path = temp_file("proto_test.txt", "1 unseen (word)\n");
  options(cfg).valid_fraction = 0.2;
  cfg.data.batch_size = 2;
  cfg.model.embedding_size = 3;
  options(cfg).tokenizer = "clean_str";
  options(cfg).lowercase = true;
  options(cfg).vectors = temp_file("proto_vec.txt", "good 3 0 4\nnice 0 0 2\n");
  options(cfg).normalize_vectors = false;
  cfg.model.dropout = cfg.model.embedding_dropout = cfg.model.output_dropout = 0;  // a loss depends on its batch only
  {
    Generator gen(1);
    tasks::ClassifyTask task(cfg, gen, {});
    EXPECT_EQ(task.vocabulary().id("unseen"), data::Vocabulary::kUnk);  // vocab_from train
    EXPECT_NE(task.vocabulary().id("n't"), data::Vocabulary::kUnk);  // in 3 sentences, 1 of 6 held out
    EXPECT_EQ(task.vocabulary().id("bad."), data::Vocabulary::kUnk);
  }
  options(cfg).vocab_from = "all";
  options(cfg).normalize_embeddings = true;
  options(cfg).batching = "fixed";
  Generator gen(1);
  tasks::ClassifyTask task(cfg, gen, {});
  EXPECT_NE(task.vocabulary().id("unseen"), data::Vocabulary::kUnk);
  EXPECT_NE(task.vocabulary().id("\\("), data::Vocabulary::kUnk);
  const std::vector<double> w = task.model().state().front().second.to_vector<double>();  // embedding.weight
  for (int64_t id = 0; id < task.vocabulary().size(); ++id) {
    double norm = 0;
    for (int64_t j = 0; j < 3; ++j) norm += w[id * 3 + j] * w[id * 3 + j];
    EXPECT_NEAR(norm, id == data::Vocabulary::kPad ? 0.0 : 1.0, 1e-6) << task.vocabulary().words()[id];
  }
  const int64_t good = task.vocabulary().id("good");
  EXPECT_NEAR(w[good * 3 + 0], 0.6, 1e-6);  // (3, 0, 4) scaled although normalize_vectors is off
  EXPECT_NEAR(w[good * 3 + 2], 0.8, 1e-6);

  // Fixed batches: every training example once, the same batches in the same order every epoch.
  auto epoch = [&](int64_t e) {
    task.start_epoch(e, 0);
    std::vector<double> losses;
    for (int64_t i = 0; i < task.steps_per_epoch(); ++i) losses.push_back(task.forward_step(i).loss.item<double>());
    return losses;
  };
  EXPECT_EQ(task.steps_per_epoch(), 3);  // 5 training sentences in batches of 2
  const auto first = epoch(0), second = epoch(5);
  EXPECT_EQ(first, second);
}

// The real data sets, when mirrored beside the project (skipped without them): counts and classes
// as the paper's data README gives them.
TEST(LabeledText, PublishedDataSetsWhenMirrored) {
  const std::string dir = std::string(SRU_SOURCE_DIR) + "/../shared/data/sentclass/";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no classification data at " << dir;
  struct Expected {
    const char* file;
    size_t sentences, label_only;
    int64_t classes;
  };
  for (const Expected& e : {Expected{"rt-polarity.all", 10662, 0, 2}, Expected{"subj.all", 10000, 0, 2},
                            Expected{"custrev.all", 3771, 4, 2}, Expected{"mpqa.all", 10603, 3, 2},
                            Expected{"TREC.train.all", 5452, 0, 6}, Expected{"TREC.test.all", 500, 0, 6},
                            Expected{"stsa.binary.phrases.train", 76961, 0, 2}, Expected{"stsa.binary.dev", 872, 0, 2},
                            Expected{"stsa.binary.test", 1821, 0, 2}}) {
    const data::LabeledFile f = data::read_labeled_file(dir + e.file);
    EXPECT_EQ(f.sentences.size(), e.sentences) << e.file;
    EXPECT_EQ(f.lines_without_words.size(), e.label_only) << e.file;
    std::set<int64_t> labels;
    for (const auto& s : f.sentences) labels.insert(s.label);
    EXPECT_EQ(static_cast<int64_t>(labels.size()), e.classes) << e.file;
    EXPECT_EQ(*labels.rbegin(), e.classes - 1) << e.file;
  }
}
