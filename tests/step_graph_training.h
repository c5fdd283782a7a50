// A small char-LM or classifier trained step by step through train::TrainingStep, eagerly or with its
// captured steps replayed (train.cuda_graphs; the CPU twin or a CUDA graph): the per-step losses, norms,
// dispatches and value reads and the final parameters, for the captured-step tests on the CPU
// (unit/test_step_graph.cpp) and on a GPU (parity/test_cuda_graph.cpp).
#pragma once

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/host_sync.h"
#include "core/kernel_count.h"
#include "nn/srupp.h"
#include "nn/transformer_encoder.h"
#include "ops/matmul.h"
#include "tasks/classify.h"
#include "tasks/lm.h"
#include "tasks/translate.h"
#include "tasks/registry.h"
#include "tasks/squad.h"
#include "testing.h"
#include "translate_testing.h"
#include "train/step.h"
#include "train/trainer.h"

namespace sru::testing {

// 90% of the bytes train: 2 streams of 395 bytes, 394 predictions: 12 steps of 32 an epoch, then a
// short one of 10. Dropout everywhere (Philox draws every step), a noam schedule (the learning rate and
// bias corrections change every step), clipping active, non-finite steps skipped.
inline config::Config step_graph_charlm_config(const std::string& encoder, const std::string& device = "cpu") {
  config::Config c = config::Config::defaults("charlm", encoder);
  c.data.path = temp_file("step_graph_" + encoder + ".txt", last_word_sentences(200, 3).substr(0, 878));
  c.data.batch_size = 2;
  c.data.eval_batch_size = 2;
  c.task_as<tasks::LMOptions>().bptt = 32;
  c.model.embedding_size = c.model.hidden_size = 12;
  c.model.num_layers = 2;
  c.model.dropout = 0.2;
  c.train.optimizer = "adam";
  c.train.schedule = "noam";
  c.train.warmup_steps = 5;
  c.train.lr = 2.0;
  c.train.clip_grad_norm = 0.5;
  c.train.on_nonfinite = "skip";
  c.train.device = device;
  if (encoder == "transformer") {  // causal: no carried state in training
    auto& o = c.encoder_options.as<nn::TransformerEncoderOptions>();
    o.causal = true;
    o.num_heads = 2;
  }
  if (encoder == "srupp") {  // a memory longer than bptt: it grows for two steps, then keeps its shape
    auto& o = c.encoder_options.as<nn::SRUppOptions>();
    o.proj_size = 4;
    o.num_heads = 2;
    o.attn_dropout = 0.1;
    o.memory_length = 48;
  }
  return c;
}

// The word LM (PTB's task) on the same sentences as words, with the v1 SRU and the Embed-SRU variants:
// batches of 2 streams of bptt 8, dropout on the embeddings, between layers and inside, SGD with
// clipping (the PTB configs' optimiser).
inline config::Config step_graph_wordlm_config(const std::string& encoder) {
  config::Config c = config::Config::defaults("wordlm", encoder);
  const std::string text = last_word_sentences(60, 3);
  c.data.path = temp_file("step_graph_wordlm_" + encoder + ".txt", text);
  auto& lm = c.task_as<tasks::LMOptions>();
  lm.valid_path = lm.test_path = temp_file("step_graph_wordlm_valid.txt", last_word_sentences(8, 4));
  lm.bptt = 8;
  c.data.batch_size = 2;
  c.data.eval_batch_size = 2;
  c.model.embedding_size = c.model.hidden_size = 8;
  c.model.num_layers = 2;
  c.model.dropout = 0.2;
  c.model.embedding_dropout = 0.1;
  c.train.optimizer = "sgd";
  c.train.lr = 1.0;
  c.train.clip_grad_norm = 0.5;
  c.train.on_nonfinite = "skip";
  return c;
}

// 42 sentences of 1-9 words in batches of 4 (bucketed by length, reshuffled each epoch: the last batch
// of an epoch has 2), padded to a multiple of 4: a few batch shapes, each met again within 3 epochs; a
// bidirectional 2-layer SRU (the gather of both directions' rows), dropout, label smoothing, clipping.
inline config::Config step_graph_classify_config(const std::string& encoder, const std::string& device = "cpu") {
  config::Config c = config::Config::defaults("classify", encoder);
  c.data.path = temp_file("step_graph_classify_" + encoder + ".txt", last_word_sentences(42, 5, 9, 12));
  auto& o = c.task_as<tasks::ClassifyOptions>();
  o.valid_path = temp_file("step_graph_classify_valid.txt", last_word_sentences(8, 6, 9, 12));
  o.test_path = temp_file("step_graph_classify_test.txt", last_word_sentences(8, 7, 9, 12));
  o.pad_to_multiple = 4;
  c.data.batch_size = 4;
  c.model.embedding_size = c.model.hidden_size = 8;
  c.model.num_layers = 2;
  c.model.bidirectional = true;
  c.model.dropout = 0.2;
  c.train.optimizer = "adam";
  c.train.lr = 0.01;
  c.train.clip_grad_norm = 0.5;
  c.train.label_smoothing = 0.1;
  c.train.on_nonfinite = "skip";
  c.train.device = device;
  return c;
}

// The tiny Transformer translating the word-for-word corpus (translate_testing.h) in token batches of
// at most 120 padded pieces, lengths rounded up to multiples of 4 (a few batch shapes, each met every
// epoch), dropout, label smoothing, clipping, Adam.
inline config::Config step_graph_translate_config(const std::string& device = "cpu") {
  return tiny_translate("step_graph", {"data.pad_to_multiple=4", "train.optimizer=adam", "train.lr=0.002",
                                       "train.clip_grad_norm=0.5", "train.label_smoothing=0.1",
                                       "train.on_nonfinite=skip", "train.device=" + device});
}

// The Document Reader on the shipped SQuAD sample (336 questions, 21 batches of 16 sorted by paragraph
// length and reshuffled each epoch), paragraphs and questions padded to multiples of 32: a few batch
// shapes, most met again within an epoch; bidirectional 2-layer SRUs, the three dropouts, clipping, Adamax.
inline config::Config step_graph_squad_config(const std::string& device = "cpu") {
  config::Config c = config::Config::defaults("squad", "sru");
  const std::string sample = std::string(SRU_SOURCE_DIR) + "/data/squad-sample/dev-v1.1.sample.json";
  c.data.path = sample;
  auto& o = c.task_as<tasks::SquadOptions>();
  o.valid_path = sample;
  o.lowercase = true;
  o.pad_to_multiple = 32;
  c.data.batch_size = 16;
  c.model.embedding_size = c.model.hidden_size = 8;
  c.model.num_layers = 2;
  c.model.bidirectional = true;
  c.model.dropout = 0.2;
  c.model.embedding_dropout = 0.1;
  c.model.output_dropout = 0.1;
  c.train.optimizer = "adamax";
  c.train.lr = 0.002;
  c.train.clip_grad_norm = 0.5;
  c.train.on_nonfinite = "skip";
  c.train.device = device;
  return c;
}

struct StepGraphTraining {
  std::vector<double> losses, norms;  // by step
  std::vector<train::StepOutcome::Kind> kinds;  // by step
  std::vector<uint64_t> dispatches;  // per step (launched ahead: per call, which may read the step before)
  std::vector<uint64_t> value_reads;  // per step: host waits on a GPU (core/host_sync.h); per call launched ahead
  int64_t steps_left_launched = 0;   // calls that left their step launched (train.launch_ahead)
  nn::NamedTensors parameters;       // on the CPU
  nn::NamedTensors optimizer_state;  // on the CPU
  int64_t replayed = 0, steps = 0;
  train::TrainingStep::GraphPlan plan;  // of the last epoch
  std::set<std::string> failed_keys;    // graph keys whose capture failed
};

// `epochs` epochs of c (on c.train.device); host_twin: the captured steps replayed through the CPU twin
// (or through the graphs make_graph(task, optimizer) returns, when given). poison_step >= 0: that step runs
// with a NaN in the output bias, restored after it (on a GPU by copies queued before and after its call). before_optimizer(task), when given, runs before the
// optimiser lays the parameters out in flat buffers. launch_ahead: the steps go through
// TrainingStep::run_ahead, each but an epoch's last may stay launched (as srutrain's loop has them);
// a run stopped by a non-finite step (on_nonfinite stop) ends there.
inline StepGraphTraining train_step_graph(const config::Config& c, bool host_twin, int64_t poison_step = -1,
                                          int64_t epochs = 2,
                                          std::function<std::unique_ptr<train::StepGraph>(tasks::Task&, optim::Optimizer&)>
                                              make_graph = {},
                                          const std::function<void(tasks::Task&)>& before_optimizer = {},
                                          bool launch_ahead = false) {
  const PrecisionScope precision(parse_precision(c.train.precision, "train.precision"));
  Generator gen(11);
  auto task = tasks::make_task(c, gen);
  task->model().to(Device::parse(c.train.device));
  if (before_optimizer) before_optimizer(*task);
  auto optimizer = train::make_optimizer(c.train, task->model());
  // Batches an epoch, grouped into steps of train.accumulate batches (the last step takes what is left).
  const int64_t batches = task->steps_per_epoch(), accumulate = c.train.accumulate;
  const int64_t per_epoch = train::steps_per_epoch(batches, accumulate);
  train::TrainingStep step(*task, *optimizer, c.train,
                           train::schedule_options(c.train, task->model_size(), epochs * per_epoch));
  if (host_twin && make_graph)
    step.replay_through([&make_graph, &task, &optimizer] { return make_graph(*task, *optimizer); });
  else if (host_twin)
    step.replay_on_the_host();
  StepGraphTraining out;
  out.losses.assign(static_cast<size_t>(epochs * per_epoch), std::numeric_limits<double>::quiet_NaN());
  out.norms = out.losses;
  out.kinds.assign(out.losses.size(), train::StepOutcome::Kind::Updated);
  Tensor poisoned = task->model().named_parameters().back().second;
  bool stopped = false;
  std::vector<int> outcomes_of(out.losses.size(), 0);
  for (int64_t epoch = 0; epoch < epochs && !stopped; ++epoch) {
    task->start_epoch(epoch, 0);
    for (int64_t i = 0; i < per_epoch && !stopped; ++i) {
      const int64_t global = epoch * per_epoch + i;
      Tensor poisoned_element, saved;
      if (global == poison_step) {
        poisoned_element = poisoned.narrow0(0, 1);
        saved = poisoned_element.clone();
        poisoned_element.copy_(Tensor::full({1}, std::numeric_limits<double>::quiet_NaN(), poisoned.dtype(), Device::cpu()));
      }
      const uint64_t before = kernel_dispatches(), reads_before = host_wait_counts().value_reads;
      const int64_t first = i * accumulate;
      const std::vector<train::StepOutcome> read = step.run_ahead(
          first, train::batches_of_step(first, batches, accumulate), global + 1, epoch, {}, launch_ahead && i + 1 < per_epoch);
      out.dispatches.push_back(kernel_dispatches() - before);
      out.value_reads.push_back(host_wait_counts().value_reads - reads_before);
      if (global == poison_step) poisoned_element.copy_(saved);
      for (const train::StepOutcome& r : read) {
        const size_t k = static_cast<size_t>(r.step - 1);
        EXPECT_EQ(++outcomes_of[k], 1) << "step " << r.step << " reported twice";
        out.losses[k] = r.loss;
        out.norms[k] = r.grad_norm;
        out.kinds[k] = r.kind;
        stopped = stopped || r.kind == train::StepOutcome::Kind::NonFinite;
      }
    }
  }
  if (poison_step >= 0) EXPECT_NE(out.kinds[static_cast<size_t>(poison_step)], train::StepOutcome::Kind::Updated);
  EXPECT_FALSE(step.has_launched_step());
  // Every step up to the end (or the stop) reported once; none after a stop.
  for (size_t k = 0; k < outcomes_of.size(); ++k)
    if (!stopped) EXPECT_EQ(outcomes_of[k], 1) << "step " << k + 1 << " not reported";
  out.steps_left_launched = step.steps_left_launched();
  for (const auto& [name, t] : optimizer->state()) out.optimizer_state.emplace_back(name, t.to(Device::cpu()));
  for (const auto& [name, t] : task->model().named_parameters()) out.parameters.emplace_back(name, t.to(Device::cpu()));
  out.replayed = step.replayed_steps();
  out.plan = step.graph_plan();
  out.failed_keys = step.failed_graph_keys();
  out.steps = epochs * per_epoch;
  return out;
}

// Two runs of train_step_graph took the same steps to the bit: each step's kind, loss and norm (a NaN
// loss matching a NaN), then the final parameters and optimiser state.
inline void expect_same_training(const StepGraphTraining& a, const StepGraphTraining& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) {
    EXPECT_EQ(a.kinds[i], b.kinds[i]) << "step " << i;
    if (std::isnan(a.losses[i])) {
      EXPECT_TRUE(std::isnan(b.losses[i])) << "step " << i;
      continue;
    }
    EXPECT_EQ(a.losses[i], b.losses[i]) << "step " << i;
    EXPECT_EQ(a.norms[i], b.norms[i]) << "step " << i;
  }
  for (const auto& [mine, theirs] : {std::pair{&a.parameters, &b.parameters}, std::pair{&a.optimizer_state, &b.optimizer_state}}) {
    ASSERT_EQ(mine->size(), theirs->size());
    for (size_t k = 0; k < mine->size(); ++k)
      EXPECT_EQ(std::memcmp((*mine)[k].second.data_ptr(), (*theirs)[k].second.data_ptr(), (*mine)[k].second.nbytes()), 0)
          << (*mine)[k].first;
  }
}

}  // namespace sru::testing
