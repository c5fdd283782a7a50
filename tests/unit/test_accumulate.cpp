// Gradient accumulation (train.accumulate, train/step.h) and the tasks' label-smoothed training loss
// (train.label_smoothing): N batches accumulated take the one update a step on their union takes
// (a scripted float64 task, and the classifier's fixed batches), grouping of an epoch's batches into
// steps, the config's refusals, and label smoothing changing the training loss but not the metrics.
#include <gtest/gtest.h>

#include <cmath>

#include "config/config.h"
#include "nn/layers.h"
#include "ops/ops.h"
#include "tasks/classify.h"
#include "tasks/lm.h"
#include "tasks/registry.h"
#include "testing.h"
#include "train/step.h"
#include "train/trainer.h"

using namespace sru;
using sru::testing::error_of;
using sru::testing::last_word_sentences;
using sru::testing::temp_file;

namespace {

// A linear classifier in float64 over fixed random rows, whose training batches are given lists of
// rows; target -100 rows are ignored (so a batch's loss terms differ from its rows).
class ScriptedTask final : public tasks::Task {
 public:
  ScriptedTask(std::vector<std::vector<int64_t>> batches, const config::TrainConfig& train)
      : batches_(std::move(batches)), train_(train) {
    Generator gen(5);
    model_.add(std::make_shared<nn::Linear>(3, 4, true, DType::F64, gen));
    x_ = Tensor::uniform({16, 3}, -2, 2, DType::F64, gen);
    const std::vector<int64_t> y = {0, 1, 2, 3, -100, 1, 2, 0, 3, 3, -100, 1, 0, 2, 1, -100};
    y_ = y;
  }
  nn::Module& model() override { return model_; }
  int64_t model_size() const override { return 4; }
  int64_t steps_per_epoch() const override { return static_cast<int64_t>(batches_.size()); }
  void start_epoch(int64_t, int64_t) override {}
  tasks::StepResult forward_step(int64_t index) override {
    const std::vector<int64_t>& rows = batches_.at(index);
    std::vector<int64_t> target;
    int64_t counted = 0;
    for (int64_t r : rows) {
      target.push_back(y_[r]);
      counted += y_[r] != -100;
    }
    const Tensor x = index_select(x_, 0, Tensor::from_vector(rows, {static_cast<int64_t>(rows.size())}));
    const Tensor logits = model_.linear->forward(x);
    const Tensor t = Tensor::from_vector(target, {static_cast<int64_t>(target.size())});
    return {tasks::training_cross_entropy(logits, t, train_), static_cast<int64_t>(rows.size()), 1.0, counted};
  }
  tasks::Metrics evaluate(const std::string&, int64_t) override { return {}; }
  std::vector<tasks::MetricSpec> metrics() const override { return {{"loss"}}; }
  std::string vocabulary_name() const override { return "none"; }

 private:
  struct Model : nn::Module {
    void add(std::shared_ptr<nn::Linear> l) { linear = register_module("linear", std::move(l)); }
    std::shared_ptr<nn::Linear> linear;
  };
  Model model_;
  std::vector<std::vector<int64_t>> batches_;
  config::TrainConfig train_;
  Tensor x_;
  std::vector<int64_t> y_;
};

config::TrainConfig scripted_train() {
  config::TrainConfig t;
  t.optimizer = "adam";
  t.lr = 0.05;
  t.clip_grad_norm = 0.3;  // active: the clipping must see the summed gradient, once
  t.label_smoothing = 0.1;
  return t;
}

std::vector<int64_t> rows(int64_t from, int64_t to) {
  std::vector<int64_t> r;
  for (int64_t i = from; i < to; ++i) r.push_back(i);
  return r;
}

}  // namespace

TEST(Accumulate, StepsOfAnEpochTakeTheBatchesLeftAtTheEnd) {
  EXPECT_EQ(train::steps_per_epoch(6, 1), 6);
  EXPECT_EQ(train::steps_per_epoch(6, 2), 3);
  EXPECT_EQ(train::steps_per_epoch(7, 2), 4);
  EXPECT_EQ(train::steps_per_epoch(2, 5), 1);
  EXPECT_EQ(train::batches_of_step(0, 7, 2), 2);
  EXPECT_EQ(train::batches_of_step(6, 7, 2), 1);
  EXPECT_EQ(train::batches_of_step(0, 2, 5), 2);
}

// Two updates, each over batches of unequal loss terms (ignored rows inside), equal the updates of
// one step on each union: Adam (its step count too), clipping, label smoothing, the reported loss
// (the union's mean) and gradient norm. float64: equal to rounding.
TEST(Accumulate, BatchesAccumulatedEqualOneStepOnTheirUnion) {
  const config::TrainConfig train = scripted_train();
  // Batches of 3, 5 (1 ignored) | 4 (1 ignored), 2, 2 (1 ignored) rows, and their unions.
  ScriptedTask split({rows(0, 3), rows(3, 8), rows(8, 12), rows(12, 14), rows(14, 16)}, train);
  ScriptedTask whole({rows(0, 8), rows(8, 16)}, train);
  const auto opt_split = train::make_optimizer(train, split.model()), opt_whole = train::make_optimizer(train, whole.model());
  const auto schedule = train::schedule_options(train, 4, 10);
  train::TrainingStep step_split(split, *opt_split, train, schedule), step_whole(whole, *opt_whole, train, schedule);
  const std::vector<std::pair<int64_t, int64_t>> groups = {{0, 2}, {2, 3}};
  for (int64_t s = 0; s < 2; ++s) {
    const train::StepOutcome a = step_split.run(groups[s].first, groups[s].second, s + 1, 0);
    const train::StepOutcome b = step_whole.run(s, s + 1, 0);
    ASSERT_EQ(a.kind, train::StepOutcome::Kind::Updated);
    EXPECT_NEAR(a.loss, b.loss, 1e-14) << "step " << s + 1;
    EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-14) << "step " << s + 1;
    EXPECT_GT(b.grad_norm, train.clip_grad_norm) << "clipping is active";
    EXPECT_EQ(a.tokens, b.tokens);
    const nn::NamedTensors pa = split.model().named_parameters(), pb = whole.model().named_parameters();
    for (size_t k = 0; k < pa.size(); ++k)
      EXPECT_TRUE(sru::testing::tensors_near(pa[k].second, pb[k].second, 1e-13, 0)) << "step " << s + 1 << " " << pa[k].first;
    for (const auto& [name, p] : split.model().named_parameters()) EXPECT_FALSE(p.grad().defined()) << name;
  }
  EXPECT_EQ(opt_split->steps(), 2) << "one optimiser step per update";
  // Accumulating a different grouping is a different update (the test can tell).
  ScriptedTask other({rows(0, 3), rows(3, 8)}, train);
  const auto opt_other = train::make_optimizer(train, other.model());
  train::TrainingStep step_other(other, *opt_other, train, schedule);
  step_other.run(0, 1, 0);
  step_other.run(1, 2, 0);
  ScriptedTask fresh({rows(0, 8)}, train);
  const auto opt_fresh = train::make_optimizer(train, fresh.model());
  train::TrainingStep step_fresh(fresh, *opt_fresh, train, schedule);
  step_fresh.run(0, 1, 0);
  EXPECT_FALSE(sru::testing::tensors_near(other.model().named_parameters()[0].second,
                                          fresh.model().named_parameters()[0].second, 1e-6, 0));
}

// The real classifier: fixed batches of 2 accumulated in pairs are the fixed batches of 4 (one seeded
// order cut into consecutive batches), so the updates match one step per batch of 4. No dropout; the
// batches of 4 pad to their longest sentence, the pairs to theirs (masked: the same outputs); float32.
TEST(Accumulate, ClassifierPairsOfBatchesEqualBatchesOfTheirUnion) {
  auto make = [](int64_t batch, int64_t accumulate) {
    config::Config c = config::Config::defaults("classify", "sru");
    c.data.path = temp_file("accumulate_train.txt", last_word_sentences(22, 5, 9, 12));  // 4 x 5 + 2
    auto& o = c.task_as<tasks::ClassifyOptions>();
    o.valid_path = temp_file("accumulate_valid.txt", last_word_sentences(8, 6, 9, 12));
    o.test_path = temp_file("accumulate_test.txt", last_word_sentences(8, 7, 9, 12));
    o.batching = "fixed";
    c.data.batch_size = batch;
    c.model.embedding_size = 8;
    c.model.hidden_size = 8;
    c.model.num_layers = 2;
    c.train.optimizer = "sgd";
    c.train.lr = 0.5;
    c.train.clip_grad_norm = 0.5;
    c.train.label_smoothing = 0.2;
    c.train.accumulate = accumulate;
    c.train.seed = 3;
    return c;
  };
  const config::Config pairs = make(2, 2), fours = make(4, 1);
  Generator gen_a(3), gen_b(3);
  auto a = tasks::make_task(pairs, gen_a), b = tasks::make_task(fours, gen_b);
  ASSERT_EQ(a->steps_per_epoch(), 11);
  ASSERT_EQ(b->steps_per_epoch(), 6);
  ASSERT_EQ(train::steps_per_epoch(a->steps_per_epoch(), 2), 6);
  const auto opt_a = train::make_optimizer(pairs.train, a->model()), opt_b = train::make_optimizer(fours.train, b->model());
  train::TrainingStep step_a(*a, *opt_a, pairs.train, train::schedule_options(pairs.train, 8, 6));
  train::TrainingStep step_b(*b, *opt_b, fours.train, train::schedule_options(fours.train, 8, 6));
  a->start_epoch(0, 0);
  b->start_epoch(0, 0);
  for (int64_t s = 0; s < 6; ++s) {
    const int64_t first = 2 * s, count = train::batches_of_step(first, 11, 2);  // the last step: one batch of 2
    const train::StepOutcome ra = step_a.run(first, count, s + 1, 0), rb = step_b.run(s, s + 1, 0);
    EXPECT_NEAR(ra.loss, rb.loss, 1e-6 * std::abs(rb.loss)) << "step " << s + 1;
    EXPECT_NEAR(ra.grad_norm, rb.grad_norm, 1e-6 * rb.grad_norm) << "step " << s + 1;
    const nn::NamedTensors pa = a->model().named_parameters(), pb = b->model().named_parameters();
    for (size_t k = 0; k < pa.size(); ++k)
      EXPECT_TRUE(sru::testing::tensors_near(pa[k].second, pb[k].second, 1e-6, 1e-6)) << "step " << s + 1 << " " << pa[k].first;
  }
}

TEST(Accumulate, ConfigRefusesZeroAndLabelSmoothingOfOne) {
  const std::string path = temp_file("accumulate.yaml", "task: charlm\ndata:\n  path: x.txt\n");
  const std::string zero = error_of([&] { config::load_config(path, {"train.accumulate=0"}); });
  EXPECT_NE(zero.find("train.accumulate: 0 is out of range: must be >= 1"), std::string::npos) << zero;
  const std::string one = error_of([&] { config::load_config(path, {"train.label_smoothing=1"}); });
  EXPECT_NE(one.find("train.label_smoothing: 1 is out of range: must be >= 0 and < 1"), std::string::npos) << one;
  const std::string negative = error_of([&] { config::load_config(path, {"train.label_smoothing=-0.1"}); });
  EXPECT_NE(negative.find("train.label_smoothing: -0.1 is out of range"), std::string::npos) << negative;
  const config::Config ok = config::load_config(path, {"train.accumulate=4", "train.label_smoothing=0.1"});
  EXPECT_EQ(ok.train.accumulate, 4);
  EXPECT_EQ(ok.train.label_smoothing, 0.1);
  EXPECT_EQ(config::load_config(path).train.accumulate, 1);
  EXPECT_EQ(config::load_config(path).train.label_smoothing, 0.0);
}

// The char-LM's training loss is label-smoothed (and linear in eps: the same dropout masks and
// logits), while its evaluation (bpc, loss) is the plain log-likelihood whatever eps is.
TEST(LabelSmoothing, TrainingLossOnlyTheMetricsStayTheLikelihood) {
  std::vector<double> losses;
  tasks::Metrics first;
  for (double eps : {0.0, 0.1, 0.2}) {
    config::Config c = config::Config::defaults("charlm", "sru");
    c.data.path = temp_file("smoothing.txt", last_word_sentences(60, 2));
    c.data.batch_size = 2;
    c.data.eval_batch_size = 2;
    c.task_as<tasks::LMOptions>().bptt = 8;
    c.model.embedding_size = c.model.hidden_size = 8;
    c.model.dropout = 0.2;
    c.train.label_smoothing = eps;
    Generator gen(4);
    auto task = tasks::make_task(c, gen);
    const tasks::Metrics m = task->evaluate("valid", 0);
    if (eps == 0.0) first = m;
    for (const auto& [name, value] : first) EXPECT_EQ(m.at(name), value) << name << " with eps " << eps;
    task->start_epoch(0, 0);
    losses.push_back(task->forward_step(0).loss.item<double>());
  }
  EXPECT_NE(losses[1], losses[0]);
  EXPECT_NEAR(losses[2] - losses[1], losses[1] - losses[0], 1e-5);
}
