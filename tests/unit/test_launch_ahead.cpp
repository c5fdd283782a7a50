// Launching ahead (train.launch_ahead, train/step.h TrainingStep::run_ahead) through the CPU twin of a
// CUDA graph: a replayed step is launched before the step before it is read, and training stays the
// eager steps' to the bit — also when the step read late was non-finite, which takes back the step
// launched behind it (its update held on the device by the gate) and runs it again after the policy
// (skip), or not at all (stop). And the key's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "step_graph_training.h"

using namespace sru;
using namespace sru::testing;

namespace {

uint64_t total(const std::vector<uint64_t>& v) {
  uint64_t n = 0;
  for (uint64_t x : v) n += x;
  return n;
}

// Twin replays launched ahead (each epoch's last step read in its own call, as srutrain's loop has it).
StepGraphTraining ahead(const config::Config& c, int64_t poison_step = -1, int64_t epochs = 2) {
  return train_step_graph(c, true, poison_step, epochs, {}, {}, /*launch_ahead=*/true);
}

}  // namespace

// The char-LM (carried state staged once, then kept in place), a causal Transformer, the word LM (the
// Embed-SRUs' gate clipping queued behind each replay) and a classifier of several batch shapes: every
// step the replays launched ahead take is the eager one's, with one value read a step (the late reads
// add up to the steps).
TEST(LaunchAhead, StepsLaunchedAheadTrainAsTheEagerSteps) {
  struct Case {
    config::Config c;
    int64_t epochs, left_launched_at_least;
  };
  std::vector<Case> cases{{step_graph_charlm_config("sru"), 2, 15},
                          {step_graph_charlm_config("transformer"), 2, 15},
                          {step_graph_wordlm_config("sru"), 2, 3},
                          {step_graph_wordlm_config("embed-sru"), 2, 3},
                          {step_graph_wordlm_config("super-embed-sru"), 2, 3},
                          {step_graph_classify_config("sru"), 3, 10}};
  cases[1].c.train.precision = "bf16";
  for (const Case& k : cases) {
    SCOPED_TRACE(k.c.task + " " + k.c.model.type);
    const StepGraphTraining eager = train_step_graph(k.c, false, -1, k.epochs), twin = ahead(k.c, -1, k.epochs);
    EXPECT_EQ(eager.steps_left_launched, 0);
    EXPECT_GE(twin.steps_left_launched, k.left_launched_at_least);
    EXPECT_EQ(total(twin.value_reads), static_cast<uint64_t>(twin.steps));
    expect_same_training(eager, twin);
  }
}

// A non-finite step read late (step 5, a NaN in the output bias, launched and left unread): the step
// launched behind it held its update (the gate: the clip factor times NaN), is taken back — the Philox
// counter and the optimiser's count — and, under skip, runs again from the reset carried state, as the
// eager loop runs it. Under stop, the run ends at step 5 with the weights the eager run stops with.
TEST(LaunchAhead, ANonFiniteStepReadLateTakesBackTheStepLaunchedBehindIt) {
  config::Config c = step_graph_charlm_config("sru");
  const StepGraphTraining eager = train_step_graph(c, false, 4), twin = ahead(c, 4);
  EXPECT_EQ(eager.kinds[4], train::StepOutcome::Kind::Skipped);
  EXPECT_EQ(twin.replayed, 17);  // the replays without launching ahead (CapturedStep.ANonFinite...)
  EXPECT_EQ(total(twin.value_reads), static_cast<uint64_t>(twin.steps));
  expect_same_training(eager, twin);

  c.train.on_nonfinite = "stop";
  const StepGraphTraining eager_stop = train_step_graph(c, false, 4), twin_stop = ahead(c, 4);
  EXPECT_EQ(eager_stop.kinds[4], train::StepOutcome::Kind::NonFinite);
  // The eager run stops in the call of step 5; launched ahead, step 6's call launched it (its kernels ran
  // through the twin) and found step 5 non-finite: step 6 taken back, never reported.
  EXPECT_EQ(eager_stop.dispatches.size(), 5u);
  ASSERT_EQ(twin_stop.dispatches.size(), 6u);
  EXPECT_GT(twin_stop.dispatches[5], 20u);
  expect_same_training(eager_stop, twin_stop);

  // The Embed-SRU's gate clipping, queued behind the replay of the non-finite step and of the one taken
  // back, clips weights no update changed: nothing moves.
  config::Config embed = step_graph_wordlm_config("embed-sru");
  const StepGraphTraining embed_eager = train_step_graph(embed, false, 5), embed_twin = ahead(embed, 5);
  EXPECT_EQ(embed_eager.kinds[5], train::StepOutcome::Kind::Skipped);
  EXPECT_GT(embed_twin.steps_left_launched, 0);
  expect_same_training(embed_eager, embed_twin);
}

// A stop vote (Ctrl-C, the time limit) asked when a step is launched: that step is read in its own call,
// so that the loop can save a checkpoint after it.
TEST(LaunchAhead, AStepWhoseVotesStopTheRunIsReadAtOnce) {
  const config::Config c = step_graph_charlm_config("sru");
  Generator gen(11);
  auto task = tasks::make_task(c, gen);
  auto optimizer = train::make_optimizer(c.train, task->model());
  train::TrainingStep step(*task, *optimizer, c.train, {});
  step.replay_on_the_host();
  task->start_epoch(0, 0);
  for (int64_t i = 0; i < 9; ++i) {
    const bool stop_here = i == 8;
    const std::vector<train::StepOutcome> read =
        step.run_ahead(i, 1, i + 1, 0, [stop_here] { return train::StepVotes{stop_here, false}; }, true);
    if (!stop_here) continue;
    ASSERT_EQ(read.size(), 2u);  // step 8 (launched before) and step 9 (stops)
    EXPECT_EQ(read[0].step, 8);
    EXPECT_EQ(read[1].step, 9);
    EXPECT_TRUE(read[1].votes.stop);
    EXPECT_FALSE(step.has_launched_step());
  }
  EXPECT_GE(step.steps_left_launched(), 4);
}

// auto launches ahead only where one-batch steps replay, and not with a moving average of the weights
// (it must follow updates only); on names why.
TEST(LaunchAhead, TheKeyAndItsRefusals) {
  Generator gen(1);
  auto can_launch_ahead = [&gen](const config::Config& c, bool twin) {
    auto task = tasks::make_task(c, gen);
    auto optimizer = train::make_optimizer(c.train, task->model());
    train::TrainingStep step(*task, *optimizer, c.train, {});
    if (twin) step.replay_on_the_host();
    return step.launches_ahead();
  };
  auto refusal = [&gen](const config::Config& c) {
    return error_of([&] {
      auto task = tasks::make_task(c, gen);
      auto optimizer = train::make_optimizer(c.train, task->model());
      train::TrainingStep step(*task, *optimizer, c.train, {});
    });
  };
  config::Config c = step_graph_charlm_config("sru");
  EXPECT_FALSE(can_launch_ahead(c, false));  // the CPU: no replays
  EXPECT_TRUE(can_launch_ahead(c, true));
  c.train.launch_ahead = "off";
  EXPECT_FALSE(can_launch_ahead(c, true));
  c.train.launch_ahead = "on";
  EXPECT_NE(refusal(c).find("train.launch_ahead: on, but no step replays: the model is on cpu"), std::string::npos)
      << refusal(c);
  c.train.cuda_graphs = "off";
  EXPECT_NE(refusal(c).find("train.launch_ahead: on, but train.cuda_graphs is off"), std::string::npos) << refusal(c);

  config::Config ema = step_graph_charlm_config("sru");
  ema.train.ema_decay = 0.99;
  EXPECT_FALSE(can_launch_ahead(ema, true));
  ema.train.launch_ahead = "on";
  EXPECT_NE(refusal(ema).find("train.ema_decay"), std::string::npos) << refusal(ema);

  config::Config accumulated = step_graph_charlm_config("sru");
  accumulated.train.accumulate = 2;
  EXPECT_FALSE(can_launch_ahead(accumulated, true));
  accumulated.train.launch_ahead = "on";
  EXPECT_NE(refusal(accumulated).find("train.accumulate > 1"), std::string::npos) << refusal(accumulated);

  const std::string yaml = temp_file("launch_ahead.yaml", "task: charlm\ndata:\n  path: x.txt\ntrain:\n  launch_ahead: always\n");
  const std::string bad = error_of([&] { config::load_config(yaml); });
  EXPECT_NE(bad.find("launch_ahead"), std::string::npos) << bad;
}
