// CUDA hardening tests (label cuda; they skip without a device): the SRU kernels at chunk boundaries and
// odd padding, the cuDNN LSTM in inference mode and with padding under NaN fill, loops that run more
// than one grid, row kernels at tiny widths, GEMM with K = 0, concat with rows over 2 GiB, every op
// family refusing operands on two devices, kernel-found input errors reported at the next host wait,
// copies to the device that do not wait, the allocator over variable shapes and in NaN-fill mode, and
// the host waits of a training step counted for real.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "autograd/node.h"
#include "core/cuda/runtime.h"
#include "core/debug_fill.h"
#include "core/host_sync.h"
#include "cuda_parity.h"
#include "nn/lstm.h"
#include "ops/lstm_cudnn.h"
#include "ops/lstm_recurrence.h"
#include "ops/softmax.h"
#include "ops/sru_recurrence.h"
#include "train_step.h"

using namespace sru;
using namespace sru::testing;

namespace {

// (L, B) padding with the given padded steps for sequence b; the others unpadded.
Tensor padding(int64_t L, int64_t B, int64_t b, const std::vector<int64_t>& steps) {
  std::vector<float> pad(L * B, 0.0f);
  for (int64_t t : steps) pad[t * B + b] = 1.0f;
  return Tensor::from_vector(pad, {L, B});
}

// One layer of n_in -> hidden on the CPU and on cuda:0 (cuda_parity.h's lstm_pair).
LstmPair lstm_pair(int64_t n_in, int64_t hidden, bool bidirectional, uint64_t seed) {
  nn::LSTMOptions o;
  o.input_size = n_in;
  o.hidden_size = hidden;
  o.bidirectional = bidirectional;
  return sru::testing::lstm_pair(o, seed);
}

}  // namespace

// L at and around the kernels' 8-step chunks, a single sequence, padding at the start, in the middle, at
// the end and over a whole sequence, and |U| large enough to saturate the gates.
TEST(CudaHardening, SruRecurrenceEdgeCases) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 500;
  for (DType dt : {DType::F32, DType::F64})
    for (int64_t L : {1, 7, 8, 16, 17, 24, 33})  // the kernels' chunk and chunk-pair boundaries
      for (int64_t B : {1, 3})
        for (bool bidir : {false, true})
          for (int pattern = 0; pattern < 5; ++pattern) {
            const int64_t d = 5, out = (bidir ? 2 : 1) * d, k = pattern % 2 ? 4 : 3;
            SruRecurrenceOptions o;
            o.hidden_size = d;
            o.bidirectional = bidir;
            o.k = static_cast<int>(k);
            o.scale_x = 1.25;
            const double u_range = pattern == 4 ? 40.0 : 2.0;  // pattern 4: large |U|
            const Tensor U = rand_leaf({L, B, out * k}, ++seed, dt, -u_range, u_range);
            const Tensor x = rand_leaf({L, B, out}, ++seed, dt), c0 = rand_leaf({B, out}, ++seed, dt);
            const Tensor wc = rand_leaf({2 * out}, ++seed, dt), bias = rand_leaf({2 * out}, ++seed, dt);
            const int64_t b = B - 1;
            Tensor mask_pad;
            if (pattern == 0) mask_pad = padding(L, B, b, {0, 1 % L});                    // start
            if (pattern == 1) mask_pad = padding(L, B, b, {L / 2});                        // middle
            if (pattern == 2) mask_pad = padding(L, B, b, {L - 1, std::max<int64_t>(L - 2, 0)});  // end
            if (pattern == 3) {                                                             // whole sequence
              std::vector<int64_t> all(L);
              for (int64_t t = 0; t < L; ++t) all[t] = t;
              mask_pad = padding(L, B, b, all);
            }
            SCOPED_TRACE(std::string(dtype_name(dt)) + " L=" + std::to_string(L) + " B=" + std::to_string(B) +
                         (bidir ? " bidir" : "") + " pattern " + std::to_string(pattern));
            expect_parity(
                [o](const Inputs& v) {
                  auto [h, c] = sru_recurrence(v[0], v[1], v[2], v[3], v[4], Tensor(), v[5], o);
                  return std::vector<Tensor>{h, c};
                },
                {U, x, wc, bias, c0, mask_pad}, dt == DType::F32 ? 1e-4 : 1e-10);
          }
}

// scale_x read by the kernel from a device tensor equals the host value.
TEST(CudaHardening, SruScaleFromTensor) {
  SKIP_WITHOUT_CUDA();
  SruRecurrenceOptions o;
  o.hidden_size = 4;
  o.scale_x_tensor = Tensor::full({1}, 0.6);
  const Tensor U = rand_leaf({5, 2, 12}, 1), x = rand_leaf({5, 2, 4}, 2), wc = rand_leaf({8}, 3), b = rand_leaf({8}, 4);
  expect_parity(
      [o](const Inputs& v) {
        SruRecurrenceOptions on = o;
        on.scale_x_tensor = o.scale_x_tensor.to(v[0].device());
        auto [h, c] = sru_recurrence(v[0], v[1], v[2], v[3], Tensor(), Tensor(), Tensor(), on);
        return std::vector<Tensor>{h, c};
      },
      {U, x, wc, b}, 1e-4);
}

// cuDNN in inference mode (no graph), without h0 and c0, one layer, no padding.
TEST(CudaHardening, CudnnLstmInferenceWithoutInitialState) {
  SKIP_WITHOUT_CUDA();
  for (bool bidir : {false, true}) {
    const LstmPair m = lstm_pair(7, 6, bidir, 3);
    m.cpu->eval();
    m.gpu->eval();
    autograd::NoGradGuard no_grad;
    const Tensor x = rand_leaf({9, 4, 7}, 4).detach();
    const nn::RecurrentOutput a = m.cpu->forward(x), b = m.gpu->forward(x.to(kCuda));
    EXPECT_TRUE(tensors_near(b.output, a.output, 1e-4, 1e-4));
    EXPECT_TRUE(tensors_near(b.h, a.h, 1e-4, 1e-4));
    EXPECT_TRUE(tensors_near(b.c, a.c, 1e-4, 1e-4));
  }
}

// Padded steps under NaN fill: y (forward) and dx (backward) there must be the CPU LSTM's zeros, which
// holds only because they are zeroed before the cuDNN calls; the mask comes from the CPU.
TEST(CudaHardening, CudnnLstmPaddedStepsAreZeroUnderNanFill) {
  SKIP_WITHOUT_CUDA();
  const bool before = set_nan_fill(true);
  const LstmPair m = lstm_pair(5, 4, true, 8);
  const int64_t L = 6, B = 3;
  std::vector<float> pad(L * B, 0.0f);
  for (int64_t b = 1; b < B; ++b)
    for (int64_t t = L - 2 * b; t < L; ++t) pad[t * B + b] = 1.0f;
  const Tensor mask = Tensor::from_vector(pad, {L, B});
  const Tensor x = rand_leaf({L, B, 5}, 9);
  expect_parity(
      [&](const Inputs& v) {
        const nn::LSTM& lstm = v[0].device().is_cuda() ? *m.gpu : *m.cpu;
        const nn::RecurrentOutput r = lstm.forward(v[0], Tensor(), Tensor(), mask);
        return std::vector<Tensor>{r.output, r.h, r.c};
      },
      {x}, 1e-4);
  set_nan_fill(before);
}

// More elements / rows than one capped grid covers (65535 * 16 blocks): every grid-stride and
// row-stride loop runs a second round.
TEST(CudaHardening, LoopsBeyondOneGrid) {
  SKIP_WITHOUT_CUDA();
  const int64_t n = (int64_t{1} << 28) + 1000;  // > 65535 * 16 * 256 elements
  Generator gen(4);
  const Tensor x = Tensor::uniform({n}, -1, 1, DType::F32, gen);
  const std::vector<float> got = ((x.to(kCuda) + 1.0) * 2.0).to_vector<float>();
  const std::vector<float> want = ((x + 1.0) * 2.0).to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  int64_t mismatches = 0;
  for (size_t i = 0; i < got.size(); ++i) mismatches += got[i] != want[i];
  EXPECT_EQ(mismatches, 0);
  const int64_t rows = 1100000;  // > 65535 * 16 rows
  expect_parity(one([](const Inputs& v) { return softmax(v[0]); }), {rand_leaf({rows, 3}, 5)}, 1e-5);
  expect_parity(one([](const Inputs& v) { return layer_norm(v[0], v[1], v[2]); }),
                {rand_leaf({rows, 1}, 6), rand_leaf({1}, 7), rand_leaf({1}, 8)}, 1e-5);
  std::vector<int64_t> targets(rows);
  for (int64_t i = 0; i < rows; ++i) targets[i] = i % 3;
  expect_parity(one([](const Inputs& v) { return cross_entropy(v[0], v[1]); }),
                {rand_leaf({rows, 3}, 9), Tensor::from_vector(targets, {rows})}, 1e-5);
  expect_parity(one([](const Inputs& v) { return sum(v[0], 1); }), {rand_leaf({rows, 2}, 10)}, 1e-5);
}

TEST(CudaHardening, TinyWidthsAndEmptyInnerDimension) {
  SKIP_WITHOUT_CUDA();
  for (int64_t C : {1, 3, 100, 255})
    expect_parity(one([](const Inputs& v) { return log_softmax(v[0]); }), {rand_leaf({7, C}, 20 + C)}, 1e-5);
  expect_parity(one([](const Inputs& v) { return layer_norm(v[0], v[1], v[2]); }),
                {rand_leaf({4, 3, 1}, 30), rand_leaf({1}, 31), rand_leaf({1}, 32)}, 1e-5);
  expect_parity(one([](const Inputs& v) { return matmul(v[0], v[1]); }), {rand_leaf({4, 0}, 33), rand_leaf({0, 3}, 34)},
                1e-6);
  expect_parity(one([](const Inputs& v) { return matmul(v[0], v[1], true, false); }),
                {rand_leaf({0, 5}, 35), rand_leaf({0, 2}, 36)}, 1e-6);
  expect_parity(one([](const Inputs& v) { return bmm(v[0], v[1]); }), {rand_leaf({2, 3, 0}, 37), rand_leaf({2, 0, 4}, 38)},
                1e-6);
}

// A 2-D copy takes pitches up to 2^31 - 1 bytes: rows of 2^29 + 32 floats go through the copy kernel
// (concat into them, slices out of them). Needs about 8.6 GB of device memory.
TEST(CudaHardening, ConcatAndSliceWithRowsOver2GiB) {
  SKIP_WITHOUT_CUDA();
  autograd::NoGradGuard no_grad;
  const int64_t n = (int64_t{1} << 28) + 16;
  auto rows = [&](double first, double second) {
    return concat({Tensor::full({1, n}, first, DType::F32, kCuda), Tensor::full({1, n}, second, DType::F32, kCuda)}, 0);
  };
  const Tensor y = concat({rows(1, 3), rows(2, 4)}, 1);  // (2, 2n): dst pitch 2^31 + 128 bytes
  ASSERT_EQ(y.shape(), (Shape{2, 2 * n}));
  EXPECT_EQ(slice(y, 1, n - 1, n + 1).to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(slice(y, 1, 0, 1).to_vector<float>(), (std::vector<float>{1, 3}));
  EXPECT_EQ(slice(y, 1, 2 * n - 1, 2 * n).to_vector<float>(), (std::vector<float>{2, 4}));
}

// Every op family with operands on two devices is refused with both devices named (the wrappers'
// own checks, or SRU_KERNEL's for the operands they do not look at). One-operand families (unary,
// reduce, softmax, dropout, slice, transpose) cannot mix devices.
TEST(CudaHardening, MismatchedDevicesAreRefusedByEveryOpFamily) {
  SKIP_WITHOUT_CUDA();
  const Tensor g = Tensor::ones({4, 3}, DType::F32, kCuda), c = Tensor::ones({4, 3});
  const Tensor row_c = Tensor::ones({3});
  const Tensor idx_c = Tensor::zeros({4}, DType::I64), idx_g = idx_c.to(kCuda);
  std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"add", [&] { add(g, c); }},
      {"mul (broadcast row)", [&] { mul(g, row_c); }},
      {"matmul", [&] { matmul(g, Tensor::ones({3, 2})); }},
      {"bmm", [&] { bmm(g.view({1, 4, 3}), Tensor::ones({1, 3, 2})); }},
      {"cross_entropy", [&] { cross_entropy(g, idx_c); }},
      {"embedding", [&] { embedding(g, idx_c); }},
      {"embedding (weight)", [&] { embedding(c, idx_g); }},
      {"layer_norm weight", [&] { layer_norm(g, row_c, Tensor()); }},
      {"layer_norm bias", [&] { layer_norm(g, Tensor(), row_c); }},
      {"masked_fill", [&] { masked_fill(g, row_c, 0.0); }},
      {"where condition", [&] { where(row_c, g, g); }},
      {"where branch", [&] { where(row_c.to(kCuda), g, c); }},
      {"concat", [&] { concat({g, c}, 0); }},
      {"sru_recurrence weight_c",
       [&] {
         SruRecurrenceOptions o;
         o.hidden_size = 1;
         sru_recurrence(Tensor::ones({2, 1, 3}, DType::F32, kCuda), Tensor::ones({2, 1, 1}, DType::F32, kCuda),
                        Tensor::ones({2}), Tensor::ones({2}, DType::F32, kCuda), Tensor(), Tensor(), Tensor(), o);
       }},
      {"sru_recurrence scale_x",
       [&] {
         SruRecurrenceOptions o;
         o.hidden_size = 1;
         o.scale_x_tensor = Tensor::ones({1});
         const Tensor w = Tensor::ones({2}, DType::F32, kCuda);
         sru_recurrence(Tensor::ones({2, 1, 3}, DType::F32, kCuda), Tensor::ones({2, 1, 1}, DType::F32, kCuda), w, w,
                        Tensor(), Tensor(), Tensor(), o);
       }},
      {"lstm_recurrence weight_hh",
       [&] {
         lstm_recurrence(Tensor::ones({2, 1, 4}, DType::F32, kCuda), Tensor::ones({4, 1}), Tensor(), Tensor(), Tensor(),
                         Tensor(), false);
       }},
#if defined(SRU_WITH_CUDA)  // built with the CUDA backend only
      {"lstm_cudnn_layer",
       [&] {
         const Tensor w = Tensor::ones({4, 3}), u = Tensor::ones({4, 1}), b = Tensor::ones({4});
         lstm_cudnn_layer(Tensor::ones({2, 1, 3}, DType::F32, kCuda), Tensor(), Tensor(), {{w, u, b, b}}, {2});
       }},
#endif
      {"optimizer step",
       [&] {
         Tensor p = Tensor::ones({3}, DType::F32, kCuda).set_requires_grad(true);
         optim::Optimizer opt({{"p", p}}, {"adam"});
         p.set_grad(Tensor::ones({3}));
         opt.step(0.1);
       }},
      {"clip_grad_norm",
       [&] {
         Tensor p = Tensor::ones({3}, DType::F32, kCuda).set_requires_grad(true), q = Tensor::ones({3}).set_requires_grad(true);
         p.set_grad(Tensor::ones({3}, DType::F32, kCuda));
         q.set_grad(Tensor::ones({3}));
         optim::clip_grad_norm({{"p", p}, {"q", q}}, 1.0);
       }},
  };
  for (const auto& [name, call] : calls) {
    const std::string message = error_of(call);
    EXPECT_NE(message.find("cuda:0"), std::string::npos) << name << ": " << message;
    EXPECT_NE(message.find("cpu"), std::string::npos) << name << ": " << message;
  }
}

// Out-of-range indices found by kernels: no wait at the call, the CPU's message at the next host wait,
// a backward pass in between that writes no row out of range, and a clean log afterwards.
TEST(CudaHardening, KernelFoundErrorsSurfaceAtTheNextHostWait) {
  SKIP_WITHOUT_CUDA();
  const Tensor w = Tensor::uniform({50, 4}, -1, 1).to(kCuda).set_requires_grad(true);
  const Tensor bad = Tensor::from_vector(std::vector<int64_t>{1, 2, 50, 2}, {4}).to(kCuda);
  const Tensor weights = Tensor::uniform({4, 4}, -1, 1);
  HostWaitRecorder recorder;
  const Tensor out = embedding(w, bad);
  autograd::backward(sum(mul(out, weights.to(kCuda))));
  if (cuda::allocator_caches()) {  // else each free is a cudaFree
    EXPECT_EQ(recorder.counts().device_waits, 0u);
  }
  const std::string message = error_of([&] { read_scalars({sum(out)}); });
  EXPECT_NE(message.find("embedding: index 50 at position 2 is outside the vocabulary [0, 50)"), std::string::npos)
      << message;
  const std::vector<float> gw = w.grad().to_vector<float>(), wv = weights.to_vector<float>();
  for (int64_t j = 0; j < 4; ++j) {
    EXPECT_FLOAT_EQ(gw[1 * 4 + j], wv[0 * 4 + j]);
    EXPECT_FLOAT_EQ(gw[2 * 4 + j], wv[1 * 4 + j] + wv[3 * 4 + j]);
    EXPECT_FLOAT_EQ(gw[49 * 4 + j], 0.0f);
  }
  const Tensor logits = Tensor::zeros({3, 5}, DType::F32, kCuda);
  const Tensor targets = Tensor::from_vector(std::vector<int64_t>{0, -3, 4}, {3}).to(kCuda);
  const std::string ce = error_of([&] { read_scalars({cross_entropy(logits, targets)}); });
  EXPECT_NE(ce.find("cross_entropy: target -3 at row 1 is outside [0, 5)"), std::string::npos) << ce;
  EXPECT_EQ(error_of([&] { cuda::synchronize(0); }), "") << "the log was cleared";
}

// Copies to the device return without waiting and copy the source as it was at the call, also with
// more copies in flight than the staging buffers hold.
TEST(CudaHardening, CopiesToTheDeviceDoNotWait) {
  SKIP_WITHOUT_CUDA();
  Tensor host = Tensor::uniform({1 << 18}, -1, 1);  // 1 MiB
  const std::vector<float> original = host.to_vector<float>();
  HostWaitRecorder recorder;
  const Tensor dev = host.to(kCuda);
  host.fill_(-7.0);  // overwrite the source at once
  if (cuda::allocator_caches()) {  // else each free is a cudaFree
    EXPECT_EQ(recorder.counts().device_waits, 0u);
  }
  EXPECT_EQ(dev.to_vector<float>(), original);
  std::vector<Tensor> many;
  for (int i = 0; i < 400; ++i) many.push_back(Tensor::full({1 << 18}, i).to(kCuda));  // 400 MiB > the budget
  for (int i = 0; i < 400; i += 57) EXPECT_EQ(many[i].to_vector<float>(), std::vector<float>(1 << 18, float(i)));
}

// Scalars read later on a GPU (train.launch_ahead reads a step's loss and norm behind the next step's
// launch): the values are those the stream had reached at the queueing, although the tensors are written
// again after it; the copies wait for nothing on the host; several reads may be in flight at once, and
// one dropped unread (a step taken back) waits for nothing and its slot is reused once its copies landed.
TEST(CudaHardening, ScalarsReadLaterWaitOnlyForTheirPointInTheStream) {
  SKIP_WITHOUT_CUDA();
  Tensor loss = Tensor::full({}, 1.5, DType::F32, kCuda), norm = Tensor::full({}, 0.25, DType::F64, kCuda);
  double first_loss = 0, first_norm = 0, second_loss = 0, dropped = 0;
  HostWaitRecorder recorder;
  ScalarsReadLater first({{loss, &first_loss}, {norm, &first_norm}});
  loss.fill_(3.0);  // queued behind the first read's copies
  norm.fill_(4.0);
  ScalarsReadLater second({{loss, &second_loss}});
  { ScalarsReadLater unread({{norm, &dropped}}); }
  loss.fill_(5.0);
  if (cuda::allocator_caches()) EXPECT_EQ(recorder.counts().device_waits, 0u);  // (else each free is a cudaFree)
  second.wait();
  first.wait();
  EXPECT_EQ(first_loss, 1.5);
  EXPECT_EQ(first_norm, 0.25);
  EXPECT_EQ(second_loss, 3.0);
  EXPECT_EQ(dropped, 0.0);
  EXPECT_EQ(recorder.counts().value_reads, 2u);
  EXPECT_EQ(loss.item<float>(), 5.0f);  // (a full wait: the dropped read's copies have landed)
  const size_t slots = cuda::scalar_read_slots(0);
  EXPECT_GE(slots, 3u);
  std::vector<std::unique_ptr<ScalarsReadLater>> in_flight;
  for (size_t i = 0; i < slots; ++i) in_flight.push_back(std::make_unique<ScalarsReadLater>(std::vector<ScalarRead>{{loss, &dropped}}));
  EXPECT_EQ(cuda::scalar_read_slots(0), slots);
}

// Reserved device memory levels off over epochs of variable batch shapes (core/block_pool.h), near the
// largest step's size: caching one block per distinct size would hold the sum over all lengths (~600 MB).
TEST(CudaHardening, AllocatorReservedStaysFlatOverVariableShapes) {
  SKIP_WITHOUT_CUDA();
  if (!cuda::allocator_caches()) GTEST_SKIP() << "SRU_CUDA_NO_CACHING is set";
  cuda::empty_cache();
  const size_t base = cuda::allocator_stats(0).reserved;
  const std::vector<int64_t> widths{512, 1536, 512, 128};
  std::vector<size_t> reserved;
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (int64_t L = 5; L <= 60; ++L) {
      const int64_t len = epoch == 1 ? 65 - L : L;
      std::vector<Tensor> live;
      for (int64_t width : widths) live.push_back(Tensor::empty({len, 32, width}, DType::F32, kCuda));
    }
    reserved.push_back(cuda::allocator_stats(0).reserved - base);
  }
  EXPECT_EQ(reserved[1], reserved[0]);
  EXPECT_EQ(reserved[2], reserved[0]);
  const size_t largest_step = 60 * 32 * (512 + 1536 + 512 + 128) * 4;
  EXPECT_LE(reserved[0], 2 * largest_step);
}

TEST(CudaHardening, NanFillCoversReusedDeviceBlocks) {
  SKIP_WITHOUT_CUDA();
  const bool before = set_nan_fill(true);
  { Tensor a = Tensor::full({1000}, 1.0, DType::F32, kCuda); }
  const Tensor b = Tensor::empty({1000}, DType::F32, kCuda);
  for (float v : b.to_vector<float>()) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(Tensor::zeros({3}, DType::F32, kCuda).to_vector<float>(), std::vector<float>(3, 0.0f));
  set_nan_fill(before);
}

// The host waits of a training step on cuda:0, counted for real: one (the loss and norm read), eager
// and replayed from a CUDA graph. The step that captures the graph is the exception: it returns the
// shared pool's cached blocks to the driver first (train/step_graph.cpp), a cudaFree that waits, once.
TEST(CudaHardening, OneHostWaitPerTrainingStep) {
  SKIP_WITHOUT_CUDA();
  if (!cuda::allocator_caches()) GTEST_SKIP() << "SRU_CUDA_NO_CACHING is set: every free is a cudaFree";
  for (const std::string graphs : {"off", "auto"})
    for (const std::string type : {"sru", "lstm"}) {
      CharLmSteps steps(type, kCuda, graphs);
      for (int step = 0; step < 7; ++step) {
        const int64_t replays_before = steps.step().replayed_steps();
        const bool captures_next = graphs == "auto" && replays_before == 0;
        HostWaitRecorder recorder;
        steps.next();
        if (step < 2) continue;  // warm-up: first allocations, staging buffers, library set-up
        if (captures_next && steps.step().replayed_steps() > 0) continue;  // the capturing step
        std::string events;
        for (const std::string& e : recorder.events()) events += "\n  " + e;
        EXPECT_LE(recorder.counts().device_waits, 1u) << type << " " << graphs << " step " << step << events;
        EXPECT_EQ(recorder.counts().value_reads, 1u) << type << " " << graphs << " step " << step << events;
      }
      if (graphs == "auto" && type == "sru") EXPECT_GT(steps.step().replayed_steps(), 0) << "no step replayed";
    }
}

// Flat parameter buffers (nn/flat_parameters.h) move to a GPU and back whole: every parameter and its
// gradient place stay views of their group's buffers, the values unchanged. (Training through them on
// the GPU: every cuda test that trains with make_optimizer, e.g. the host-wait tests' steps.)
TEST(CudaHardening, FlatParametersMoveToTheGpuAndBackWhole) {
  SKIP_WITHOUT_CUDA();
  Generator gen(3);
  nn::LSTMOptions options;
  options.input_size = 4;
  options.hidden_size = 6;
  options.num_layers = 2;
  nn::LSTM model(options, gen);
  const auto flat = model.flatten_parameters();
  const std::vector<float> before = model.named_parameters().front().second.to_vector<float>();
  model.to(kCuda);
  for (const auto& [name, p] : model.named_parameters()) {
    const nn::FlatParameters::Member* m = flat->find(p);
    ASSERT_NE(m, nullptr) << name;
    EXPECT_TRUE(p.device().is_cuda()) << name;
    EXPECT_TRUE(p.shares_storage(flat->groups()[m->group].values)) << name;
    EXPECT_TRUE(Tensor(p.impl()->grad_home).shares_storage(flat->groups()[m->group].gradients)) << name;
  }
  EXPECT_EQ(model.named_parameters().front().second.to_vector<float>(), before);
  model.to(Device::cpu());
  EXPECT_EQ(model.named_parameters().front().second.to_vector<float>(), before);
  EXPECT_TRUE(model.named_parameters().front().second.shares_storage(flat->groups()[0].values));
}
