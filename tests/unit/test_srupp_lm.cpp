// SRU++ in the token-stream language model (tasks/lm.h) with no change to the task: the attention
// memory travels in the carried state across training steps (detached) and through checkpoints
// (task.state.*), so a resumed run continues exactly; evaluating a file does not depend on the chunk
// length (the same_length window); generation runs one token at a time on the rolling memory.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "core/safetensors.h"
#include "nn/checkpoint.h"
#include "nn/srupp.h"
#include "ops/shape_ops.h"
#include "tasks/lm.h"
#include "tasks/registry.h"
#include "testing.h"
#include "train/step.h"
#include "train/trainer.h"

using namespace sru;
using sru::testing::temp_file;

namespace {

config::Config srupp_lm(const std::string& path) {
  config::Config c = config::Config::defaults("charlm", "srupp");
  c.data.path = path;
  c.data.batch_size = 3;
  c.data.eval_batch_size = 2;
  c.model.embedding_size = 8;
  c.model.hidden_size = 8;
  c.model.num_layers = 2;
  c.model.dropout = 0.1;
  c.train.seed = 5;
  c.train.optimizer = "radamw";
  c.train.weight_decay = 0.1;
  c.train.lr = 0.01;
  c.task_as<tasks::LMOptions>().bptt = 5;
  auto& o = c.encoder_options.as<nn::SRUppOptions>();
  o.proj_size = 4;
  o.num_heads = 2;
  o.attn_dropout = 0.1;
  o.memory_length = 5;
  return c;
}

std::string text() {
  std::string s;
  for (int i = 0; i < 60; ++i) s += "<page>abc" + std::to_string(i % 7) + "</page>\n";
  return s;
}

}  // namespace

TEST(SruppLanguageModel, MemoryIsCarriedAcrossStepsAndThroughCheckpoints) {
  const config::Config cfg = srupp_lm(temp_file("srupp_lm.txt", text()));
  auto train_steps = [&](tasks::Task& task, optim::Optimizer& opt, int64_t from, int64_t to) {
    train::TrainingStep step(task, opt, cfg.train, train::schedule_options(cfg.train, 8, 100));
    std::vector<double> losses;
    for (int64_t s = from; s < to; ++s) losses.push_back(step.run(s, s + 1, 0).loss);
    return losses;
  };
  Generator gen(cfg.train.seed);
  auto task = tasks::make_task(cfg, gen);
  auto opt = train::make_optimizer(cfg.train, task->model());
  task->start_epoch(0, 0);
  const std::vector<double> first = train_steps(*task, *opt, 0, 3);
  // c (layers, B, out) and the last 5 inputs of each of the 2 attention layers, without history.
  const nn::NamedTensors state = task->extra_state();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0].second.shape(), (Shape{2, 3, 8}));
  EXPECT_EQ(state[1].second.shape(), (Shape{5, 3, 8}));
  EXPECT_EQ(state[2].second.shape(), (Shape{5, 3, 8}));
  for (const auto& [name, t] : state) EXPECT_FALSE(t.requires_grad()) << name;

  // Saved and restored (model, optimiser, carried state, generator position): the next steps repeat.
  const std::string path = sru::testing::tmp_dir() + "srupp_lm.safetensors";
  nn::NamedTensors all = task->model().state();
  for (auto& entry : opt->state()) all.push_back(entry);
  for (auto& entry : state) all.push_back(entry);
  safetensors::save(path, all);
  const uint64_t offset = gen.offset();
  const std::vector<double> uninterrupted = train_steps(*task, *opt, 3, 6);

  auto resume_from = [&](const std::string& checkpoint) {
    Generator gen2(cfg.train.seed);
    auto resumed = tasks::make_task(cfg, gen2);
    auto opt2 = train::make_optimizer(cfg.train, resumed->model());
    const safetensors::File file = safetensors::load(checkpoint);
    nn::load_state_from(resumed->model(), file, checkpoint, {"optim.", "task."});
    nn::NamedTensors optimizer_state;
    for (const auto& [name, t] : opt->state()) optimizer_state.emplace_back(name, *file.find(name));
    opt2->load_state(optimizer_state);
    resumed->load_extra_state(file);
    gen2.set_state(cfg.train.seed, offset);
    resumed->start_epoch(0, 3);
    return train_steps(*resumed, *opt2, 3, 6);
  };
  EXPECT_EQ(resume_from(path), uninterrupted);
  // Without the memory (c alone carried over) the steps differ: the memory is part of the state.
  const std::string without_memory = sru::testing::tmp_dir() + "srupp_lm_no_memory.safetensors";
  all.resize(all.size() - 2);
  safetensors::save(without_memory, all);
  EXPECT_NE(resume_from(without_memory), uninterrupted);
}

TEST(SruppLanguageModel, FileEvaluationDoesNotDependOnTheChunkAndGenerationRuns) {
  const std::string path = temp_file("srupp_eval.txt", text());
  const config::Config cfg = srupp_lm(path);
  Generator gen(cfg.train.seed);
  auto task = tasks::make_task(cfg, gen);
  task->start_epoch(0, 0);
  autograd::backward(task->forward_step(0).loss);  // any weights will do; alpha is still 0 though
  for (auto [name, p] : task->model().named_parameters())
    if (name.find("alpha") != std::string::npos) p.fill_(0.8);
  auto* files = task->file_evaluation();
  const double whole = files->evaluate_file(path, 0, 1000).at("bpc");
  for (int64_t chunk : {1, 3, 7}) EXPECT_NEAR(files->evaluate_file(path, 0, chunk).at("bpc"), whole, 1e-4) << chunk;
  tasks::GenerationOptions how;
  how.tokens = 12;
  how.sampling.temperature = 0.7;
  EXPECT_EQ(task->generation()->generate("<page>", how).at(0).at(0).size(), 12u);

  // Greedy decoding through the key/value caches (one projected row per token) equals greedy decoding
  // that reruns the whole text from a zero state for every token; beam 1 equals greedy; 3 samples differ.
  how.strategy = tasks::GenerationOptions::Strategy::Greedy;
  how.tokens = 30;
  const std::string greedy = task->generation()->generate("<page>", how).at(0).at(0);
  std::string text = "<page>";
  {
    autograd::NoGradGuard no_grad;
    task->model().eval();
    auto& lm = dynamic_cast<tasks::LanguageModel&>(task->model());
    for (int i = 0; i < 30; ++i) {
      std::vector<int64_t> ids;
      for (const unsigned char c : text) ids.push_back(c);
      nn::EncoderStatePtr state;
      const Tensor logits = lm.forward(Tensor::from_vector(ids, {static_cast<int64_t>(ids.size()), 1}), state);
      const auto last = slice(logits, 0, logits.size(0) - 1, logits.size(0)).to_vector<double>();
      text += static_cast<char>(std::max_element(last.begin(), last.end()) - last.begin());
    }
  }
  EXPECT_EQ("<page>" + greedy, text);
  how.strategy = tasks::GenerationOptions::Strategy::Beam;
  how.beam.beam_size = 1;
  EXPECT_EQ(task->generation()->generate("<page>", how).at(0).at(0), greedy);
  how.beam.beam_size = 4;
  how.beam.n_best = 3;
  const auto best = task->generation()->generate("<page>", how);
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].size(), 3u);
  how.strategy = tasks::GenerationOptions::Strategy::Sample;
  how.batch = 3;
  const auto samples = task->generation()->generate("<page>", how);
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_NE(samples[0][0], samples[1][0]);
}
