// Host waits per training step, counted on the CPU: every call that would wait for a GPU (a value read
// to the host: item, to_vector, read_scalars) is counted on the CPU too, so a CPU run of the step's
// code path shows how many waits a GPU run makes at those points. The step (tests/train_step.h) must
// make exactly one: the loss and gradient norm read together. It is srutrain's own step
// (train::TrainingStep) on a char-LM task. What only a GPU shows (waits inside the
// CUDA kernels' host code, copies) is counted for real by the same test on cuda:0
// (tests/parity/test_cuda_hardening.cpp) and kept out of the kernels by the lint test
// cuda_kernels_read_nothing_back.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "autograd/engine.h"
#include "core/cuda/device_busy.h"
#include "core/host_sync.h"
#include "nn/lstm.h"
#include "nn/sru.h"
#include "ops/reduce.h"
#include "train_step.h"

using namespace sru;

namespace {

std::string listed(const std::vector<std::string>& events) {
  std::string s;
  for (const std::string& e : events) s += "\n  " + e;
  return s;
}

void expect_one_wait_per_step(const std::string& type) {
  sru::testing::CharLmSteps steps(type, Device::cpu());
  for (int step = 0; step < 4; ++step) {
    HostWaitRecorder recorder;
    const train::StepOutcome v = steps.next();
    EXPECT_EQ(v.kind, train::StepOutcome::Kind::Updated);
    EXPECT_TRUE(std::isfinite(v.loss) && std::isfinite(v.grad_norm));
    EXPECT_EQ(recorder.counts().value_reads, 1u) << type << " step " << step << listed(recorder.events());
    EXPECT_EQ(recorder.counts().device_waits, 0u);
  }
}

}  // namespace

TEST(HostWaitsPerStep, SruCharLmStepReadsOnce) { expect_one_wait_per_step("sru"); }
TEST(HostWaitsPerStep, LstmCharLmStepReadsOnce) { expect_one_wait_per_step("lstm"); }

// Padded batches: masks made on the CPU are read where needed (LSTM lengths) without a value read,
// and forward + backward of both recurrences read nothing.
TEST(HostWaitsPerStep, PaddedRecurrencesReadNothing) {
  const int64_t L = 6, B = 3;
  std::vector<float> pad(L * B, 0.0f);
  for (int64_t t = 4; t < L; ++t) pad[t * B + 1] = 1.0f;
  const Tensor mask = Tensor::from_vector(pad, {L, B});
  Generator gen(5);
  nn::SRUOptions so;
  so.input_size = 8;
  so.hidden_size = 8;
  so.num_layers = 2;
  so.rescale = true;
  nn::SRU sru(so, gen);
  nn::LSTMOptions lo;
  lo.input_size = 8;
  lo.hidden_size = 8;
  nn::LSTM lstm(lo, gen);
  const Tensor x = Tensor::uniform({L, B, 8}, -1, 1, DType::F32, gen);
  HostWaitRecorder recorder;
  autograd::backward(sum(sru.forward(x, Tensor(), mask).first));
  autograd::backward(sum(lstm.forward(x, Tensor(), Tensor(), mask).output));
  EXPECT_EQ(recorder.counts().value_reads, 0u) << listed(recorder.events());
}

// A device wait is counted and timed (what srubench train-epoch subtracts from the step's wall time to
// show the host's own milliseconds): the recorder sees its count, its name and at least its duration.
TEST(HostWaits, TimedDeviceWaitsAreCountedNamedAndTimed) {
  HostWaitRecorder recorder;
  {
    const detail::TimedDeviceWait wait("a test's wait");
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  EXPECT_EQ(recorder.counts().device_waits, 1u);
  EXPECT_GE(recorder.counts().device_wait_ns, 3'000'000u);
  EXPECT_EQ(recorder.events(), std::vector<std::string>{"device wait: a test's wait"});
}

// Scalars read later (what the trainer's launching ahead reads a step's loss and norm with): on the CPU
// the values are the tensors' at construction, whatever is written to them afterwards; wait() is the one
// value read and fills the doubles; a second wait() is refused.
TEST(HostWaits, ScalarsReadLaterAreTheValuesAtTheirQueueing) {
  Tensor loss = Tensor::full({}, 2.5, DType::F32), norm = Tensor::full({}, 0.125, DType::F64);
  double loss_value = 0, norm_value = 0;
  HostWaitRecorder recorder;
  ScalarsReadLater later({{loss, &loss_value}, {norm, &norm_value}});
  loss.fill_(7.0);  // a later step writing the same outputs again
  norm.fill_(9.0);
  EXPECT_EQ(recorder.counts().value_reads, 0u);
  later.wait();
  EXPECT_EQ(loss_value, 2.5);
  EXPECT_EQ(norm_value, 0.125);
  EXPECT_EQ(recorder.events(), std::vector<std::string>{"value read: ScalarsReadLater"});
  EXPECT_NE(sru::testing::error_of([&] { later.wait(); }).find("read already"), std::string::npos);
  EXPECT_NE(sru::testing::error_of([&] { ScalarsReadLater two({{Tensor::zeros({2}), &loss_value}}); }).find("expected 1"),
            std::string::npos);
}

// srubench train-epoch --idle-share (core/cuda/device_busy.h): the GPU's busy time is the union of its
// activity intervals within the measured window, so overlapping kernels (several streams, a copy beside
// a kernel) count once, nested ones not at all, and the parts outside the window are left out.
TEST(DeviceBusy, TheBusyTimeIsTheUnionOfTheIntervalsInsideTheWindow) {
  using cuda::union_length;
  EXPECT_EQ(union_length({}, 0, 100), 0u);
  EXPECT_EQ(union_length({{10, 20}, {30, 45}}, 0, 100), 25u);                       // disjoint
  EXPECT_EQ(union_length({{30, 45}, {10, 20}, {15, 35}}, 0, 100), 35u);             // overlapping, unsorted
  EXPECT_EQ(union_length({{10, 50}, {20, 30}, {25, 40}}, 0, 100), 40u);             // nested
  EXPECT_EQ(union_length({{0, 20}, {90, 130}, {40, 40}}, 10, 100), 20u);            // clipped; empty
  EXPECT_EQ(union_length({{0, 5}, {120, 130}}, 10, 100), 0u);                       // outside the window
  cuda::DeviceBusy busy;
  busy.busy_ms = 3;
  busy.wall_ms = 4;
  EXPECT_DOUBLE_EQ(busy.idle_share(), 0.25);
}
