// The SQuAD task and its Document Reader: span decoding, batches and token features, the reader's
// gradient against finite differences, partial fine-tuning of the embedding, learning the shipped
// sample, and answers that are exact substrings of their paragraphs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "data/squad_metric.h"
#include "ops/elementwise.h"
#include "ops/softmax.h"
#include "tasks/squad.h"
#include "testing.h"
#include "train/step.h"
#include "train/trainer.h"

using namespace sru;
using sru::testing::error_of;
using sru::testing::temp_file;

namespace {

const std::string kSample = std::string(SRU_SOURCE_DIR) + "/data/squad-sample/dev-v1.1.sample.json";

config::Config tiny_reader(const std::string& encoder) {
  config::Config c = config::Config::defaults("squad", encoder);
  c.data.path = kSample;
  c.task_as<tasks::SquadOptions>().valid_path = kSample;
  c.task_as<tasks::SquadOptions>().lowercase = true;
  c.data.batch_size = 16;
  c.data.eval_batch_size = 64;
  c.model.embedding_size = 16;
  c.model.hidden_size = 16;
  c.model.num_layers = 2;
  c.model.bidirectional = true;
  c.train.optimizer = "adamax";
  c.train.lr = 0.002;
  c.train.seed = 5;
  return c;
}

const float kInf = std::numeric_limits<float>::infinity();

}  // namespace

TEST(SquadSpan, BestSpanRespectsOrderLengthAndTheParagraphsEnd) {
  // start prefers 3, end prefers 1: an end before its start is not allowed.
  const std::vector<float> start = {0, 1, 0, 5, 0, -kInf}, end = {0, 6, 0, 1, 3, -kInf};
  const tasks::Span s = tasks::best_span(start.data(), end.data(), 5, 15);
  EXPECT_EQ(s.start, 3);
  EXPECT_EQ(s.end, 4);
  // At most max_span tokens: with 1 the span is one token.
  const tasks::Span one = tasks::best_span(start.data(), end.data(), 5, 1);
  EXPECT_EQ(one.start, one.end);
  // The probabilities are over the paragraph's own tokens: here 3 of them.
  const std::vector<float> flat = {0, 0, 0, 9, 9};
  const tasks::Span three = tasks::best_span(flat.data(), flat.data(), 3, 15);
  EXPECT_LE(three.end, 2);
  EXPECT_NEAR(three.probability, 1.0 / 9, 1e-9);
}

TEST(SquadTask, BatchesCarryIdsMasksAndTokenFeatures) {
  config::Config cfg = tiny_reader("sru");
  const std::string file = temp_file("squad_features.json", R"({"version": "1.1", "data": [{"title": "T", "paragraphs": [
      {"context": "Paris is the capital of France. france!", "qas": [
        {"id": "q1", "question": "What is the capital of France?", "answers": [{"text": "Paris", "answer_start": 0}]}]},
      {"context": "A cat.", "qas": [{"id": "q2", "question": "Who?", "answers": [{"text": "cat", "answer_start": 2}]}]}]}]})");
  cfg.data.path = file;
  cfg.task_as<tasks::SquadOptions>().valid_path = file;
  cfg.task_as<tasks::SquadOptions>().lowercase = false;
  Generator gen(1);
  auto task = tasks::make_task(cfg, gen);
  EXPECT_EQ(task->file_evaluation()->evaluate_file(file, 0, 0).at("questions"), 2);
  EXPECT_EQ(task->steps_per_epoch(), 1);
  task->start_epoch(0, 0);
  const tasks::StepResult r = task->forward_step(0);
  EXPECT_TRUE(std::isfinite(r.loss.item<double>()));
  EXPECT_EQ(r.tokens, 9 + 7 + 3 + 2) << "paragraph and question tokens of both examples";

  // Features of q1's paragraph: "France" is in the question; "france" matches only in lower case.
  data::SquadDataset d = data::read_squad(file);
  tasks::ReaderSplit s;
  s.context_text = {d.paragraphs[0].context};
  s.contexts = {data::tokenize(d.paragraphs[0].context)};
  s.context_ids = {std::vector<int64_t>(s.contexts[0].size(), 2)};
  s.term_frequency = {std::vector<float>(s.contexts[0].size(), 0.25f)};
  tasks::ReaderSplit::Example e;
  e.question = data::tokenize(d.paragraphs[0].questions[0].question);
  e.question_ids = std::vector<int64_t>(e.question.size(), 3);
  s.examples = {e, e};
  s.examples[1].question_ids.resize(2);
  const tasks::ReaderBatch b = s.batch({0, 1});
  ASSERT_EQ(b.doc.shape(), (Shape{9, 2}));
  ASSERT_EQ(b.question.shape(), (Shape{7, 2}));
  const auto f = b.doc_features.to_vector<double>();
  auto feature = [&](int64_t t, int64_t k) { return f[(t * 2 + 0) * 3 + k]; };
  EXPECT_EQ(feature(0, 0), 0);  // Paris: not in the question
  EXPECT_EQ(feature(0, 1), 0);
  EXPECT_EQ(feature(5, 0), 1);  // France
  EXPECT_EQ(feature(7, 0), 0);  // france: not the original form
  EXPECT_EQ(feature(7, 1), 1);  // ... but the lower-cased one
  EXPECT_EQ(feature(1, 1), 1);  // is
  EXPECT_EQ(feature(4, 0), 1);  // of
  EXPECT_FLOAT_EQ(feature(2, 2), 0.25f);
  const auto qm = b.question_mask_bf.to_vector<double>();
  EXPECT_EQ(qm[1 * 7 + 1], 0);
  EXPECT_EQ(qm[1 * 7 + 2], 1) << "the second example's question has 2 tokens";
  EXPECT_EQ(b.question_mask.to_vector<double>()[2 * 2 + 1], 1) << "time-major mask agrees";
}

TEST(SquadTask, ReaderGradientMatchesFiniteDifferences) {
  // The whole reader (embedding, aligned attention, two encoders, pooling, bilinear scores, loss) in
  // float32: the directional derivative along a random direction against central differences.
  for (const std::string encoder : {"sru", "lstm"}) {
    config::Config cfg = tiny_reader(encoder);
    cfg.data.batch_size = 4;
    Generator gen(3);
    auto task = tasks::make_task(cfg, gen);
    task->start_epoch(0, 0);
    auto loss_at = [&] {
      autograd::NoGradGuard no_grad;
      return task->forward_step(0).loss.item<double>();
    };
    autograd::backward(task->forward_step(0).loss);
    Generator dir(11);
    double analytic = 0;
    std::vector<std::pair<Tensor, Tensor>> directions;
    for (auto& [name, p] : task->model().named_parameters()) {
      if (!p.requires_grad()) continue;
      Tensor v = Tensor::uniform(p.shape(), -1, 1, DType::F32, dir);
      if (p.grad().defined()) {
        const auto g = p.grad().to_vector<double>(), vv = v.to_vector<double>();
        for (size_t i = 0; i < g.size(); ++i) analytic += g[i] * vv[i];
      }
      directions.emplace_back(p, v);
    }
    const double eps = 1e-3;
    auto shift = [&](double by) {
      for (auto& [p, v] : directions) p.add_(v, by);
    };
    shift(eps);
    const double plus = loss_at();
    shift(-2 * eps);
    const double minus = loss_at();
    shift(eps);
    const double numeric = (plus - minus) / (2 * eps);
    EXPECT_NEAR(numeric, analytic, 0.02 * std::abs(analytic) + 1e-3) << encoder;
  }
}

TEST(SquadTask, LearnsTheShippedSampleAndAnswersAreSubstrings) {
  config::Config cfg = tiny_reader("sru");
  cfg.model.embedding_size = 32;
  cfg.train.lr = 0.01;
  Generator gen(1);
  auto task = tasks::make_task(cfg, gen);
  const tasks::Metrics before = task->evaluate("valid", 0);
  EXPECT_LT(before.at("f1"), 15);
  const auto optimizer = train::make_optimizer(cfg.train, task->model());
  train::TrainingStep step(*task, *optimizer, cfg.train, train::schedule_options(cfg.train, 32, 1000));
  int64_t taken = 0;
  for (int64_t epoch = 0; epoch < 6; ++epoch) {
    task->start_epoch(epoch, 0);
    for (int64_t i = 0; i < task->steps_per_epoch(); ++i) ASSERT_EQ(step.run(i, ++taken, epoch).kind,
                                                                    train::StepOutcome::Kind::Updated);
  }
  // Trained and evaluated on the same 336 questions: the reader memorises them.
  std::ostringstream out;
  const tasks::Metrics m = task->prediction()->evaluate_with_predictions("valid", "", out);
  EXPECT_GT(m.at("f1"), 60) << "before training: " << before.at("f1");
  EXPECT_EQ(m.at("questions"), 336);
  const auto predictions = nlohmann::json::parse(out.str());
  ASSERT_EQ(predictions.size(), 336u);
  // The written predictions score exactly the metrics reported, through the official metric.
  data::SquadPredictions p;
  for (const auto& [id, answer] : predictions.items()) p[id] = answer.get<std::string>();
  const data::SquadDataset d = data::read_squad(kSample);
  const data::SquadScore s = data::score_squad(d, p);
  EXPECT_DOUBLE_EQ(s.f1, m.at("f1"));
  EXPECT_DOUBLE_EQ(s.exact_match, m.at("exact_match"));
  for (const auto& para : d.paragraphs)
    for (const auto& q : para.questions) {
      const std::string& answer = p.at(q.id);
      EXPECT_NE(para.context.find(answer), std::string::npos) << q.id << ": '" << answer << "'";
    }
  EXPECT_EQ(error_of([&] { task->evaluate("test", 0); }), "task squad has no split 'test' (its splits: train, valid)");
}

TEST(SquadTask, PartialFineTuningKeepsTheOtherRowsOfTheEmbedding) {
  // Vectors for a handful of sample words: with tune_partial 3 only <unk> and the 3 most frequent
  // question words change; every other row keeps its vector through training steps.
  config::Config cfg = tiny_reader("lstm");
  cfg.model.embedding_size = 4;
  std::string text;
  for (const char* w : {"the", "what", "of", "in", "black", "death", "yuan", "dynasty", "plague", "europe", "china"})
    text += std::string(w) + " 0.1 0.2 0.3 0.4\n";
  cfg.task_as<tasks::SquadOptions>().vectors = temp_file("squad_vectors.txt", text);
  cfg.task_as<tasks::SquadOptions>().tune_partial = 3;
  Generator gen(1);
  auto task = tasks::make_task(cfg, gen);
  EXPECT_EQ(task->vocabulary_name(), "words-13 (task.vocab)") << "<pad>, <unk> and the 11 covered words";
  const Tensor w = task->model().named_parameters().front().second;
  const auto before = w.to_vector<double>();
  const auto optimizer = train::make_optimizer(cfg.train, task->model());
  train::TrainingStep step(*task, *optimizer, cfg.train, train::schedule_options(cfg.train, 4, 100));
  task->start_epoch(0, 0);
  for (int64_t i = 0; i < 3; ++i) step.run(i, i + 1, 0);
  const auto after = w.to_vector<double>();
  int changed = 0, kept_vector = 0;
  for (int64_t row = 0; row < 13; ++row) {
    bool same = true;
    for (int k = 0; k < 4; ++k) same = same && after[row * 4 + k] == before[row * 4 + k];
    changed += !same;
    kept_vector += same && row >= 2 && after[row * 4] == 0.1f;
  }
  EXPECT_EQ(changed, 4) << "<unk> and 3 question words";
  EXPECT_EQ(kept_vector, 13 - 2 - 3);
}
