// CUDA graphs (core/cuda/graph.h; label cuda, skipped without a device): a captured forward and backward
// replayed on new contents of its static input gives the eager pass's loss and gradients, its private
// pool keeps the graph's memory from eager work, a host wait inside a capture is refused, the
// error-log kernels (embedding, cross-entropy) capture when the caller vouches for their ids, and a
// char-LM, a classifier and translation trained with train.cuda_graphs on (one batch a step, or
// several: train.accumulate) take the eager runs' steps.
#include <gtest/gtest.h>

#include <tuple>

#include "autograd/engine.h"
#include "core/cuda/graph.h"
#include "core/cuda/runtime.h"
#include "core/kernel_count.h"
#include "cuda_parity.h"
#include "ops/layer_norm.h"
#include "ops/ops.h"
#include "step_graph_training.h"

using namespace sru;
using namespace sru::testing;

#if defined(SRU_WITH_CUDA)
// Skips a test without a device, or where the allocator does not cache (CUDA graphs need its pool).
#define SKIP_WITHOUT_CUDA_GRAPHS()                                                                          \
  SKIP_WITHOUT_CUDA();                                                                                     \
  if (!cuda::allocator_caches()) GTEST_SKIP() << "CUDA graphs need the caching allocator (SRU_CUDA_NO_CACHING is set)"
#endif

#if defined(SRU_WITH_CUDA)
namespace {

// Leaves on the GPU: the Linear's weight and bias, the layer norm's weight and bias.
struct SmallModel {
  Tensor w, b, ln_w, ln_b;
  std::vector<Tensor> leaves() const { return {w, b, ln_w, ln_b}; }
};

SmallModel small_model() {
  auto leaf = [](const Shape& shape, uint64_t seed) {
    return rand_leaf(shape, seed).detach().to(kCuda).set_requires_grad(true);
  };
  return {leaf({40, 24}, 1), leaf({40}, 2), leaf({40}, 3), leaf({40}, 4)};
}

// Losses, norms and final weights of a replayed run against the eager one's, to 1e-6 relative.
void expect_training_within_1e6(const StepGraphTraining& eager, const StepGraphTraining& replayed) {
  for (size_t i = 0; i < eager.losses.size(); ++i) {
    EXPECT_NEAR(replayed.losses[i], eager.losses[i], 1e-6 * std::abs(eager.losses[i])) << "step " << i;
    EXPECT_NEAR(replayed.norms[i], eager.norms[i], 1e-6 * std::abs(eager.norms[i])) << "step " << i;
  }
  for (size_t k = 0; k < eager.parameters.size(); ++k)
    EXPECT_TRUE(tensors_near(replayed.parameters[k].second, eager.parameters[k].second, 1e-6, 1e-6))
        << eager.parameters[k].first;
}

}  // namespace
#endif

// The pass: linear (cuBLASLt with its bias epilogues both ways), layer norm (fused parameter sums),
// a weighted sum; captured once, replayed on three inputs, each against the eager pass on the same input.
TEST(CudaGraph, AReplayedForwardBackwardMatchesTheEagerPass) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend";
#else
  SKIP_WITHOUT_CUDA_GRAPHS();
  const SmallModel m = small_model();
  const Tensor x = Tensor::empty({35, 24}, DType::F32, kCuda);  // the static input
  const Tensor r = rand_leaf({35, 40}, 5).detach().to(kCuda);
  const std::vector<Tensor> inputs{rand_leaf({35, 24}, 6).detach(), rand_leaf({35, 24}, 7).detach()};
  auto pass = [&] { return sum(mul(layer_norm(linear(x, m.w, m.b), m.ln_w, m.ln_b), r)); };
  auto clear_grads = [&] {
    for (const Tensor& t : m.leaves()) Tensor(t).set_grad(Tensor());
  };
  auto results = [&](const Tensor& loss) {
    std::vector<Tensor> out{loss.to(Device::cpu())};
    for (const Tensor& t : m.leaves()) out.push_back(t.grad().to(Device::cpu()));
    return out;
  };
  std::vector<std::vector<Tensor>> eager;
  for (const Tensor& in : inputs) {  // also the warm-up: cuBLAS and the allocator set up before capturing
    clear_grads();
    Tensor(x).copy_(in.to(kCuda));
    const Tensor loss = pass();
    autograd::backward(loss);
    eager.push_back(results(loss));
  }
  clear_grads();
  cuda::CapturedGraph graph(kCuda);
  Tensor loss;
  const uint64_t dispatches_before = kernel_dispatches();
  graph.capture([&] {
    loss = pass();
    autograd::backward(loss);
  });
  const uint64_t captured_dispatches = kernel_dispatches() - dispatches_before;
  ASSERT_TRUE(graph.captured());
  for (int k : {0, 1, 0}) {
    SCOPED_TRACE("input " + std::to_string(k));
    Tensor(x).copy_(inputs[k].to(kCuda));
    const uint64_t before = kernel_dispatches();
    graph.replay();
    EXPECT_EQ(kernel_dispatches() - before, 1u) << "a replay is one dispatch (" << captured_dispatches << " captured)";
    const std::vector<Tensor> got = results(loss);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(tensors_near(got[i], eager[k][i], 1e-6, 1e-6)) << "result " << i;
  }
  EXPECT_EQ(graph.replays(), 3);
  // Eager work after the capture does not get the graph's memory: a replay after it still matches.
  std::vector<Tensor> eager_after;
  for (int i = 0; i < 8; ++i) eager_after.push_back(Tensor::full({35, 40}, 7.0, DType::F32, kCuda));
  Tensor(x).copy_(inputs[1].to(kCuda));
  graph.replay();
  const std::vector<Tensor> got = results(loss);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(tensors_near(got[i], eager[1][i], 1e-6, 1e-6)) << "result " << i;
  for (const Tensor& t : eager_after) EXPECT_EQ(t.to(Device::cpu()).data<float>()[0], 7.0f);
#endif
}

// A host wait inside the captured work is refused with the rule named, and the graph may capture again.
TEST(CudaGraph, AHostWaitInsideTheCaptureIsRefused) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend";
#else
  SKIP_WITHOUT_CUDA_GRAPHS();
  const Tensor x = rand_leaf({8, 8}, 9).detach().to(kCuda);
  cuda::CapturedGraph graph(kCuda);
  const std::string message = error_of([&] { graph.capture([&] { (void)sum(x).item<float>(); }); });
  EXPECT_FALSE(graph.captured());
  EXPECT_NE(message.find("CUDA graph capture on cuda:0 failed"), std::string::npos) << message;
  Tensor y;
  graph.capture([&] { y = mul(x, x); });
  graph.replay();
  EXPECT_TRUE(tensors_near(y.to(Device::cpu()), mul(x, x).to(Device::cpu()), 0, 0));
#endif
}

// The char-LM's error-log kernels in a capture: an embedding lookup and a cross-entropy are refused
// while capturing unless the caller vouches for their ids (cuda::CallerCheckedInputs, as a captured
// step's host-staged inputs are); with it they are captured, and replays on new ids (and the embedding's
// backward, sorted runs through cub) match the eager pass.
TEST(CudaGraph, EmbeddingAndCrossEntropyCaptureWithCallerCheckedIds) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend";
#else
  SKIP_WITHOUT_CUDA_GRAPHS();
  const Tensor table = rand_leaf({11, 6}, 31).detach().to(kCuda).set_requires_grad(true);
  const Tensor ids = Tensor::empty({9}, DType::I64, kCuda), targets = Tensor::empty({9}, DType::I64, kCuda);
  const std::vector<std::vector<int64_t>> id_sets{{0, 3, 3, 10, 5, 3, 1, 0, 7}, {2, 2, 2, 9, 4, 6, 8, 1, 3}};
  const std::vector<std::vector<int64_t>> target_sets{{1, 5, 0, 2, 2, 3, 4, 5, 0}, {0, 0, 1, 1, 5, 4, 3, 2, 2}};
  auto stage = [&](size_t k) {
    Tensor(ids).copy_(Tensor::from_vector(id_sets[k], {9}).to(kCuda));
    Tensor(targets).copy_(Tensor::from_vector(target_sets[k], {9}).to(kCuda));
  };
  auto pass = [&] { return cross_entropy(embedding(table, ids), targets); };
  std::vector<std::pair<Tensor, Tensor>> eager;  // loss, the table's gradient
  for (size_t k = 0; k < 2; ++k) {
    Tensor(table).set_grad(Tensor());
    stage(k);
    const Tensor loss = pass();
    autograd::backward(loss);
    eager.emplace_back(loss.to(Device::cpu()), table.grad().to(Device::cpu()));
  }
  Tensor(table).set_grad(Tensor());
  {
    cuda::CapturedGraph refused(kCuda);
    const std::string message = error_of([&] { refused.capture([&] { (void)pass(); }); });
    EXPECT_NE(message.find("device error log"), std::string::npos) << message;
  }
  Tensor(table).set_grad(Tensor());
  cuda::CapturedGraph graph(kCuda);
  Tensor loss;
  {
    const cuda::CallerCheckedInputs checked;
    graph.capture([&] {
      loss = pass();
      autograd::backward(loss);
    });
  }
  for (size_t k : {1u, 0u, 1u}) {
    SCOPED_TRACE("ids " + std::to_string(k));
    stage(k);
    graph.replay();
    EXPECT_TRUE(tensors_near(loss.to(Device::cpu()), eager[k].first, 1e-6, 1e-6));
    EXPECT_TRUE(tensors_near(table.grad().to(Device::cpu()), eager[k].second, 1e-6, 1e-6));
  }
#endif
}

// train.cuda_graphs on a GPU: the char-LM of the CPU twin's test (unit/test_step_graph.cpp; dropout,
// noam, clipping) trained with its step captured and replayed takes the eager run's losses, norms and
// parameters to 1e-6 relative: the full steps replay after the eager start of each epoch, each with one
// dispatch (the graph: the inputs' copies are transfers, the loss and norm one read); the LSTM's too,
// cuDNN's calls captured with the descriptors kept for their shape (ops/cuda/lstm_cudnn.cu), at fp32,
// tf32 and bf16.
TEST(CudaGraph, ACapturedCharLmTrainingStepTrainsAsTheEagerOne) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend";
#else
  SKIP_WITHOUT_CUDA_GRAPHS();
  // The SRU at each precision (bf16: the casts of the weights and activations inside the graph).
  for (const auto& [encoder, precision] : std::vector<std::pair<std::string, std::string>>{
           {"sru", "fp32"}, {"sru", "tf32"}, {"sru", "bf16"}, {"srupp", "fp32"}, {"transformer", "bf16"}, {"lstm", "fp32"},
           {"lstm", "tf32"}, {"lstm", "bf16"}}) {
    SCOPED_TRACE(encoder + " at " + precision);
    config::Config c = step_graph_charlm_config(encoder, "cuda");
    c.train.precision = precision;
    c.train.cuda_graphs = "off";
    const StepGraphTraining eager = train_step_graph(c, false);
    c.train.cuda_graphs = "on";  // a capture that fails fails the test
    const StepGraphTraining replayed = train_step_graph(c, false);
    EXPECT_EQ(eager.replayed, 0);
    // The SRU and the LSTM replay 19 of 26 steps, SRU++ (its memory growing first) 17, the causal
    // Transformer (no carried state) 21 (the CPU twin's test says which run eagerly).
    EXPECT_EQ(replayed.replayed, encoder == "srupp" ? 17 : encoder == "transformer" ? 21 : 19);
    expect_training_within_1e6(eager, replayed);
    // Steps 5..11 only replay (steps 0-2 are eager and step 3 captures, SRU++'s one later; the second
    // epoch starts at 13).
    for (size_t i = 5; i < 12; ++i) EXPECT_EQ(replayed.dispatches[i], 1u) << "step " << i;
    EXPECT_GT(eager.dispatches[2], 20u);
  }
#endif
}

// train.launch_ahead on a GPU: the char-LM's replayed steps launched before the step before them is read
// (its loss and norm copied behind its graph, read after the next launch) train as the graphs without
// the update's gate read step by step, to the bit (the gate multiplies the clip factor by 1), one launch
// a call and one value read a step; most steps stay launched across a call.
TEST(CudaGraph, StepsLaunchedAheadTrainAsStepsReadOneByOne) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend";
#else
  SKIP_WITHOUT_CUDA_GRAPHS();
  for (const std::string& encoder : {"sru", "lstm"}) {
    SCOPED_TRACE(encoder);
    config::Config c = step_graph_charlm_config(encoder, "cuda");
    c.train.precision = "bf16";
    c.train.cuda_graphs = "on";
    c.train.launch_ahead = "off";  // graphs without the update's gate
    const StepGraphTraining read = train_step_graph(c, false, -1, 2, {}, {}, false);
    c.train.launch_ahead = "on";
    const StepGraphTraining ahead = train_step_graph(c, false, -1, 2, {}, {}, true);
    EXPECT_EQ(read.steps_left_launched, 0);
    EXPECT_GE(ahead.steps_left_launched, 15);
    EXPECT_EQ(ahead.replayed, read.replayed);
    expect_same_training(read, ahead);
    uint64_t reads = 0;
    for (uint64_t n : ahead.value_reads) reads += n;
    EXPECT_EQ(reads, static_cast<uint64_t>(ahead.steps));
    for (size_t i = 5; i < 12; ++i) EXPECT_EQ(ahead.dispatches[i], 1u) << "step " << i;
  }
#endif
}

// The classifier on a GPU (bidirectional SRU, padded to multiples of 4): one graph per batch shape,
// the replayed steps' losses, norms and weights within 1e-6 of the eager run's.
TEST(CudaGraph, ClassifierStepsReplayTheGraphOfTheirShape) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend";
#else
  SKIP_WITHOUT_CUDA_GRAPHS();
  config::Config c = step_graph_classify_config("sru", "cuda");
  c.train.cuda_graphs = "off";
  const StepGraphTraining eager = train_step_graph(c, false, -1, 3);
  c.train.cuda_graphs = "on";
  const StepGraphTraining replayed = train_step_graph(c, false, -1, 3);
  EXPECT_EQ(eager.replayed, 0);
  EXPECT_GE(replayed.replayed, 20);
  expect_training_within_1e6(eager, replayed);
#endif
}

// model.cudnn_dropout on a GPU: the char-LM's 2-layer LSTM with dropout 0.2 trains with the stack in
// one cuDNN call (one cudnnRNNForward a step, not one a layer) drawing cuDNN's masks, which differ from
// the CPU's (the losses move), repeat from the seed (a second eager run is the same to the bit), and
// advance inside a replayed graph as eagerly (on: 19 steps replayed, within 1e-6 of eager), at tf32.
TEST(CudaGraph, AnLstmWithCudnnDropoutRunsOneCallAndReplaysAsEagerly) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend";
#else
  SKIP_WITHOUT_CUDA_GRAPHS();
  config::Config c = step_graph_charlm_config("lstm", "cuda");
  c.train.precision = "tf32";
  c.train.cuda_graphs = "off";
  const StepGraphTraining own_masks = train_step_graph(c, false);
  c.encoder_options.as<nn::LSTMOptions>().cudnn_dropout = true;
  start_host_profile();
  const StepGraphTraining eager = train_step_graph(c, false);
  const std::vector<HostProfileEntry> profile = stop_host_profile();
  const StepGraphTraining again = train_step_graph(c, false);
  c.train.cuda_graphs = "on";
  const StepGraphTraining replayed = train_step_graph(c, false);
  uint64_t forward_calls = 0;
  for (const HostProfileEntry& e : profile)
    if (e.name == "cudnnRNNForward") forward_calls += e.marks;
  EXPECT_EQ(forward_calls, eager.losses.size()) << "not one cuDNN call a step";
  EXPECT_NE(eager.losses, own_masks.losses) << "the CPU's masks, not cuDNN's";
  EXPECT_EQ(again.losses, eager.losses);
  EXPECT_EQ(replayed.replayed, 19);
  expect_training_within_1e6(eager, replayed);
#endif
}

// cuDNN's dropout states (model.cudnn_dropout) advance outside the Philox counters. A step launched
// behind a non-finite one (step 6, a NaN in the output bias) ran its cuDNN call before it was taken back;
// its states are put back (nn::Module::random_states, TrainingStep::take_back), so the LSTM launched
// ahead through the skipped step trains as read step by step, to the bit (without it, every mask after
// step 6 differs).
TEST(CudaGraph, AStepTakenBackLeavesCudnnDropoutStatesAsItFoundThem) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend";
#else
  SKIP_WITHOUT_CUDA_GRAPHS();
  config::Config c = step_graph_charlm_config("lstm", "cuda");
  c.train.precision = "tf32";
  c.train.cuda_graphs = "on";
  c.encoder_options.as<nn::LSTMOptions>().cudnn_dropout = true;
  c.train.launch_ahead = "off";
  const StepGraphTraining read = train_step_graph(c, false, 6, 2, {}, {}, false);
  c.train.launch_ahead = "on";
  const StepGraphTraining ahead = train_step_graph(c, false, 6, 2, {}, {}, true);
  EXPECT_EQ(read.kinds[6], train::StepOutcome::Kind::Skipped);
  EXPECT_GE(ahead.steps_left_launched, 10);
  expect_same_training(read, ahead);
#endif
}

// The LSTM classifier on a GPU, its batches padded: cuDNN would take the padding as host lengths that a
// graph freezes, so each capture is refused (the device mask's read is a host wait) and `auto` trains
// every step eagerly, as with the key off; `on` fails naming the reason.
TEST(CudaGraph, PaddedLstmStepsAreNotCaptured) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend";
#else
  SKIP_WITHOUT_CUDA_GRAPHS();
  config::Config c = step_graph_classify_config("lstm", "cuda");
  c.train.cuda_graphs = "off";
  const StepGraphTraining eager = train_step_graph(c, false, -1, 3);
  c.train.cuda_graphs = "auto";
  const StepGraphTraining tried = train_step_graph(c, false, -1, 3);
  EXPECT_EQ(tried.replayed, 0);
  expect_training_within_1e6(eager, tried);
  c.train.cuda_graphs = "on";
  const std::string refused = error_of([&] { train_step_graph(c, false, -1, 3); });
  EXPECT_NE(refused.find("captur"), std::string::npos) << refused;
#endif
}

// Translation on a GPU (the tiny Transformer of the CPU twin's test, lengths rounded to multiples of 4):
// one graph per token batch's shape, the replayed steps within 1e-6 of the eager run's. `on`: a capture
// that fails (a host copy somewhere in the encoder or decoder) fails the test instead of training eagerly.
TEST(CudaGraph, TranslationStepsReplayTheGraphOfTheirShape) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend";
#else
  SKIP_WITHOUT_CUDA_GRAPHS();
  config::Config c = step_graph_translate_config("cuda");
  c.train.cuda_graphs = "off";
  const StepGraphTraining eager = train_step_graph(c, false, -1, 3);
  c.train.cuda_graphs = "on";
  const StepGraphTraining replayed = train_step_graph(c, false, -1, 3);
  EXPECT_EQ(replayed.replayed, 60);  // as through the CPU twin
  expect_training_within_1e6(eager, replayed);
#endif
}

// SQuAD on a GPU (the Document Reader of the CPU twin's test on the shipped sample, paragraphs and
// questions padded to multiples of 32): one graph per batch shape, the replayed steps within 1e-6 of
// the eager run's; `on` fails the test where a capture fails (a host read of a mask in the reader).
TEST(CudaGraph, SquadStepsReplayTheGraphOfTheirShape) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend";
#else
  SKIP_WITHOUT_CUDA_GRAPHS();
  config::Config c = step_graph_squad_config("cuda");
  c.train.cuda_graphs = "off";
  const StepGraphTraining eager = train_step_graph(c, false, -1, 2);
  c.train.cuda_graphs = "on";
  const StepGraphTraining replayed = train_step_graph(c, false, -1, 2);
  EXPECT_EQ(eager.replayed, 0);
  EXPECT_GT(replayed.replayed, 0);
  EXPECT_EQ(replayed.replayed, train_step_graph(step_graph_squad_config(), true, -1, 2).replayed);  // the twin's
  expect_training_within_1e6(eager, replayed);
#endif
}

// train.accumulate 3 on a GPU with the key on: a graph per batch shape (the step's gradients and loss
// sum zeroed first, so that every batch adds) and one for the update, the step's loss weights and
// 1 / terms read from memory: the replayed steps of the char-LM (SRU at bf16) and of translation take
// the eager run's losses, norms and weights to 1e-6 relative, as many replayed as through the CPU twin,
// a replayed char-LM step six dispatches (its one flat group's and the loss sum's fills, three batch
// replays and the update's; seven where it first stages a carried state).
TEST(CudaGraph, AccumulatedStepsReplayAGraphPerBatchAndOneForTheUpdate) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend";
#else
  SKIP_WITHOUT_CUDA_GRAPHS();
  config::Config charlm = step_graph_charlm_config("sru", "cuda");
  charlm.train.precision = "bf16";
  for (auto [c, epochs, replays] : std::vector<std::tuple<config::Config, int64_t, int64_t>>{
           {charlm, 2, 5}, {step_graph_translate_config("cuda"), 3, 18}}) {
    SCOPED_TRACE(c.task);
    c.train.accumulate = 3;
    c.train.cuda_graphs = "off";
    const StepGraphTraining eager = train_step_graph(c, false, -1, epochs);
    c.train.cuda_graphs = "on";
    const StepGraphTraining replayed = train_step_graph(c, false, -1, epochs);
    EXPECT_EQ(replayed.replayed, replays);
    expect_training_within_1e6(eager, replayed);
    // Step 6, the first replay after the epoch's eager first step, copies that step's carried state
    // into the graph's static one first (LanguageModelTask::stage_carried_state; counted on the CPU
    // by CapturedStep.AccumulatedStepsReplayAGraphPerBatchAndOneForTheUpdate).
    if (c.task == "charlm")
      for (size_t i : {3, 6, 7, 8}) EXPECT_EQ(replayed.dispatches[i], i == 6 ? 7u : 6u) << "step " << i;
  }
#endif
}

// A capture that fails after its host code ran, on the card: the char-LM's second capture (the update of
// its first replayed accumulated step, after its batches' one graph) ends with a host wait, which the
// capture refuses. The update then
// runs eagerly on the gradients the step's batch graphs summed (the host code left the .grad handles as
// it found them) and training matches the eager run within 1e-6; no accumulated step replays after.
TEST(CudaGraph, AnAccumulatedStepWhoseUpdateCaptureFailsFinishesEagerly) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend";
#else
  SKIP_WITHOUT_CUDA_GRAPHS();
  struct EndsWithAHostWait final : train::StepGraph {
    std::unique_ptr<train::StepGraph> graph;
    bool refused;
    EndsWithAHostWait(std::unique_ptr<train::StepGraph> g, bool r) : graph(std::move(g)), refused(r) {}
    void capture(std::function<void()> step) override {
      if (!refused) return graph->capture(std::move(step));
      graph->capture([step] {
        step();
        (void)Tensor::zeros({1}, DType::F32, kCuda).item<float>();  // a host wait: the capture fails here
      });
    }
    bool captured() const override { return graph->captured(); }
    void replay() override { graph->replay(); }
  };
  config::Config c = step_graph_charlm_config("sru", "cuda");
  c.train.accumulate = 3;
  c.train.cuda_graphs = "off";
  const StepGraphTraining eager = train_step_graph(c, false, -1, 2);
  c.train.cuda_graphs = "auto";
  int captures = 0;
  const auto memory = train::step_graph_memory(kCuda);
  const auto second_refused = [&](tasks::Task&, optim::Optimizer&) {
    return std::make_unique<EndsWithAHostWait>(train::cuda_step_graph(kCuda, memory), ++captures == 2);
  };
  const StepGraphTraining failed = train_step_graph(c, true, -1, 2, second_refused);
  EXPECT_EQ(captures, 2);
  EXPECT_EQ(failed.replayed, 0);
  expect_training_within_1e6(eager, failed);
#endif
}
