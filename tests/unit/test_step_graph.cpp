// The captured training step (train.cuda_graphs, train/step.h) through the CPU twin of a CUDA graph
// (train/step_graph.h): a char-LM trained with replays of its captured step (static inputs and carried
// state, the step's Philox base and optimiser scalars read from memory, the host advancing the counts)
// takes the eager steps to the bit, across epochs with a short last batch (eager) and a non-finite step
// skipped; a classifier and a translation model replay one graph per batch shape; and the key's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <set>

#include "nn/lstm.h"
#include "step_graph_training.h"

using namespace sru;
using namespace sru::testing;

// Eager steps: each epoch's first (from no state) and second (its state came from no state), the
// shape's first staged step (its warm-up before the capture: step 2), and each epoch's short last step;
// the next epoch's first step continues from the state that eager step left. The other 19 of 26 replay.
// SRU++ with a memory longer than bptt (48 > 32): the memory grows for two steps (32, then 48 rows) and
// the steps until its shapes settle run eagerly too (17 of 26 replay). A causal Transformer carries no
// state: only each epoch's first step and the shape's first run eagerly before the replays (21 of 26).
TEST(CapturedStep, TheHostTwinsReplaysTrainAsTheEagerStepsDo) {
  struct Case {
    std::string encoder, precision;
    int64_t replayed;
  };
  for (const Case& k : std::vector<Case>{{"sru", "fp32", 19}, {"sru", "bf16", 19}, {"lstm", "fp32", 19}, {"srupp", "fp32", 17},
                                          {"transformer", "fp32", 21}}) {
    SCOPED_TRACE(k.encoder + " at " + k.precision);
    config::Config c = step_graph_charlm_config(k.encoder);
    c.train.precision = k.precision;
    const StepGraphTraining eager = train_step_graph(c, false), replayed = train_step_graph(c, true);
    EXPECT_EQ(eager.steps, 26);
    EXPECT_EQ(eager.replayed, 0);
    EXPECT_EQ(replayed.replayed, k.replayed);
    expect_same_training(eager, replayed);
    // One value read a step, loss and norm together: the captured function itself reads nothing (a
    // read there would be a host wait, which a CUDA graph capture refuses).
    for (size_t i = 0; i < replayed.value_reads.size(); ++i) EXPECT_EQ(replayed.value_reads[i], 1u) << "step " << i;
  }
}

// The word LM's encoders (the SRU, Embed-SRU and Super-Embed-SRU) replay their captured step the same
// way: bit-identical to eager training, one value read a step.
TEST(CapturedStep, WordLmStepsReplayAsTheEagerStepsDo) {
  for (const std::string& encoder : {"sru", "embed-sru", "super-embed-sru"}) {
    SCOPED_TRACE(encoder);
    const config::Config c = step_graph_wordlm_config(encoder);
    const StepGraphTraining eager = train_step_graph(c, false), replayed = train_step_graph(c, true);
    EXPECT_GT(eager.steps, 6);
    EXPECT_EQ(eager.replayed, 0);
    EXPECT_GE(replayed.replayed, eager.steps / 2);
    expect_same_training(eager, replayed);
    for (size_t i = 0; i < replayed.value_reads.size(); ++i) EXPECT_EQ(replayed.value_reads[i], 1u) << "step " << i;
  }
}

// A non-finite step inside the replays (step 4): the update skips itself, its count is taken back, the
// carried state restarts from none (steps 5 and 6 eager, as at an epoch's start), and the steps after
// it match eager training.
TEST(CapturedStep, ANonFiniteReplayedStepIsSkippedAsAnEagerOne) {
  const config::Config c = step_graph_charlm_config("sru");
  const StepGraphTraining eager = train_step_graph(c, false, 4), replayed = train_step_graph(c, true, 4);
  EXPECT_TRUE(std::isnan(eager.losses[4]));
  EXPECT_EQ(replayed.replayed, 17);
  expect_same_training(eager, replayed);
}

// The classifier: one graph per batch shape (padded length, batch size), each shape's first step
// eager; the padding mask always staged (zeros for a batch without padding) gives the eager steps' bits.
TEST(CapturedStep, ClassifierStepsReplayTheGraphOfTheirShape) {
  const config::Config c = step_graph_classify_config("sru");
  const StepGraphTraining eager = train_step_graph(c, false, -1, 3), replayed = train_step_graph(c, true, -1, 3);
  EXPECT_EQ(eager.steps, 33);
  EXPECT_GE(replayed.replayed, 20);  // shapes 4x4, 8x4, 12x4 and the last batch's x2
  EXPECT_LT(replayed.replayed, eager.steps);
  expect_same_training(eager, replayed);
  for (size_t i = 0; i < replayed.value_reads.size(); ++i) EXPECT_EQ(replayed.value_reads[i], 1u) << "step " << i;
}

// Translation: one graph per token batch's shape (sentences, source length, target length, the lengths
// rounded to multiples of 4), each shape's first step eager.
TEST(CapturedStep, TranslationStepsReplayTheGraphOfTheirShape) {
  const config::Config c = step_graph_translate_config();
  const StepGraphTraining eager = train_step_graph(c, false, -1, 3), replayed = train_step_graph(c, true, -1, 3);
  EXPECT_EQ(eager.steps, 72);
  EXPECT_EQ(replayed.replayed, 60);  // 12 shapes: each one's first step eager
  expect_same_training(eager, replayed);
  for (size_t i = 0; i < replayed.value_reads.size(); ++i) EXPECT_EQ(replayed.value_reads[i], 1u) << "step " << i;
}

// The epoch's distinct training batch shapes ("BxLsxLt", tasks::StagesSteps::staged_shape) of config c,
// each checked against the padding: both sides' lengths among `lengths` and the batch within
// data.max_tokens.
static std::set<std::string> translation_batch_shapes(const config::Config& c, const std::set<int64_t>& lengths) {
  Generator gen(11);
  auto task = tasks::make_task(c, gen);
  task->start_epoch(0, 0);
  std::set<std::string> shapes;
  const int64_t max_tokens = c.task_as<tasks::TranslateOptions>().max_tokens;
  for (int64_t i = 0; i < task->steps_per_epoch(); ++i) {
    const std::string shape = *task->staged_steps()->staged_shape(i);
    shapes.insert(shape);
    int64_t rows = 0, ls = 0, lt = 0;
    EXPECT_EQ(std::sscanf(shape.c_str(), "%" SCNd64 "x%" SCNd64 "x%" SCNd64, &rows, &ls, &lt), 3) << shape;
    EXPECT_TRUE(lengths.count(ls) && lengths.count(lt)) << shape;
    EXPECT_TRUE(rows == 1 || rows * std::max(ls, lt) <= max_tokens) << shape << " holds more than data.max_tokens";
  }
  return shapes;
}

// data.length_buckets: each side of a translation batch padded up to the next bucket (after
// data.pad_to_multiple), the token budget counted in those lengths. The tiny corpus's sides (up to 28
// pieces with eos / bos) rounded to multiples of 4 give 12 batch shapes an epoch; buckets [12, 20, 28]
// give fewer, more steps replay, and training is the eager one's to the bit. Buckets that do not ascend or break the multiple's alignment are refused by key.
TEST(CapturedStep, LengthBucketsGiveTranslationFewerShapes) {
  const config::Config by_multiple = step_graph_translate_config();
  config::Config bucketed = by_multiple;
  bucketed.task_as<tasks::TranslateOptions>().length_buckets = {12, 20, 28};
  const std::set<std::string> multiple_shapes = translation_batch_shapes(by_multiple, {4, 8, 12, 16, 20, 24, 28}),
                              bucket_shapes = translation_batch_shapes(bucketed, {12, 20, 28});
  EXPECT_EQ(multiple_shapes.size(), 12u);
  EXPECT_LT(bucket_shapes.size(), multiple_shapes.size());
  const StepGraphTraining eager = train_step_graph(bucketed, false, -1, 3), replayed = train_step_graph(bucketed, true, -1, 3);
  EXPECT_EQ(replayed.replayed, eager.steps - static_cast<int64_t>(bucket_shapes.size()));  // each shape's first step eager
  EXPECT_GT(replayed.replayed, 60);  // by multiples of 4 alone: 60 of 72
  expect_same_training(eager, replayed);
  // Without data.pad_to_multiple the buckets alone bound the shapes (past the last one the exact lengths).
  config::Config buckets_only = by_multiple;
  buckets_only.task_as<tasks::TranslateOptions>().pad_to_multiple = 0;
  buckets_only.task_as<tasks::TranslateOptions>().length_buckets = {10, 20};
  translation_batch_shapes(buckets_only, {10, 20, 21, 22, 23, 24, 25, 26, 27, 28});
  Generator gen(11);
  EXPECT_EQ(tasks::make_task(buckets_only, gen)->staged_steps()->why_not_staged(), "");
  for (const auto& [buckets, message] : std::vector<std::pair<std::vector<int64_t>, std::string>>{
           {{8, 8}, "data.length_buckets: the lengths must ascend, but 8 follows 8"},
           {{8, 10}, "data.length_buckets: 10 is not a multiple of data.pad_to_multiple (4)"},
           {{8, 124}, "data.length_buckets: 124 is longer than data.max_tokens (120)"}}) {
    config::Config refused = by_multiple;
    refused.task_as<tasks::TranslateOptions>().length_buckets = buckets;
    const std::string error = error_of([&] { tasks::make_task(refused, gen); });
    EXPECT_NE(error.find(message), std::string::npos) << error;
  }
}

// The plan of an epoch's graphs from its steps' keys (what TrainingStep plans and srubench batch-shapes
// shows): keys with a graph keep it, the room left goes to the most frequent others (ties: the one met
// first), failed keys get none, and a step counts as covered only when each of its keys is admitted.
TEST(CapturedStep, APlanAdmitsTheMostFrequentKeysAndCountsTheStepsTheyCover) {
  const std::vector<std::vector<std::string>> steps{{"a"}, {"b", "c", "u"}, {"a"}, {"c", "c", "u"}, {"d"}, {"b"}};
  train::TrainingStep::GraphPlan plan = train::plan_graph_keys(steps, 7, 3);
  EXPECT_EQ(plan.steps, 7);
  EXPECT_EQ(plan.keys, 5);
  EXPECT_EQ(plan.admitted, (std::set<std::string>{"c", "a", "b"}));  // c 3 batches; a, b 2 each, met before u
  EXPECT_EQ(plan.covered_steps, 3);  // {a}, {a}, {b}
  plan = train::plan_graph_keys(steps, 7, 3, {"d"}, {"c"});
  EXPECT_EQ(plan.admitted, (std::set<std::string>{"d", "a", "b"}));  // d kept; c failed
  EXPECT_EQ(plan.covered_steps, 4);
  EXPECT_EQ(train::plan_graph_keys(steps, 7, 64).covered_steps, 6);
}

// A capture that fails (a CUDA graph refusing a host wait or copy): under auto that shape's steps run
// eagerly, from the state its staging left, and train as without graphs; after 3 failed shapes no new
// one is tried (the classifier meets 4 shapes). (Under on the failure is the run's error: the CPU
// refuses on before any step, so the GPU tests, which run with on, show that.)
TEST(CapturedStep, AFailedCaptureLeavesItsShapeEager) {
  struct RefusingGraph final : train::StepGraph {
    int* captures;
    explicit RefusingGraph(int* n) : captures(n) {}
    void capture(std::function<void()>) override {
      ++*captures;
      SRU_FAIL("CUDA graph capture on cuda:0 failed: refused for the test");
    }
    bool captured() const override { return false; }
    void replay() override { SRU_FAIL("replay of a graph that was never captured"); }
  };
  int captures = 0;
  const auto refusing = [&captures](tasks::Task&, optim::Optimizer&) { return std::make_unique<RefusingGraph>(&captures); };
  for (const config::Config& c : {step_graph_charlm_config("sru"), step_graph_classify_config("sru")}) {
    SCOPED_TRACE(c.task);
    captures = 0;
    const StepGraphTraining eager = train_step_graph(c, false, -1, 3),
                            refused = train_step_graph(c, true, -1, 3, refusing);
    EXPECT_EQ(refused.replayed, 0);
    EXPECT_EQ(captures, c.task == "charlm" ? 1 : 3) << "shapes tried";
    expect_same_training(eager, refused);
  }
}

// train.accumulate > 1: a graph per batch shape (the step's gradients start zeroed, so that every batch,
// the first too, adds into its flat place) and one for the update, which reads the step's 1 / terms
// from memory. The char-LMs' 13 batches an epoch make steps of 3, 3, 3, 3 and 1: the first (from no
// state), the second (the keys' warm-up; in the next epoch the first again) and the short last one run
// eagerly, 5 of 10 replay. The classifier's and the translation's batches of several shapes weight each
// batch by its own terms (examples, target pieces); a step replays once each of its keys has run
// eagerly before: with one key a shape (where a step's first batch and its later ones had a key each)
// 13 of the classifier's 18 steps replay (10 before) and 18 of the translation's 24 (9 before).
TEST(CapturedStep, AccumulatedStepsReplayAGraphPerBatchAndOneForTheUpdate) {
  struct Case {
    config::Config c;
    int64_t accumulate, epochs, steps, replayed;
  };
  std::vector<Case> cases{{step_graph_charlm_config("sru"), 3, 2, 10, 5},
                          {step_graph_charlm_config("transformer"), 3, 2, 10, 5},
                          {step_graph_classify_config("sru"), 2, 3, 18, 13},
                          {step_graph_translate_config(), 3, 3, 24, 18}};
  cases[1].c.train.precision = "bf16";
  for (Case& k : cases) {
    SCOPED_TRACE(k.c.task + " " + k.c.model.type);
    k.c.train.accumulate = k.accumulate;
    const StepGraphTraining eager = train_step_graph(k.c, false, -1, k.epochs),
                            replayed = train_step_graph(k.c, true, -1, k.epochs);
    EXPECT_EQ(eager.steps, k.steps);
    EXPECT_EQ(replayed.replayed, k.replayed);
    expect_same_training(eager, replayed);
    for (size_t i = 0; i < replayed.value_reads.size(); ++i) EXPECT_EQ(replayed.value_reads[i], 1u) << "step " << i;
    if (k.c.model.type == "sru" && k.c.task == "charlm")  // the first replay after an eager step stages its state
      EXPECT_EQ(replayed.dispatches[6], replayed.dispatches[7] + 1) << "not one copy of the carried state";
  }
  // A non-finite replayed step (step 3, a NaN in the output bias) is skipped as an eager one is: its
  // count taken back, the carried state restarted from none; the replays are the same 5 (the step
  // after it is the epoch's short last one, eager anyway).
  config::Config c = step_graph_charlm_config("sru");
  c.train.accumulate = 3;
  const StepGraphTraining eager = train_step_graph(c, false, 3), replayed = train_step_graph(c, true, 3);
  EXPECT_TRUE(std::isnan(eager.losses[3]));
  EXPECT_EQ(replayed.replayed, 5);
  expect_same_training(eager, replayed);
}

// A capture that fails inside an accumulated step. After a batch of the step replayed (the translation's
// second capture, a batch of another shape than its first replayed step's first batch): that batch and
// the rest of the step run eagerly, unstaged, through the same weighted sums, and the update too. As the
// step's first batch (the first capture): the step runs as an eager one, from no gradients. Later steps
// with that key stay eager. Training is the eager one's to the bit either way.
TEST(CapturedStep, AFailedCaptureInsideAnAccumulatedStepFinishesItEagerly) {
  struct NthCaptureRefused final : train::StepGraph {
    int* captures;
    int refused;
    std::function<void()> step;
    NthCaptureRefused(int* n, int r) : captures(n), refused(r) {}
    void capture(std::function<void()> s) override {
      if (++*captures == refused) SRU_FAIL("CUDA graph capture on cuda:0 failed: refused for the test");
      step = std::move(s);
    }
    bool captured() const override { return static_cast<bool>(step); }
    void replay() override { step(); }
  };
  config::Config c = step_graph_translate_config();
  c.train.accumulate = 3;
  const StepGraphTraining eager = train_step_graph(c, false, -1, 3);
  for (const int refused : {2, 1}) {
    SCOPED_TRACE("capture " + std::to_string(refused) + " refused");
    int captures = 0;
    const auto nth_refused = [&captures, refused](tasks::Task&, optim::Optimizer&) {
      return std::make_unique<NthCaptureRefused>(&captures, refused);
    };
    const StepGraphTraining mixed = train_step_graph(c, true, -1, 3, nth_refused);
    ASSERT_EQ(mixed.failed_keys.size(), 1u);
    EXPECT_EQ(mixed.failed_keys.begin()->rfind("a batch of an accumulated step of shape ", 0), 0u) << *mixed.failed_keys.begin();
    EXPECT_GE(captures, 3);  // the update's graph and others, captured after the refusal
    EXPECT_GT(mixed.replayed, 0);
    EXPECT_LT(mixed.replayed, 18);  // the steps without the refused shape (18 replay when none is refused)
    expect_same_training(eager, mixed);
  }
}

namespace {
// The values a GPU capture leaves unchanged (it queues kernels without running them): the parameters,
// their gradients and the optimiser's state, saved before a capture's host code runs on the CPU and put
// back after it, for the tests that emulate a capture failing after its host code.
class DeviceValuesKept {
 public:
  DeviceValuesKept(tasks::Task& task, optim::Optimizer& optimizer) {
    for (const auto& [name, p] : task.model().named_parameters()) state_.push_back(p);
    for (const auto& [name, p] : optimizer.parameters())
      if (p.grad().defined()) state_.push_back(p.grad());
    for (const auto& [name, t] : optimizer.state()) state_.push_back(t);
    for (const Tensor& t : state_) saved_.push_back(t.clone());
  }
  ~DeviceValuesKept() {
    for (size_t i = 0; i < state_.size(); ++i) Tensor(state_[i]).copy_(saved_[i]);
  }
  DeviceValuesKept(const DeviceValuesKept&) = delete;
  DeviceValuesKept& operator=(const DeviceValuesKept&) = delete;

 private:
  std::vector<Tensor> state_, saved_;
};
}  // namespace

// A CUDA graph's capture runs the captured host code (queueing kernels that do not execute) before it
// can fail, e.g. at cudaStreamEndCapture. Emulated on the CPU for the char-LM's second capture, the
// update of its first replayed accumulated step (after its batches' one graph): the body runs, then the parameters, the optimiser's
// state and the gradients get their values back (no device effect) and the capture throws. The update
// then runs eagerly on the gradients the step's batches summed (the capture's host code must leave the
// .grad handles as it found them), and training stays the eager one's to the bit.
TEST(CapturedStep, AnUpdateCaptureFailingAfterItsHostCodeLeavesTheGradients) {
  struct RunThenFail final : train::StepGraph {
    int* captures;
    tasks::Task& task;
    optim::Optimizer& optimizer;
    std::function<void()> step;
    RunThenFail(int* n, tasks::Task& t, optim::Optimizer& o) : captures(n), task(t), optimizer(o) {}
    void capture(std::function<void()> s) override {
      if (++*captures != 2) {
        step = std::move(s);
        return;
      }
      {
        const DeviceValuesKept kept(task, optimizer);
        s();  // the host code runs; its device work would not have
      }
      SRU_FAIL("CUDA graph capture on cuda:0 failed at cudaStreamEndCapture (emulated for the test)");
    }
    bool captured() const override { return static_cast<bool>(step); }
    void replay() override { step(); }
  };
  int captures = 0;
  const auto run_then_fail = [&captures](tasks::Task& t, optim::Optimizer& o) {
    return std::make_unique<RunThenFail>(&captures, t, o);
  };
  config::Config c = step_graph_charlm_config("sru");
  c.train.accumulate = 3;
  const StepGraphTraining eager = train_step_graph(c, false, -1, 2), failed = train_step_graph(c, true, -1, 2, run_then_fail);
  EXPECT_EQ(captures, 2);
  EXPECT_EQ(failed.replayed, 0);  // the update's key failed: no accumulated step replays whole
  expect_same_training(eager, failed);
}

// A batch of an accumulated step whose backward misses a parameter is not captured: the replayed step
// starts from zeroed gradients, so a parameter no batch reaches would get a zero gradient (which the
// update decays) where the eager step gives it none. Emulated at the translation's first capture (the
// first batch of its first replayed step) by taking the encoder's first parameter out of autograd while
// the capture's host code runs, as a GPU capture runs it: the capture is refused (its key stays eager,
// the step runs as an eager one) and the steps of other shapes replay; training is the eager one's.
TEST(CapturedStep, AnAccumulatedBatchThatMissesAParameterIsNotCaptured) {
  struct FirstCaptureMissesAParameter final : train::StepGraph {
    int* captures;
    tasks::Task& task;
    optim::Optimizer& optimizer;
    std::function<void()> step;
    FirstCaptureMissesAParameter(int* n, tasks::Task& t, optim::Optimizer& o) : captures(n), task(t), optimizer(o) {}
    void capture(std::function<void()> s) override {
      if (++*captures == 1) {
        const DeviceValuesKept kept(task, optimizer);
        Tensor missed = task.model().named_parameters().front().second;
        missed.set_requires_grad(false);
        try {
          s();
        } catch (...) {
          missed.set_requires_grad(true);
          throw;
        }
        missed.set_requires_grad(true);
      }
      step = std::move(s);
    }
    bool captured() const override { return static_cast<bool>(step); }
    void replay() override { step(); }
  };
  config::Config c = step_graph_translate_config();
  c.train.accumulate = 3;
  int captures = 0;
  const auto first_misses = [&captures](tasks::Task& t, optim::Optimizer& o) {
    return std::make_unique<FirstCaptureMissesAParameter>(&captures, t, o);
  };
  const StepGraphTraining eager = train_step_graph(c, false, -1, 3), mixed = train_step_graph(c, true, -1, 3, first_misses);
  ASSERT_EQ(mixed.failed_keys.size(), 1u);
  EXPECT_EQ(mixed.failed_keys.begin()->rfind("a batch of an accumulated step of shape ", 0), 0u) << *mixed.failed_keys.begin();
  EXPECT_GT(mixed.replayed, 0);
  EXPECT_LT(mixed.replayed, 18);
  expect_same_training(eager, mixed);
}

// SQuAD with data.pad_to_multiple: the Document Reader's steps replay the graph of their shape (paragraph
// length x question length x questions) from static paragraph, feature, mask, question and answer
// tensors, every step of a shape met before (its first is the warm-up), training as the eager steps do
// to the bit. Without the key nothing is staged, and `on` would name it.
TEST(CapturedStep, SquadStepsReplayTheGraphOfTheirShape) {
  const config::Config c = step_graph_squad_config();
  const int64_t epochs = 2;
  Generator gen(11);
  auto task = tasks::make_task(c, gen);
  ASSERT_TRUE(task->staged_steps());
  std::set<std::string> seen;
  int64_t expected = 0;
  for (int64_t e = 0; e < epochs; ++e) {
    task->start_epoch(e, 0);
    for (int64_t i = 0; i < task->steps_per_epoch(); ++i) {
      const std::optional<std::string> shape = task->staged_steps()->staged_shape(i);
      ASSERT_TRUE(shape.has_value()) << "step " << i;
      expected += !seen.insert(*shape).second;
    }
  }
  ASSERT_GT(expected, 0);
  const StepGraphTraining eager = train_step_graph(c, false, -1, epochs), replayed = train_step_graph(c, true, -1, epochs);
  EXPECT_EQ(replayed.replayed, expected) << seen.size() << " shapes";
  expect_same_training(eager, replayed);
  for (size_t i = 0; i < replayed.value_reads.size(); ++i) EXPECT_EQ(replayed.value_reads[i], 1u) << "step " << i;
  config::Config unpadded = c;
  unpadded.task_as<tasks::SquadOptions>().pad_to_multiple = 0;
  auto t = tasks::make_task(unpadded, gen);
  t->start_epoch(0, 0);
  EXPECT_NE(t->staged_steps()->why_not_staged().find("data.pad_to_multiple is 0"), std::string::npos);
  EXPECT_FALSE(t->staged_steps()->staged_shape(0).has_value());
}

// The graphs go to an epoch's most frequent graph keys, counted before its first step (train.cuda_graphs_max
// of them), not to the first keys met twice. The translation's batches are the same every epoch, in a new
// order: with room for m graphs, the steps of the m most frequent shapes replay (each but its first, the
// warm-up), the others run eagerly, and training is the eager one's to the bit. m is the smallest room
// at which the m most frequent shapes are clear (no tie at the cut) and differ from the first m met twice.
TEST(CapturedStep, TheGraphsGoToTheEpochsMostFrequentShapes) {
  const int64_t epochs = 3;
  // The first training seed (it shuffles the batches' order) and room m that tell the rules apart.
  for (int64_t seed = 1; seed <= 20; ++seed) {
    config::Config c = step_graph_translate_config();
    c.train.seed = seed;
    Generator gen(11);
    auto task = tasks::make_task(c, gen);
    std::vector<std::string> met;  // the steps' shapes, epoch after epoch
    for (int64_t e = 0; e < epochs; ++e) {
      task->start_epoch(e, 0);
      for (int64_t i = 0; i < task->steps_per_epoch(); ++i) met.push_back(*task->staged_steps()->staged_shape(i));
    }
    const int64_t per_epoch = task->steps_per_epoch();
    std::map<std::string, int64_t> count;
    for (int64_t i = 0; i < per_epoch; ++i) ++count[met[static_cast<size_t>(i)]];
    std::vector<int64_t> ranked;
    for (const auto& [shape, n] : count) ranked.push_back(n);
    std::sort(ranked.rbegin(), ranked.rend());
    for (size_t m = 1; m < ranked.size(); ++m) {
      if (ranked[m - 1] == ranked[m]) continue;
      std::set<std::string> top;
      for (const auto& [shape, n] : count)
        if (n >= ranked[m - 1]) top.insert(shape);
      int64_t expected = -static_cast<int64_t>(m), covered = 0;  // each shape's first step is its warm-up
      for (size_t i = 0; i < met.size(); ++i)
        if (top.count(met[i])) {
          ++expected;
          covered += i >= met.size() - static_cast<size_t>(per_epoch);
        }
      // The rule before the plan: the m graphs go to the first shapes met twice.
      std::set<std::string> seen, first_met_twice;
      int64_t first_come = 0;
      for (const std::string& s : met) {
        if (first_met_twice.count(s) || (seen.count(s) && first_met_twice.size() < m && first_met_twice.insert(s).second))
          ++first_come;
        seen.insert(s);
      }
      if (expected == first_come) continue;
      SCOPED_TRACE("seed " + std::to_string(seed) + ", room for " + std::to_string(m) + " of " +
                   std::to_string(count.size()) + " shapes");
      c.train.cuda_graphs_max = static_cast<int64_t>(m);
      const StepGraphTraining eager = train_step_graph(c, false, -1, epochs),
                              replayed = train_step_graph(c, true, -1, epochs);
      EXPECT_EQ(replayed.replayed, expected);
      expect_same_training(eager, replayed);
      EXPECT_EQ(replayed.plan.epoch, epochs - 1);
      EXPECT_EQ(replayed.plan.steps, per_epoch);
      EXPECT_EQ(replayed.plan.keys, static_cast<int64_t>(count.size()));
      std::set<std::string> admitted_shapes;  // the keys name their shapes last
      for (const std::string& key : replayed.plan.admitted) admitted_shapes.insert(key.substr(key.rfind(' ') + 1));
      EXPECT_EQ(admitted_shapes, top);
      EXPECT_EQ(replayed.plan.covered_steps, covered);
      return;
    }
  }
  FAIL() << "no seed and room tell the most frequent shapes from the first ones met twice";
}

// Graphs are kept for the run: once train.cuda_graphs_max of them exist, a later epoch's plan has no
// room for another key, however frequent, so what it counts as covered is exactly what replays. The
// classifier's batches are re-formed every epoch (new shapes among them); with room for one graph, the
// last epoch's replays (those of 3 epochs less those of 2) equal its plan's covered steps.
TEST(CapturedStep, APlanCountsOnlyKeysThatHaveOrCanGetAGraph) {
  config::Config c = step_graph_classify_config("sru");
  c.train.cuda_graphs_max = 1;
  const StepGraphTraining two = train_step_graph(c, true, -1, 2), three = train_step_graph(c, true, -1, 3),
                          eager = train_step_graph(c, false, -1, 3);
  expect_same_training(eager, three);
  EXPECT_LE(three.plan.admitted.size(), 1u);
  EXPECT_GT(three.replayed, 0);
  EXPECT_EQ(three.replayed - two.replayed, three.plan.covered_steps);
}

// A parameter left out of the flat buffers (here one whose storage another tensor shares when the
// optimiser lays them out) has no gradient place a replay could leave .grad at, so steps of several
// batches run eagerly (why_not_accumulated), and training is the eager one's to the bit.
TEST(CapturedStep, AccumulatedStepsStayEagerWithAParameterOutsideTheFlatBuffers) {
  config::Config c = step_graph_charlm_config("sru");
  c.train.accumulate = 3;
  std::vector<Tensor> views;  // alive through training: the parameter's storage stays shared
  const auto share_first_parameter = [&views](tasks::Task& task) {
    views.push_back(task.model().named_parameters().front().second.view({-1}));
  };
  const StepGraphTraining eager = train_step_graph(c, false, -1, 2, {}, share_first_parameter),
                          replayed = train_step_graph(c, true, -1, 2, {}, share_first_parameter);
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(replayed.replayed, 0);
  expect_same_training(eager, replayed);
  // Without the shared storage the same steps replay (AccumulatedStepsReplayAGraphPerBatchAndOneForTheUpdate).
  EXPECT_EQ(train_step_graph(c, true, -1, 2).replayed, 5);
}

TEST(CapturedStep, OnIsRefusedWhereAStepCannotBeCaptured) {
  config::Config c = step_graph_charlm_config("sru");
  c.train.cuda_graphs = "on";
  Generator gen(1);
  auto task = tasks::make_task(c, gen);
  auto optimizer = train::make_optimizer(c.train, task->model());
  const std::string cpu = error_of([&] { train::TrainingStep step(*task, *optimizer, c.train, {}); });
  EXPECT_NE(cpu.find("train.cuda_graphs: on, but the model is on cpu"), std::string::npos) << cpu;
  c.train.cuda_graphs = "auto";  // auto on the CPU: eager, no error
  train::TrainingStep step(*task, *optimizer, c.train, {});
  EXPECT_EQ(step.replayed_steps(), 0);
  // Classify and translate stage their steps only with data.pad_to_multiple (the reason `on` names).
  config::Config classify = step_graph_classify_config("sru");
  classify.task_as<tasks::ClassifyOptions>().pad_to_multiple = 0;
  config::Config translate = step_graph_translate_config();
  translate.task_as<tasks::TranslateOptions>().pad_to_multiple = 0;
  for (const config::Config& unbounded : {classify, translate}) {
    auto t = tasks::make_task(unbounded, gen);
    ASSERT_TRUE(t->staged_steps());
    EXPECT_NE(t->staged_steps()->why_not_staged().find("data.pad_to_multiple is 0"), std::string::npos)
        << unbounded.task;
    t->start_epoch(0, 0);
    EXPECT_FALSE(t->staged_steps()->staged_shape(0).has_value()) << unbounded.task;
  }
  const std::string yaml = temp_file("step_graph.yaml", "task: charlm\ndata:\n  path: x.txt\ntrain:\n  cuda_graphs: always\n");
  const std::string bad = error_of([&] { config::load_config(yaml); });
  EXPECT_NE(bad.find("cuda_graphs"), std::string::npos) << bad;
}

// model.cudnn_dropout is a GPU choice: the CPU trains the LSTM with its own masks either way, to the bit;
// the key belongs to the LSTM (other encoders refuse it by name).
TEST(CapturedStep, TheCpuLstmIgnoresCudnnDropout) {
  config::Config c = step_graph_charlm_config("lstm");
  const StepGraphTraining own = train_step_graph(c, false, -1, 1);
  c.encoder_options.as<nn::LSTMOptions>().cudnn_dropout = true;
  expect_same_training(own, train_step_graph(c, false, -1, 1));
  const std::string lstm = "task: charlm\ndata: {path: x}\nmodel: {type: lstm, cudnn_dropout: true}\n";
  EXPECT_TRUE(config::parse_config(lstm, "test").encoder_options.as<nn::LSTMOptions>().cudnn_dropout);
  const std::string sru = "task: charlm\ndata: {path: x}\nmodel: {type: sru, cudnn_dropout: true}\n";
  EXPECT_NE(error_of([&] { config::parse_config(sru, "test"); }).find("cudnn_dropout"), std::string::npos)
      << error_of([&] { config::parse_config(sru, "test"); });
}
