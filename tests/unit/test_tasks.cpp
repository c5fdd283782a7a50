// Tasks through the registry and the trainer's pieces: the token-stream language model over bytes and
// words, weight tying, the shared training step (schedule, non-finite policy), splits and capabilities
// refused by name, resuming without a run directory, and cross-validation driven by the task's metric.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "autograd/engine.h"
#include "core/safetensors.h"
#include "nn/checkpoint.h"
#include "optim/schedule.h"
#include "tasks/classify.h"
#include "tasks/lm.h"
#include "tasks/registry.h"
#include "testing.h"
#include "train/checkpoint.h"
#include "train/run_files.h"
#include "train/step.h"
#include "train/trainer.h"

using namespace sru;
using sru::testing::error_of;
using sru::testing::temp_file;

namespace {

// A word "corpus" with a learnable pattern: "a b c d" repeated, with a few other words.
std::string word_text(int lines, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out;
  for (int i = 0; i < lines; ++i) {
    out += " a b c d";
    if (rng() % 3 == 0) out += " e";
    out += rng() % 2 ? " f\n" : " <unk>\n";
  }
  return out;
}

config::Config tiny_lm(const std::string& task) {
  config::Config c = config::Config::defaults(task, "sru");
  c.data.batch_size = 4;
  c.data.eval_batch_size = 2;
  c.model.embedding_size = 8;
  c.model.hidden_size = 8;
  c.model.num_layers = 2;
  c.train.seed = 3;
  c.task_as<tasks::LMOptions>().bptt = 6;
  return c;
}

config::Config tiny_wordlm() {
  config::Config c = tiny_lm("wordlm");
  c.data.path = temp_file("ptb_like.train.txt", word_text(60, 1));
  c.task_as<tasks::LMOptions>().valid_path = temp_file("ptb_like.valid.txt", word_text(12, 2));
  c.task_as<tasks::LMOptions>().test_path = temp_file("ptb_like.test.txt", word_text(12, 3));
  return c;
}

}  // namespace

TEST(WordLM, VocabularyFromTheTrainingFileWithEosAndPerplexity) {
  config::Config cfg = tiny_wordlm();
  Generator gen(1);
  auto task = tasks::make_task(cfg, gen);
  EXPECT_EQ(task->name(), "wordlm");
  EXPECT_EQ(task->token_name(), "words");
  // a b c d <eos> appear on every line; e, f, <unk> on some: 8 words.
  EXPECT_EQ(task->vocabulary_name(), "words-8 (task.vocab)");
  const tasks::Metrics before = task->evaluate("valid", 0);
  EXPECT_NEAR(before.at("ppl"), std::exp(before.at("loss")), 1e-9);
  EXPECT_GT(before.at("ppl"), 4.0) << "an untrained model is close to uniform over 8 words";
  EXPECT_EQ(tasks::format_metrics(*task, before).rfind("ppl ", 0), 0u) << "perplexity first, 2 decimals";

  const auto optimizer = train::make_optimizer(cfg.train, task->model());
  train::TrainingStep step(*task, *optimizer, cfg.train, train::schedule_options(cfg.train, 8, 100));
  int64_t taken = 0;
  for (int64_t epoch = 0; epoch < 15; ++epoch) {
    task->start_epoch(epoch, 0);
    for (int64_t i = 0; i < task->steps_per_epoch(); ++i) step.run(i, ++taken, epoch);
  }
  const double ppl = task->evaluate("valid", 0).at("ppl");
  EXPECT_LT(ppl, 3.0) << "the a-b-c-d pattern is learnt";

  // The checkpoint carries the vocabulary: a task built from it alone evaluates a file the same way.
  nn::NamedTensors tensors = task->model().state();
  for (auto& e : task->extra_state()) tensors.push_back(e);
  const std::string path = sru::testing::tmp_dir() + "wordlm.safetensors";
  safetensors::save(path, tensors);
  const safetensors::File file = safetensors::load(path);
  Generator gen2(7);
  auto restored = tasks::make_task(cfg, gen2, {/*load_data=*/false, &file});
  nn::load_state_from(restored->model(), file, path, {"task."});
  const std::string valid = cfg.task_as<tasks::LMOptions>().valid_path;
  EXPECT_DOUBLE_EQ(restored->file_evaluation()->evaluate_file(valid, 0, 0).at("ppl"),
                   task->file_evaluation()->evaluate_file(valid, 0, 0).at("ppl"));
  tasks::GenerationOptions how;
  how.tokens = 12;
  how.sampling.temperature = 0.5;
  const auto samples = restored->generation()->generate("a b", how);
  ASSERT_EQ(samples.size(), 1u);
  ASSERT_EQ(samples[0].size(), 1u);
  EXPECT_FALSE(samples[0][0].empty());
}

TEST(WordLM, WordsOutsideTheVocabularyAreUnkOrAnErrorNamingTheLine) {
  config::Config cfg = tiny_wordlm();
  cfg.task_as<tasks::LMOptions>().valid_path = temp_file("oov.valid.txt", " a b\n a zebra\n");
  Generator gen(1);
  auto task = tasks::make_task(cfg, gen);  // the training file has <unk>: zebra reads as <unk>
  EXPECT_EQ(task->evaluate("valid", 0).at("words"), 6 - 2) << "5 tokens + 1 eos in 2 streams of 3: 2x(3-1) predictions";
  cfg.data.path = temp_file("no_unk.train.txt", " a b c\n c b a\n a a b b c c\n a b c a b c a b c\n");
  EXPECT_NE(error_of([&] { tasks::make_task(cfg, gen); }).find("oov.valid.txt:2: word 'zebra' is not in the vocabulary"),
            std::string::npos);
}

TEST(Tasks, UnknownSplitsAreRefusedNamingTheTaskAndItsSplits) {
  config::Config cfg = tiny_lm("charlm");
  cfg.data.path = temp_file("bytes.txt", std::string(400, 'x'));
  Generator gen(1);
  auto lm = tasks::make_task(cfg, gen);
  EXPECT_EQ(error_of([&] { lm->evaluate("dev", 0); }), "task charlm has no split 'dev' (its splits: train, valid, test)");
  EXPECT_EQ(error_of([&] { lm->metric("chars"); }), "task charlm reports no metric 'chars' (its metrics: bpc, loss)");
  EXPECT_EQ(lm->prediction(), nullptr) << "a language model does not classify";
  config::Config c = config::Config::defaults("classify", "lstm");
  c.data.path = temp_file("two.txt", "0 a b\n1 c d\n0 a\n1 d\n0 b\n1 c\n0 a a\n1 d d\n0 b b\n1 c c\n");
  c.task_as<tasks::ClassifyOptions>().fold = 0;
  c.task_as<tasks::ClassifyOptions>().folds = 2;
  c.task_as<tasks::ClassifyOptions>().valid_fraction = 0.2;
  auto classify = tasks::make_task(c, gen);
  EXPECT_NE(error_of([&] { classify->evaluate("tst", 0); }).find("task classify has no split 'tst'"), std::string::npos);
  EXPECT_EQ(classify->generation(), nullptr);
}

TEST(LanguageModel, TiedWeightsAreOneParameterUpdatedOnceAndSavedOnce) {
  config::Config cfg = tiny_lm("charlm");
  cfg.task_as<tasks::LMOptions>().tie_weights = true;
  cfg.data.path = temp_file("tied.txt", std::string("abcabdabcabd", 12) + std::string(600, 'q'));
  cfg.train.optimizer = "sgd";
  cfg.train.lr = 0.5;
  Generator gen(1);
  auto task = tasks::make_task(cfg, gen);
  const nn::NamedTensors params = task->model().named_parameters();
  const auto has = [&](const std::string& n) {
    return std::any_of(params.begin(), params.end(), [&](const auto& p) { return p.first == n; });
  };
  EXPECT_TRUE(has("embedding.weight"));
  EXPECT_FALSE(has("output.weight")) << "the tied matrix is listed once, under its first name";
  EXPECT_TRUE(has("output.bias"));
  const Tensor shared = params.front().second;

  // The gradient of a step sums both uses; the update applies it once: w - lr * (g_embedding + g_output).
  task->start_epoch(0, 0);
  autograd::backward(task->forward_step(0).loss);
  const Tensor grad = shared.grad().clone();
  task->model().zero_grad();
  task->reset_carried_state();
  const Tensor before = shared.clone();
  const auto optimizer = train::make_optimizer(cfg.train, task->model());
  EXPECT_EQ(optimizer->parameters().size(), params.size());
  train::TrainingStep step(*task, *optimizer, cfg.train, train::schedule_options(cfg.train, 8, 10));
  ASSERT_EQ(step.run(0, 1, 0).kind, train::StepOutcome::Kind::Updated);
  const auto b = before.to_vector<double>(), g = grad.to_vector<double>(), a = shared.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i] - 0.5 * g[i], 1e-6) << i;

  // Saved once; a tied model loads it back.
  const std::string path = sru::testing::tmp_dir() + "tied.safetensors";
  safetensors::save(path, task->model().state());
  const safetensors::File file = safetensors::load(path);
  EXPECT_NE(file.find("embedding.weight"), nullptr);
  EXPECT_EQ(file.find("output.weight"), nullptr);
  Generator gen2(9);
  auto again = tasks::make_task(cfg, gen2);
  nn::load_state_from(again->model(), file, path, {});
  EXPECT_EQ(again->model().named_parameters().front().second.to_vector<double>(), a);

  cfg.model.embedding_size = 6;
  EXPECT_NE(error_of([&] { tasks::make_task(cfg, gen); }).find("model.tie_weights: the output layer can use the "
                                                              "embedding matrix only when model.embedding_size (6)"),
            std::string::npos);
}

TEST(TrainingStep, FollowsTheScheduleAndTheNonFinitePolicy) {
  config::Config cfg = tiny_lm("charlm");
  cfg.data.path = temp_file("sched.txt", std::string(2000, 'z'));
  cfg.train.schedule = "step";
  cfg.train.decay_steps = 2;
  cfg.train.decay_rate = 0.5;
  cfg.train.lr = 0.01;
  Generator gen(1);
  auto task = tasks::make_task(cfg, gen);
  auto optimizer = train::make_optimizer(cfg.train, task->model());
  const auto schedule = train::schedule_options(cfg.train, task->model_size(), 100);
  train::TrainingStep step(*task, *optimizer, cfg.train, schedule);
  task->start_epoch(0, 0);
  for (int64_t s = 1; s <= 5; ++s) {
    const auto r = step.run(s - 1, s, 0);
    EXPECT_EQ(r.kind, train::StepOutcome::Kind::Updated);
    EXPECT_DOUBLE_EQ(r.lr, optim::learning_rate(schedule, s, 0));
    EXPECT_DOUBLE_EQ(r.lr, 0.01 * std::pow(0.5, (s - 1) / 2));
    EXPECT_EQ(r.tokens, 4 * 6);
  }
  // A learning rate that blows the weights up: stop (nothing more happens) or skip (the carried state
  // is reset, so the next step starts from zeros).
  cfg.train.schedule = "constant";
  cfg.train.lr = 1e30;
  cfg.train.optimizer = "sgd";
  for (const std::string policy : {"stop", "skip"}) {
    cfg.train.on_nonfinite = policy;
    Generator g(2);
    auto t = tasks::make_task(cfg, g);
    auto opt = train::make_optimizer(cfg.train, t->model());
    train::TrainingStep bad(*t, *opt, cfg.train, train::schedule_options(cfg.train, 8, 100));
    t->start_epoch(0, 0);
    train::StepOutcome r;
    int64_t s = 0;
    std::vector<std::vector<uint32_t>> before;  // each parameter's bits before the last step run
    const auto bits = [&] {
      std::vector<std::vector<uint32_t>> out;
      for (const auto& [name, p] : t->model().named_parameters()) {
        const std::vector<float> v = p.to_vector<float>();
        out.emplace_back(v.size());
        if (!v.empty()) std::memcpy(out.back().data(), v.data(), v.size() * sizeof(float));
      }
      return out;
    };
    do {
      before = bits();
      r = bad.run(s, s + 1, 0);
    } while (r.kind == train::StepOutcome::Kind::Updated && ++s < 20);
    ASSERT_NE(r.kind, train::StepOutcome::Kind::Updated) << policy;
    EXPECT_EQ(bits(), before) << policy << ": the non-finite step changed the weights";
    EXPECT_EQ(opt->steps(), s) << policy << ": the non-finite step is not counted";
    EXPECT_EQ(r.kind, policy == "stop" ? train::StepOutcome::Kind::NonFinite : train::StepOutcome::Kind::Skipped);
    EXPECT_TRUE(r.nonfinite == "loss" || r.nonfinite == "gradient norm");
    for (const auto& [name, p] : t->model().named_parameters()) EXPECT_FALSE(p.grad().defined()) << name;
    EXPECT_EQ(t->extra_state().empty(), policy == "skip") << "skip forgets the carried state";
  }
}

TEST(Trainer, ResumingADirectoryWithoutConfigSaysItIsNotARunDirectory) {
  const std::string dir = sru::testing::tmp_dir() + "not-a-run";
  std::filesystem::create_directories(dir);
  train::RunOptions o;
  o.resume = true;
  o.run_dir = dir;
  EXPECT_EQ(error_of([&] { train::train(o); }),
            "--resume " + dir + ": " + dir + "/config.yaml does not exist, so this is not a srutrain run directory (or "
            "its run never started)");
}

TEST(CrossValidation, DrivenByTheMetricTheRunsChoseTheBestCheckpointBy) {
  std::mt19937 rng(4);
  std::string text;
  for (int i = 0; i < 90; ++i) text += (i % 2 ? "1 w" : "0 v") + std::to_string(rng() % 5) + (i % 2 ? " yes\n" : " no\n");
  const std::string data = temp_file("cv_tiny.txt", text);
  const std::string config = temp_file("cv_tiny.yaml",
                                        "task: classify\ndata:\n  path: " + data + "\n  folds: 3\n  valid_fraction: 0.2\n"
                                        "  batch_size: 8\n  eval_batch_size: 32\nmodel:\n  type: lstm\n"
                                        "  embedding_size: 8\n  hidden_size: 8\n  num_layers: 1\ntrain:\n  epochs: 2\n"
                                        "  lr: 0.01\neval:\n  metric: loss\nlog:\n  progress: false\n");
  for (const std::string metric : {"loss", "accuracy"}) {
    train::RunOptions o;
    o.config_path = config;
    o.overrides = {"eval.metric=" + metric, "data.run_folds=2"};
    o.run_dir = sru::testing::tmp_dir() + "cv-" + metric;
    std::filesystem::remove_all(o.run_dir);
    ASSERT_EQ(train::train(o), 0);
    const auto s = nlohmann::json::parse(train::read_text_file(o.run_dir + "/cv_summary.json"));
    EXPECT_EQ(s["metric"], metric);
    EXPECT_EQ(s["higher_is_better"], metric == "accuracy");
    EXPECT_EQ(s["folds_run"], 2);
    ASSERT_EQ(s["per_fold"].size(), 2u);
    double sum = 0;
    for (const auto& f : s["per_fold"]) {
      const auto fold = nlohmann::json::parse(train::read_text_file(
          o.run_dir + "/fold-" + std::to_string(f["fold"].get<int>()) + "/summary.json"));
      EXPECT_EQ(f["test_" + metric], fold["best"]["test"][metric]);
      sum += f["test_" + metric].get<double>();
    }
    EXPECT_DOUBLE_EQ(s["test_" + metric + "_mean"].get<double>(), sum / 2);
    EXPECT_TRUE(s.contains("valid_" + metric + "_std"));
  }
}
