// CUDA backend tests (label `cuda`): device tensors and the caching allocator, and every op's CUDA
// kernel against its CPU twin on random data, forward and backward. Each test skips with the reason
// when no CUDA device is usable, so the suite stays green on machines without a GPU.
//
// Tolerances (|cuda - cpu| <= tol + tol * |cpu|): float64 1e-10 everywhere; float32 1e-5 for
// element-wise, row and reduction kernels (same math, FMA contraction and reduction order differ),
// 1e-4 for GEMMs (cuBLAS blocks the K sum differently from OpenBLAS) and for the SRU (and Embed-SRU) recurrences and
// everything composed with a GEMM (errors compound over L steps).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/cuda/device_info.h"
#include "core/cuda/runtime.h"
#include "core/host_sync.h"
#include "core/kernel_count.h"
#include "nn/flat_parameters.h"
#include "cuda_parity.h"
#include "nn/attention.h"
#include "nn/decoder.h"
#include "nn/embed_sru.h"
#include "nn/lstm.h"
#include "nn/sru.h"
#include "ops/embed_sru_recurrence.h"
#include "ops/lstm_recurrence.h"
#include "ops/sru_recurrence.h"
#include "optim/optimizer.h"
#include "train/ema.h"

using namespace sru;
using namespace sru::testing;

TEST(CudaTensor, CopiesFillsAndConverts) {
  SKIP_WITHOUT_CUDA();
  const Tensor host = Tensor::from_vector(std::vector<double>{1.5, -2, 3, 4.25, 0, 7}, {2, 3});
  const Tensor dev = host.to(kCuda);
  EXPECT_TRUE(dev.device().is_cuda());
  EXPECT_EQ(dev.to_vector<double>(), host.to_vector<double>());
  EXPECT_EQ(dev.to(DType::F64).to(DType::I64).to_vector<int64_t>(), (std::vector<int64_t>{1, -2, 3, 4, 0, 7}));
  Tensor z = Tensor::zeros({5}, DType::F32, kCuda);
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(5, 0.0f));
  z.fill_(2.5).mul_(2.0);
  z.add_(Tensor::ones({5}, DType::F32, kCuda), -1.0);
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(5, 4.0f));
  Tensor copy = dev.clone();
  EXPECT_FALSE(copy.shares_storage(dev));
  EXPECT_EQ(copy.narrow0(1, 1).to_vector<double>(), (std::vector<double>{4.25, 0, 7}));
  EXPECT_NE(error_of([&] { Tensor(z).add_(Tensor::ones({5})); }).find("move them to one device"), std::string::npos);
  EXPECT_NE(error_of([&] { add(dev, host); }).find("cuda:0 and cpu"), std::string::npos);
}

// 16-bit storage on the device: conversions from and to every dtype, fills and gathers give the CPU's
// bits (one SRU_HD conversion serves both), including ties, subnormals, overflow and NaN, from aligned
// starts (four elements a thread) and unaligned views.
TEST(CudaTensor, SixteenBitStorageConvertsAsOnTheCpu) {
  SKIP_WITHOUT_CUDA();
  const std::vector<float> xs = rounding_test_values(4099, 102);
  const Tensor x = Tensor::from_vector(xs, {static_cast<int64_t>(xs.size())});
  for (DType t : {DType::BF16, DType::F16}) {
    const Tensor cpu = x.to(t), gpu = x.to(kCuda).to(t);
    ASSERT_EQ(gpu.dtype(), t);
    const Tensor back = gpu.to(Device::cpu());
    EXPECT_EQ(std::memcmp(back.data_ptr(), cpu.data_ptr(), cpu.nbytes()), 0) << dtype_name(t) << " from f32";
    EXPECT_EQ(std::memcmp(x.to(DType::F64).to(kCuda).to(t).to(Device::cpu()).data_ptr(), x.to(DType::F64).to(t).data_ptr(),
                          cpu.nbytes()), 0) << dtype_name(t) << " from f64";
    // Back to float32 on the device: exact.
    const std::vector<float> widened = gpu.to(DType::F32).to_vector<float>(), want = cpu.to(DType::F32).to_vector<float>();
    for (size_t i = 0; i < want.size(); ++i)
      if (!std::isnan(want[i])) ASSERT_EQ(widened[i], want[i]) << dtype_name(t) << " element " << i;
    // A view one element past an aligned start: the conversion's element-at-a-time path (4,099 elements
    // from an aligned start take four a thread and a tail of three).
    const Tensor offset_cpu = x.narrow0(1, 4098).to(t), offset_gpu = x.to(kCuda).narrow0(1, 4098).to(t);
    EXPECT_EQ(std::memcmp(offset_gpu.to(Device::cpu()).data_ptr(), offset_cpu.data_ptr(), offset_cpu.nbytes()), 0)
        << dtype_name(t) << " from an unaligned f32 view";
    const std::vector<float> widened_view = gpu.narrow0(1, 4098).to(DType::F32).to_vector<float>();
    for (size_t i = 0; i < widened_view.size(); ++i)
      if (!std::isnan(want[i + 1])) ASSERT_EQ(widened_view[i], want[i + 1]) << dtype_name(t) << " unaligned, element " << i;
    EXPECT_EQ(Tensor::full({5}, 2.75, t, kCuda).to_vector<float>(), std::vector<float>(5, 2.75f)) << dtype_name(t);
    const Tensor idx = Tensor::from_vector(std::vector<int64_t>{3, 1, 3}, {3});  // finite values
    EXPECT_EQ(index_select(gpu, 0, idx.to(kCuda)).to(DType::F32).to_vector<float>(),
              index_select(cpu, 0, idx).to(DType::F32).to_vector<float>()) << dtype_name(t);
  }
}

// bf16 add_ (the engine's gradient sums): eight elements a thread where both tensors are 16-byte aligned,
// element by element otherwise and in the last partial group; float math rounded once, as on the CPU
// (within one bf16 step where the GPU's fused multiply-add rounds differently).
TEST(CudaTensor, Bf16AddScaledAlignedUnalignedAndTail) {
  SKIP_WITHOUT_CUDA();
  for (const int64_t n : {int64_t{4099}, int64_t{64}, int64_t{5}})
    for (const int64_t offset : {int64_t{0}, int64_t{1}}) {  // 1: a view 2 bytes past an aligned block
      SCOPED_TRACE("n " + std::to_string(n) + ", offset " + std::to_string(offset));
      Generator g1(90), g2(91);
      const Tensor a = Tensor::uniform({n + 1}, -4, 4, DType::F32, g1).to(DType::BF16);
      const Tensor b = Tensor::uniform({n + 1}, -4, 4, DType::F32, g2).to(DType::BF16);
      Tensor cpu = a.clone().narrow0(offset, n), gpu = a.to(kCuda).narrow0(offset, n);
      cpu.add_(b.narrow0(offset, n), -0.75);
      gpu.add_(b.to(kCuda).narrow0(offset, n), -0.75);
      const std::vector<float> got = gpu.to(DType::F32).to_vector<float>(), want = cpu.to(DType::F32).to_vector<float>();
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(got[i], want[i], std::abs(want[i]) / 128 + 1e-30) << "element " << i;
    }
}

TEST(CudaTensor, CachingAllocatorReusesFreedBlocks) {
  SKIP_WITHOUT_CUDA();
  if (!cuda::allocator_caches()) GTEST_SKIP() << "SRU_CUDA_NO_CACHING is set";
  cuda::empty_cache();  // no cached block of this size left by earlier tests in the same process
  const AllocatorStats before = cuda::allocator_stats(0);
  { Tensor a = Tensor::empty({1 << 20}, DType::F32, kCuda); }  // 4 MiB, back to the cache
  const AllocatorStats cached = cuda::allocator_stats(0);
  EXPECT_EQ(cached.allocated, before.allocated);
  EXPECT_GE(cached.reserved, before.reserved + (4u << 20));
  EXPECT_GE(cached.peak_allocated, before.allocated + (4u << 20));
  { Tensor b = Tensor::empty({1 << 20}, DType::F32, kCuda); }  // same size: no new device memory
  EXPECT_EQ(cuda::allocator_stats(0).reserved, cached.reserved);
  cuda::empty_cache();
  EXPECT_LT(cuda::allocator_stats(0).reserved, cached.reserved);
}

TEST(CudaParity, Elementwise) {
  SKIP_WITHOUT_CUDA();
  for (DType dt : {DType::F32, DType::F64}) {
    const double tol = dt == DType::F32 ? 1e-5 : 1e-10;
    const Tensor a = rand_leaf({4, 5, 6}, 1, dt), b = rand_leaf({4, 5, 6}, 2, dt, 0.5, 2.0), row = rand_leaf({6}, 3, dt);
    expect_parity(one([](const Inputs& x) { return x[0] + x[1]; }), {a, b}, tol);
    expect_parity(one([](const Inputs& x) { return x[0] - x[2]; }), {a, b, row}, tol);
    expect_parity(one([](const Inputs& x) { return x[2] * x[0]; }), {a, b, row}, tol);
    expect_parity(one([](const Inputs& x) { return x[0] / x[1]; }), {a, b}, tol);
    // A bias-like operand over many rows: its gradient is a column sum over 3000 rows (several chunks).
    expect_parity(one([](const Inputs& x) { return x[0] + x[1]; }), {rand_leaf({3000, 7}, 21, dt), rand_leaf({7}, 22, dt)},
                  tol);
    // ... and over 70 columns (three tiles of the finish's 32 columns, the last partial) and 4000 rows
    // (250 chunks: more than its 8 lanes, each adding many).
    expect_parity(one([](const Inputs& x) { return x[0] + x[1]; }),
                  {rand_leaf({4000, 70}, 23, dt), rand_leaf({70}, 24, dt)}, tol);
    expect_parity(one([](const Inputs& x) {
                    return exp(x[0]) + log(x[1]) + tanh(x[0]) + sigmoid(x[0] * 3.0) + relu(x[0]) - x[0] +
                           pow_scalar(x[1], 1.5) + (2.0 - x[0]) + 3.0 / x[1] + (x[0] + 0.5);
                  }),
                  {a, b}, tol);
  }
}

TEST(CudaParity, MatmulAndBmm) {
  SKIP_WITHOUT_CUDA();
  for (DType dt : {DType::F32, DType::F64}) {
    const double tol = dt == DType::F32 ? 1e-4 : 1e-10;
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const Tensor a = rand_leaf(ta ? Shape{33, 17} : Shape{17, 33}, 4, dt);
        const Tensor b = rand_leaf(tb ? Shape{9, 33} : Shape{33, 9}, 5, dt);
        expect_parity(one([=](const Inputs& x) { return matmul(x[0], x[1], ta, tb); }), {a, b}, tol);
        const Tensor ba = rand_leaf(ta ? Shape{3, 12, 7} : Shape{3, 7, 12}, 6, dt);
        const Tensor bb = rand_leaf(tb ? Shape{3, 5, 12} : Shape{3, 12, 5}, 7, dt);
        expect_parity(one([=](const Inputs& x) { return bmm(x[0], x[1], ta, tb); }), {ba, bb}, tol);
      }
    // (L, B, n) @ (n, m): leading dims folded into rows, as the SRU's input projection does.
    expect_parity(one([](const Inputs& x) { return matmul(x[0], x[1]); }), {rand_leaf({6, 4, 20}, 8, dt), rand_leaf({20, 24}, 9, dt)},
                  tol);
  }
}

TEST(CudaParity, Reductions) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = rand_leaf({7, 300, 5}, 10);
  expect_parity(one([](const Inputs& v) { return sum(v[0], 1); }), {x}, 1e-5);
  expect_parity(one([](const Inputs& v) { return mean(v[0], 2, true); }), {x}, 1e-5);
  expect_parity(one([](const Inputs& v) { return sum(v[0], 0); }), {x}, 1e-5);
  expect_parity(one([](const Inputs& v) { return mean(v[0]); }), {x}, 1e-5);
  expect_parity(one([](const Inputs& v) { return sum(v[0]); }), {rand_leaf({1000, 3}, 11, DType::F64)}, 1e-10);
}

TEST(CudaParity, SoftmaxAndCrossEntropy) {
  SKIP_WITHOUT_CUDA();
  for (DType dt : {DType::F32, DType::F64}) {
    const double tol = dt == DType::F32 ? 1e-5 : 1e-10;
    const Tensor x = rand_leaf({13, 300}, 12, dt, -5, 5);
    expect_parity(one([](const Inputs& v) { return softmax(v[0]); }), {x}, tol);
    expect_parity(one([](const Inputs& v) { return log_softmax(v[0]); }), {x}, tol);
    const Tensor target = Tensor::from_vector(std::vector<int64_t>{0, 5, 299, -100, 7, 7, 1, 2, 3, 4, 5, 6, 100}, {13});
    expect_parity(one([](const Inputs& v) { return cross_entropy(v[0], v[1]); }), {x, target}, tol);
    expect_parity(one([](const Inputs& v) { return cross_entropy(v[0], v[1], -100, Reduction::Sum); }),
                  {x, target.to(DType::I32)}, tol);
  }
  // Every launch shape of the float32 row kernels (ops/cuda/softmax.cu): a warp per row (C <= 1024) or
  // a block, 16-byte packs (C * 4 or C * 2 bytes a multiple of 16) or single elements, f32 and bf16 rows,
  // label smoothing with masked (-inf) classes; the rows offset by one element (a view) are unpacked.
  for (const int64_t C : {8, 301, 1000, 1029, 2056, 8003}) {
    SCOPED_TRACE("C " + std::to_string(C));
    const Tensor logits = rand_leaf({9, C}, 40 + C, DType::F32, -6, 6);
    std::vector<int64_t> t(9);
    for (int64_t r = 0; r < 9; ++r) t[r] = r == 4 ? -100 : (r * 7919) % C;
    const Tensor target = Tensor::from_vector(t, {9});
    expect_parity(one([](const Inputs& v) { return softmax(v[0]); }), {logits}, 1e-5);
    expect_parity(one([](const Inputs& v) { return log_softmax(v[0]); }), {logits}, 1e-5);
    expect_parity(one([](const Inputs& v) { return cross_entropy(v[0], v[1]); }), {logits, target}, 1e-5);
    expect_parity(one([](const Inputs& v) { return cross_entropy(v[0], v[1], -100, Reduction::Mean, 0.1); }),
                  {logits, target.to(DType::I32)}, 1e-5);
    // A view one element in: its base is 4 bytes off 16 (single-element reads; the forward only: a
    // no-grad view, and autograd's own gradients are fresh, aligned buffers).
    expect_parity(one([C](const Inputs& v) { return log_softmax(v[0].detach().view({-1}).narrow0(1, 8 * C).view({8, C})); }),
                  {logits}, 1e-5);
    std::vector<float> values = logits.to_vector<float>();
    for (int64_t r = 0; r < 9; ++r)
      for (int64_t c = 0; c < C; ++c)
        if (c != t[r] && (r * 31 + c * 17) % 5 == 0) values[r * C + c] = -std::numeric_limits<float>::infinity();
    const Tensor masked = Tensor::from_vector(values, {9, C}).set_requires_grad(true);
    expect_parity(one([](const Inputs& v) { return cross_entropy(v[0], v[1], -100, Reduction::Sum, 0.2); }),
                  {masked, target}, 1e-5);
    const Tensor half = logits.detach().to(DType::BF16);
    expect_parity(one([](const Inputs& v) { return log_softmax(v[0]); }), {half}, 1e-2);
    expect_parity(one([](const Inputs& v) { return cross_entropy(v[0], v[1], -100, Reduction::Mean, 0.1); }),
                  {half, target}, 1e-2);
  }
  // A NaN beside -inf in a row (a lane holding only NaN and -inf): NaN everywhere, as on the CPU, on
  // the warp path (C = 6) and the block path (C = 1030).
  for (const int64_t C : {6, 1030}) {
    std::vector<float> row(static_cast<size_t>(C), -std::numeric_limits<float>::infinity());
    row[0] = 3.0f;
    row[C - 1] = std::numeric_limits<float>::quiet_NaN();
    const Tensor x = Tensor::from_vector(row, {1, C});
    for (const Tensor& y : {softmax(x), softmax(x.to(kCuda)).to(Device::cpu())})
      for (const float v : y.to_vector<float>()) EXPECT_TRUE(std::isnan(v)) << "C " << C;
    const Tensor target = Tensor::from_vector(std::vector<int64_t>{0}, {1});
    EXPECT_TRUE(std::isnan(cross_entropy(x.to(kCuda), target.to(kCuda)).item<double>())) << "C " << C;
  }
  // Found by the kernel, reported at the next host wait (here the read of the loss).
  const Tensor bad = Tensor::from_vector(std::vector<int64_t>{1, 300}, {2});
  const std::string message =
      error_of([&] { read_scalars({cross_entropy(Tensor::zeros({2, 300}, DType::F32, kCuda), bad.to(kCuda))}); });
  EXPECT_NE(message.find("target 300 at row 1 is outside [0, 300)"), std::string::npos) << message;
}

TEST(CudaParity, Embedding) {
  SKIP_WITHOUT_CUDA();
  const Tensor w = rand_leaf({50, 16}, 13);
  const Tensor idx = Tensor::from_vector(std::vector<int64_t>{3, 0, 49, 3, 3, 7, 0, 12}, {2, 4});
  expect_parity(one([](const Inputs& v) { return embedding(v[0], v[1]); }), {w, idx}, 1e-5);
  expect_parity(one([](const Inputs& v) { return embedding(v[0], v[1], 0); }), {w, idx.to(DType::I32)}, 1e-5);
  // Many positions over few rows (long runs after sorting), with a padding row.
  std::vector<int64_t> many(5000);
  Generator gen(14);
  const std::vector<double> u = Tensor::uniform({5000}, 0, 50, DType::F64, gen).to_vector<double>();
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int64_t>(u[i]);
  expect_parity(one([](const Inputs& v) { return embedding(v[0], v[1], 7); }),
                {w, Tensor::from_vector(many, {100, 50})}, 1e-5);
  // One dominant row (a char-LM's space: one run of 2,000 of 3,000 positions, split over the backward
  // kernel's 8 lanes) and rows of 70 columns (three 32-column tiles, the last partial). Float32 sums of
  // 2,000 terms in (-1, 1) in another order differ by ~sqrt(2000) roundings of partial sums near
  // sqrt(2000) / sqrt(3) ~ 26 (4.4e-5 seen on an H200): its bound is 2e-4; float64 holds the same sums
  // to 1e-9, the check that the runs and lanes add every term once.
  std::vector<int64_t> skewed(3000);
  for (size_t i = 0; i < skewed.size(); ++i) skewed[i] = i % 3 == 2 ? static_cast<int64_t>(u[i]) : 5;
  for (const DType dtype : {DType::F32, DType::F64})
    expect_parity(one([](const Inputs& v) { return embedding(v[0], v[1], 7); }),
                  {rand_leaf({50, 70}, 15, dtype), Tensor::from_vector(skewed, {60, 50})},
                  dtype == DType::F32 ? 2e-4 : 1e-9);
  const Tensor bad = Tensor::from_vector(std::vector<int64_t>{1, 2, 50}, {3});
  const std::string message = error_of([&] { embedding(w.detach().to(kCuda), bad.to(kCuda)).to_vector<float>(); });
  EXPECT_NE(message.find("index 50 at position 2 is outside the vocabulary [0, 50)"), std::string::npos) << message;
}

TEST(CudaParity, DropoutMasksAreBitIdentical) {
  SKIP_WITHOUT_CUDA();
  for (double p : {0.1, 0.5, 0.9}) {
    Generator g1(77), g2(77);
    const Tensor m_cpu = dropout_mask({3, 1001}, p, DType::F32, g1);
    const Tensor m_gpu = dropout_mask({3, 1001}, p, DType::F32, g2, kCuda);
    EXPECT_EQ(m_gpu.to_vector<float>(), m_cpu.to_vector<float>()) << "p = " << p;
    Generator g3(79), g4(79);  // float64 masks, an element count that ends mid-block (4 words a block)
    EXPECT_EQ(dropout_mask({1, 1001}, p, DType::F64, g4, kCuda).to_vector<double>(),
              dropout_mask({1, 1001}, p, DType::F64, g3).to_vector<double>()) << "p = " << p;
  }
  // A data-parallel rank's rows (batch shard), time-major: rows 3..5 of a batch of 7.
  Generator g1(78), g2(78);
  g1.set_batch_shard({7, 3, 3});
  g2.set_batch_shard({7, 3, 3});
  const Tensor m_cpu = dropout_mask({5, 3, 333}, 0.4, DType::F32, g1, Device::cpu(), 1);
  const Tensor m_gpu = dropout_mask({5, 3, 333}, 0.4, DType::F32, g2, kCuda, 1);
  EXPECT_EQ(m_gpu.to_vector<float>(), m_cpu.to_vector<float>());
}

// dropout() draws its mask inside apply_dropout: forward and gradient bit-identical to the CPU twin's,
// without a shard (a thread per Philox block, an element count that ends mid-block) and with one.
TEST(CudaParity, DropoutDrawnInTheKernelIsBitIdentical) {
  SKIP_WITHOUT_CUDA();
  // 4,995 elements: whole Philox blocks of four in one access each and a tail of three; offset 1: the
  // input view one element past an aligned start, so the kernel takes its element-at-a-time path.
  for (const DType dtype : {DType::F32, DType::F64, DType::BF16})
    for (const int variant : {0, 1, 2}) {
      const bool shard = variant == 1;
      const int64_t offset = variant == 2 ? 1 : 0;
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (shard ? ", batch shard" : "") + (offset ? ", offset 1" : ""));
      const Tensor x = rand_leaf({5 * 3 * 333 + offset}, 80, DType::F64).detach().to(dtype);
      const Tensor g = rand_leaf({5, 3, 333}, 81, DType::F64).detach().to(dtype);
      std::vector<std::vector<double>> outputs, grads;
      for (const Device device : {Device::cpu(), kCuda}) {
        Generator gen(82);
        if (shard) gen.set_batch_shard({7, 3, 3});
        Tensor leaf = x.to(device);
        leaf.set_requires_grad(true);
        const Tensor input = reshape(slice(leaf, 0, offset, offset + 5 * 3 * 333), {5, 3, 333});
        const Tensor y = dropout(input, 0.4, true, gen, shard ? 1 : 0);
        autograd::backward({y}, {g.to(device)});
        outputs.push_back(y.to(DType::F64).to_vector<double>());
        grads.push_back(leaf.grad().to(DType::F64).to_vector<double>());
      }
      EXPECT_EQ(outputs[1], outputs[0]);
      EXPECT_EQ(grads[1], grads[0]);
    }
}

TEST(CudaParity, LayerNorm) {
  SKIP_WITHOUT_CUDA();
  for (DType dt : {DType::F32, DType::F64}) {
    const double tol = dt == DType::F32 ? 1e-5 : 1e-10;
    const Tensor x = rand_leaf({6, 5, 300}, 14, dt, -3, 3), w = rand_leaf({300}, 15, dt), b = rand_leaf({300}, 16, dt);
    expect_parity(one([](const Inputs& v) { return layer_norm(v[0], v[1], v[2]); }), {x, w, b}, tol);
    expect_parity(one([](const Inputs& v) { return layer_norm(v[0], Tensor(), Tensor()); }), {x}, tol);
  }
  // Every launch shape of the float32 kernels (ops/cuda/row_kernels.cuh): a warp per row or a block,
  // 16-byte packs or single elements, f32 and bf16 rows (float32 weight, bias and statistics), and each
  // number of packs a warp-per-row thread holds in registers (float32 P = 1, 2, 4, 8 at D = 8, 200, 512,
  // 1000; bf16 P = 1, 2, 4).
  for (const int64_t D : {8, 200, 301, 512, 1000, 1027, 2048}) {
    SCOPED_TRACE("D " + std::to_string(D));
    const Tensor x = rand_leaf({7, D}, 50 + D, DType::F32, -3, 3), w = rand_leaf({D}, 51), b = rand_leaf({D}, 52);
    expect_parity(one([](const Inputs& v) { return layer_norm(v[0], v[1], v[2]); }), {x, w, b}, 1e-5);
    expect_parity(one([](const Inputs& v) { return layer_norm(v[0], Tensor(), v[1]); }), {x, b}, 1e-5);
    expect_parity(one([](const Inputs& v) { return layer_norm(v[0], v[1], v[2]); }),
                  {x.detach().to(DType::BF16).set_requires_grad(true), w, b}, 2e-2);
  }
}

// Rows up to 512 elements (packed, a warp per row): dx and the block partials of dweight and dbias in one
// kernel, one finish (ops/cuda/layer_norm.cu, fused_backward). Past 512 x 8 rows the kernel's 512 blocks
// each take several rows a warp: 5,003 rows of 64, 96 and 512, f32 and bf16, with both parameters, the
// weight alone and the bias alone.
TEST(CudaParity, LayerNormParameterGradientsFusedOverManyRows) {
  SKIP_WITHOUT_CUDA();
  for (const int64_t D : {64, 96, 512}) {  // 96: lanes 24-31 hold no column of the row
    SCOPED_TRACE("D " + std::to_string(D));
    const Tensor x = rand_leaf({5003, D}, 60 + D, DType::F32, -3, 3), w = rand_leaf({D}, 61), b = rand_leaf({D}, 62);
    expect_parity(one([](const Inputs& v) { return layer_norm(v[0], v[1], v[2]); }), {x, w, b}, 1e-5);
    expect_parity(one([](const Inputs& v) { return layer_norm(v[0], v[1], Tensor()); }), {x, w}, 1e-5);
    expect_parity(one([](const Inputs& v) { return layer_norm(v[0], Tensor(), v[1]); }), {x, b}, 1e-5);
    const Tensor x16 = x.detach().to(DType::BF16).set_requires_grad(true);
    expect_parity(one([](const Inputs& v) { return layer_norm(v[0], v[1], v[2]); }), {x16, w, b}, 2e-2);
    expect_parity(one([](const Inputs& v) { return layer_norm(v[0], v[1], Tensor()); }), {x16, w}, 2e-2);
  }
}

TEST(CudaParity, ShapeOpsAndSelect) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = rand_leaf({4, 6, 5}, 17), y = rand_leaf({4, 2, 5}, 18);
  expect_parity(one([](const Inputs& v) { return slice(v[0], 1, 2, 5); }), {x}, 1e-6);
  expect_parity(one([](const Inputs& v) { return concat({v[0], v[1]}, 1); }), {x, y}, 1e-6);
  expect_parity(one([](const Inputs& v) { return transpose(v[0], 0, 2); }), {x}, 1e-6);
  expect_parity(one([](const Inputs& v) { return transpose(v[0], 0, 1); }), {rand_leaf({4, 6, 5}, 19, DType::F64)}, 1e-12);
  // Rows of C >= 8 words go to the warp-per-row kernel: a head split (L, B, H, dh) -> (B, L, H, dh)
  // with C = H dh = 120, a middle transpose with C = 40, and float64 rows of 9.
  expect_parity(one([](const Inputs& v) { return transpose(v[0], 0, 1); }), {rand_leaf({5, 7, 3, 40}, 21)}, 1e-6);
  expect_parity(one([](const Inputs& v) { return transpose(v[0], 1, 2); }), {rand_leaf({2, 5, 7, 40}, 22)}, 1e-6);
  expect_parity(one([](const Inputs& v) { return transpose(v[0], 0, 1); }), {rand_leaf({6, 4, 9}, 23, DType::F64)}, 1e-12);
  const Tensor cond = Tensor::from_vector(std::vector<int32_t>{1, 0, 0, 1, 1}, {5});
  expect_parity(one([](const Inputs& v) { return where(v[2], v[0], v[1]); }), {x, rand_leaf({4, 6, 5}, 20), cond}, 1e-6);
  expect_parity(one([](const Inputs& v) { return masked_fill(v[0], v[1], -3.5); }), {x, cond.to(DType::F32)}, 1e-6);
}

// The fused SRU recurrence over the same option grid as the CPU tests: k = 3 / 4, uni- and
// bidirectional, skip term on/off, tanh, dropout mask, padding, initial state.
TEST(CudaParity, SruRecurrenceOptionGrid) {
  SKIP_WITHOUT_CUDA();
  const int64_t L = 9, B = 5, d = 7;
  uint64_t seed = 100;
  for (DType dt : {DType::F32, DType::F64})
    for (int k : {3, 4})
      for (bool bidir : {false, true})
        for (bool skip : {true, false})
          for (bool use_tanh : {false, true})
            for (bool masks : {false, true}) {
              const double tol = dt == DType::F32 ? 1e-4 : 1e-10;
              SruRecurrenceOptions o;
              o.hidden_size = d;
              o.bidirectional = bidir;
              o.k = k;
              o.has_skip_term = skip;
              o.use_tanh = use_tanh;
              o.scale_x = 0.75;
              const int64_t out = (bidir ? 2 : 1) * d;
              const Tensor U = rand_leaf({L, B, out * k}, ++seed, dt, -2, 2), x = rand_leaf({L, B, out}, ++seed, dt);
              const Tensor wc = rand_leaf({2 * out}, ++seed, dt), bias = rand_leaf({2 * out}, ++seed, dt);
              const auto [c0, mask_c, mask_pad] = recurrence_extras(masks, L, B, out, dt, seed);
              const std::string what = std::string(dtype_name(dt)) + " k=" + std::to_string(k) + (bidir ? " bidir" : "") +
                                       (skip ? " skip" : "") + (use_tanh ? " tanh" : "") + (masks ? " masks" : "");
              SCOPED_TRACE(what);
              expect_parity(
                  [o](const Inputs& v) {
                    auto [h, c] = sru_recurrence(v[0], v[1], v[2], v[3], v[4], v[5], v[6], o);
                    return std::vector<Tensor>{h, c};
                  },
                  {U, x, wc, bias, c0, mask_c, mask_pad}, tol);
            }
}

// A recurrence with bf16 I/O: bf16 U, x and grad h, float32 parameters and, with `extras`, c0, a
// dropout mask and padding, all on the host; the seeds follow from seed_base and the options.
struct Bf16RecurrenceCase {
  SruRecurrenceOptions o;
  Tensor U, x, gh, w, b;
  RecurrenceExtras e;
};

Bf16RecurrenceCase bf16_recurrence_case(int64_t L, int64_t B, int64_t d, int k, bool bidir, bool extras,
                                        uint64_t seed_base) {
  Bf16RecurrenceCase c;
  c.o.hidden_size = d;
  c.o.bidirectional = bidir;
  c.o.k = k;
  c.o.scale_x = 0.8;
  const int64_t out = (bidir ? 2 : 1) * d;
  uint64_t seed = seed_base + k + (bidir ? 10 : 0) + (extras ? 20 : 0);
  auto bf16_of = [&](Shape s) { return rand_leaf(s, ++seed).detach().to(DType::BF16); };
  c.U = bf16_of({L, B, out * k});
  c.x = bf16_of({L, B, out});
  c.gh = bf16_of({L, B, out});
  c.w = rand_leaf({2 * out}, ++seed).detach();
  c.b = rand_leaf({2 * out}, ++seed).detach();
  c.e = recurrence_extras(extras, L, B, out, DType::F32, seed);
  return c;
}

// The case's outputs and gradients, brought back to the host in their own dtypes (grad x with k = 3,
// grad c0 with c0).
struct RecurrenceResults {
  Tensor h, c, gU, gx, gw, gb, gc0;
};

// Forward and backward of the case on dev, with U as given: moved to dev, or used in place (a view
// keeps its offset) when it is there already.
RecurrenceResults run_bf16_recurrence(const Bf16RecurrenceCase& r, const Tensor& U, Device dev) {
  auto leaf = [&](const Tensor& t) { return t.defined() ? t.to(dev).clone().set_requires_grad(true) : Tensor(); };
  auto plain = [&](const Tensor& t) { return t.defined() ? t.to(dev) : Tensor(); };
  Tensor Ul = U.to(dev).detach().set_requires_grad(true), xl = leaf(r.x), wl = leaf(r.w), bl = leaf(r.b);
  Tensor c0l = leaf(r.e.c0.defined() ? r.e.c0.detach() : Tensor());
  auto [h, c] = sru_recurrence(Ul, xl, wl, bl, c0l, plain(r.e.mask_c), plain(r.e.mask_pad), r.o);
  autograd::backward(h, r.gh.to(dev));
  auto host = [](const Tensor& t) { return t.defined() ? t.to(Device::cpu()) : Tensor(); };
  return {host(h), host(c), host(Ul.grad()), r.o.k == 3 ? host(xl.grad()) : Tensor(), host(wl.grad()),
          host(bl.grad()), c0l.defined() ? host(c0l.grad()) : Tensor()};
}

// The recurrence with bf16 I/O (bf16 U, x, h and their gradients; float32 state and parameters)
// against its CPU twin, which runs the float kernels between the same roundings: outputs within one
// bf16 step where a float32 difference crosses a rounding boundary, float32 outputs as at float32.
// L 300 and d 1024 (B 4) put the GPU kernel's chunked loads and several blocks to work. An even d runs
// the kernels that take two columns a thread (ops/sru_recurrence_threads.h; L 21 ends both of their chunk
// sizes part-way), an odd d the one-column kernels.
TEST(CudaParity, SruRecurrenceBf16Io) {
  SKIP_WITHOUT_CUDA();
  for (const auto& [L, B, d] : std::vector<std::array<int64_t, 3>>{{9, 5, 7}, {21, 3, 8}, {300, 4, 1024}})
    for (int k : {3, 4})
      for (bool bidir : {false, true})
        for (bool extras : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "L " << L << " d " << d << " k " << k << (bidir ? " bidir" : "")
                                            << (extras ? " with c0, mask, padding" : ""));
          const Bf16RecurrenceCase r = bf16_recurrence_case(L, B, d, k, bidir, extras, 300);
          const RecurrenceResults cpu = run_bf16_recurrence(r, r.U, Device::cpu()), gpu = run_bf16_recurrence(r, r.U, kCuda);
          auto near = [](const Tensor& a, const Tensor& b, double rel, double abs) {
            return tensors_near(a.to(DType::F64), b.to(DType::F64), rel, abs);
          };
          EXPECT_TRUE(near(gpu.h, cpu.h, 1e-5, 1.0 / 128)) << "h";
          EXPECT_TRUE(near(gpu.gU, cpu.gU, 1e-5, 1.0 / 128)) << "grad U";
          if (k == 3) EXPECT_TRUE(near(gpu.gx, cpu.gx, 1e-5, 1.0 / 128)) << "grad x";
          EXPECT_TRUE(near(gpu.c, cpu.c, 1e-4, 1e-4)) << "c";
          EXPECT_TRUE(near(gpu.gw, cpu.gw, 1e-3, 1e-3)) << "grad weight_c";
          EXPECT_TRUE(near(gpu.gb, cpu.gb, 1e-3, 1e-3)) << "grad bias";
          if (extras) EXPECT_TRUE(near(gpu.gc0, cpu.gc0, 1e-4, 1e-4)) << "grad c0";
        }
}

// The bf16 kernels that take two columns a thread (ops/sru_recurrence_threads.h) against the one-column
// kernels (set_sru_column_pairs(false)) on the same card: the same step code on the same values, so the
// same bits in every output. A U whose data starts 2 bytes into its storage cannot take 4-byte words:
// the launcher must fall back to the one-column kernels, again with the same bits.
TEST(CudaParity, SruRecurrenceColumnPairsEqualTheOneColumnKernels) {
  SKIP_WITHOUT_CUDA();
  struct Restore {
    ~Restore() { set_sru_column_pairs(true); }
  } restore;
  for (int k : {3, 4})
    for (bool bidir : {false, true})
      for (bool extras : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "k " << k << (bidir ? " bidir" : "") << (extras ? " with c0, mask, padding" : ""));
        const Bf16RecurrenceCase r = bf16_recurrence_case(21, 3, 8, k, bidir, extras, 600);
        const Tensor U = r.U.to(kCuda);
        // The same values one element into a larger buffer: a view 2 bytes past 4-byte alignment.
        Tensor shifted_storage = Tensor::empty({U.numel() + 1}, DType::BF16, kCuda);
        Tensor U_shifted = shifted_storage.narrow0(1, U.numel()).view(U.shape());
        U_shifted.copy_(U);
        auto run = [&](const Tensor& U_in, bool pairs) {
          set_sru_column_pairs(pairs);
          return run_bf16_recurrence(r, U_in, kCuda);
        };
        const RecurrenceResults one_column = run(U, false), pairs = run(U, true), fallback = run(U_shifted, true);
        auto same_bits = [](const Tensor& a, const Tensor& b) {
          return a.defined() == b.defined() && (!a.defined() || std::memcmp(a.data_ptr(), b.data_ptr(), b.nbytes()) == 0);
        };
        const std::pair<const char*, Tensor RecurrenceResults::*> outputs[] = {
            {"h", &RecurrenceResults::h},   {"c", &RecurrenceResults::c},   {"grad U", &RecurrenceResults::gU},
            {"grad x", &RecurrenceResults::gx}, {"grad weight_c", &RecurrenceResults::gw},
            {"grad bias", &RecurrenceResults::gb}, {"grad c0", &RecurrenceResults::gc0}};
        for (const auto& [name, field] : outputs) {
          EXPECT_TRUE(same_bits(pairs.*field, one_column.*field)) << name << ", pairs";
          EXPECT_TRUE(same_bits(fallback.*field, one_column.*field)) << name << ", misaligned U";
        }
      }
}

// The dropout mask on c drawn by the CUDA kernels (SruRecurrenceOptions::mask_c_draw, a thread per
// column computing its Philox value) against the CPU twin, which fills the mask first: the same mask
// to the bit, so the results agree as the filled-mask parity above does (f32 and bf16 I/O, a shard).
TEST(CudaParity, SruRecurrenceDrawsItsDropoutMask) {
  SKIP_WITHOUT_CUDA();
  const int64_t L = 7, B = 6;
  for (const int64_t d : {33, 34})  // bf16 I/O: the one-column kernels, then the column pairs
    for (const bool bf16 : {false, true})
      for (const bool shard : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "d " << d << (bf16 ? " bf16 I/O" : " f32") << (shard ? " shard" : ""));
        SruRecurrenceOptions o;
        o.hidden_size = d;
        o.bidirectional = true;
        const int64_t out = 2 * d;
        Generator gen(23);
        if (shard) gen.set_batch_shard({2 * B, 0, B});
        o.mask_c_draw = draw_dropout_mask({B, out}, 0.25, gen);
        uint64_t seed = 900;
        auto io = [&](Shape s) { const Tensor t = rand_leaf(s, ++seed).detach(); return bf16 ? t.to(DType::BF16) : t; };
        const Tensor U = io({L, B, 3 * out}), x = io({L, B, out}), gh = io({L, B, out});
        const Tensor w = rand_leaf({2 * out}, ++seed).detach(), b = rand_leaf({2 * out}, ++seed).detach();
        auto run = [&](Device dev) {
          Tensor Ul = U.to(dev).clone().set_requires_grad(true), wl = w.to(dev).clone().set_requires_grad(true);
          Tensor bl = b.to(dev).clone().set_requires_grad(true);
          auto [h, c] = sru_recurrence(Ul, x.to(dev), wl, bl, Tensor(), Tensor(), Tensor(), o);
          autograd::backward(h, gh.to(dev));
          auto host = [](const Tensor& t) { return t.to(Device::cpu()).to(DType::F64); };
          return std::vector<Tensor>{host(h), host(c), host(Ul.grad()), host(wl.grad()), host(bl.grad())};
        };
        const std::vector<Tensor> cpu = run(Device::cpu()), gpu = run(kCuda);
        const double tol = bf16 ? 1.0 / 128 : 1e-4;
        for (size_t i = 0; i < cpu.size(); ++i) EXPECT_TRUE(tensors_near(gpu[i], cpu[i], 1e-3, tol)) << "output " << i;
      }
}

// Three optimiser steps with gradient clipping, for every optimiser, on the CPU and on cuda:0.
TEST(CudaParity, OptimizerStepsAndGradientClipping) {
  SKIP_WITHOUT_CUDA();
  for (const std::string kind : {"sgd", "adam", "adamw", "adamax", "radam"}) {
    SCOPED_TRACE(kind);
    optim::OptimizerOptions o;
    o.kind = kind;
    o.momentum = kind == "sgd" ? 0.9 : 0.0;
    o.weight_decay = 0.01;
    const Tensor init = rand_leaf({70000}, 31).detach();  // more than one clipping block (65536)
    const Tensor init_b = rand_leaf({3, 5}, 32, DType::F64).detach();
    nn::NamedTensors cpu_params{{"w", init.clone().set_requires_grad(true)}, {"b", init_b.clone().set_requires_grad(true)}};
    nn::NamedTensors gpu_params{{"w", init.to(kCuda).set_requires_grad(true)}, {"b", init_b.to(kCuda).set_requires_grad(true)}};
    optim::Optimizer cpu_opt(cpu_params, o), gpu_opt(gpu_params, o);
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < cpu_params.size(); ++i) {
        Generator gen(40 + 10 * step + i);
        const Tensor g = Tensor::uniform(cpu_params[i].second.shape(), -1, 1, cpu_params[i].second.dtype(), gen);
        cpu_params[i].second.set_grad(g);
        gpu_params[i].second.set_grad(g.to(kCuda));
      }
      const double norm_cpu = optim::clip_grad_norm(cpu_params, 5.0), norm_gpu = optim::clip_grad_norm(gpu_params, 5.0);
      EXPECT_NEAR(norm_gpu, norm_cpu, 1e-9 * norm_cpu);
      cpu_opt.step(0.01);
      gpu_opt.step(0.01);
      for (size_t i = 0; i < cpu_params.size(); ++i)
        EXPECT_TRUE(tensors_near(gpu_params[i].second, cpu_params[i].second, 1e-6, 1e-6)) << "step " << step << " " << i;
    }
    const nn::NamedTensors cpu_state = cpu_opt.state(), gpu_state = gpu_opt.state();
    for (size_t i = 0; i < cpu_state.size(); ++i)
      EXPECT_TRUE(tensors_near(gpu_state[i].second, cpu_state[i].second, 1e-6, 1e-6)) << cpu_state[i].first;
  }
}

// The training step's update on cuda:0 against the CPU's: the clip factor folded into the multi-tensor
// update, over 100 parameters (three launches of at most 48 tensors, the table's binary search across
// tensors of one, several and no chunks) and one float64 group.
TEST(CudaParity, MultiTensorUpdateWithTheClipFactorOverManyParameters) {
  SKIP_WITHOUT_CUDA();
  for (const std::string kind : {"sgd", "adam", "adamax", "radamw"}) {
    SCOPED_TRACE(kind);
    optim::OptimizerOptions o;
    o.kind = kind;
    o.momentum = kind == "sgd" ? 0.9 : 0.0;
    o.weight_decay = 0.01;
    nn::NamedTensors cpu_params, gpu_params;
    for (int i = 0; i < 101; ++i) {
      const int64_t n = i == 7 ? 0 : i == 40 ? 9000 : i == 41 ? 70000 : 1 + 37 * (i % 5);
      const Tensor init = rand_leaf({n}, 100 + i, i == 100 ? DType::F64 : DType::F32).detach();
      cpu_params.emplace_back("p" + std::to_string(i), init.clone().set_requires_grad(true));
      gpu_params.emplace_back("p" + std::to_string(i), init.to(kCuda).set_requires_grad(true));
    }
    optim::Optimizer cpu_opt(cpu_params, o), gpu_opt(gpu_params, o);
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < cpu_params.size(); ++i) {
        Generator gen(500 + 1000 * step + i);
        const Tensor g = Tensor::uniform(cpu_params[i].second.shape(), -1, 1, cpu_params[i].second.dtype(), gen);
        cpu_params[i].second.set_grad(g);
        gpu_params[i].second.set_grad(g.to(kCuda));
      }
      const double max_norm = step == 1 ? 1e9 : 3.0;
      const Tensor cpu_clip = optim::grad_norm_and_clip_factor(cpu_params, max_norm);
      const Tensor gpu_clip = optim::grad_norm_and_clip_factor(gpu_params, max_norm);
      EXPECT_TRUE(tensors_near(gpu_clip.to(Device::cpu()), cpu_clip, 0, 1e-12)) << "step " << step;
      cpu_opt.step(0.01, cpu_clip);
      gpu_opt.step(0.01, gpu_clip);
      for (size_t i = 0; i < cpu_params.size(); ++i)
        ASSERT_TRUE(tensors_near(gpu_params[i].second, cpu_params[i].second, 1e-6, 1e-6)) << "step " << step << " " << i;
    }
  }
}

namespace {

// 101 parameters of many sizes (one empty, two over a CUDA block's piece, one over a norm block), every
// third a "bias", for a flat layout.
struct ManyParameters : nn::Module {
  ManyParameters() {
    for (int i = 0; i < 101; ++i) {
      const int64_t n = i == 7 ? 0 : i == 40 ? 9000 : i == 41 ? 70000 : 1 + 37 * (i % 5);
      register_parameter("p" + std::to_string(i) + (i % 3 == 0 ? ".bias" : ".weight"), rand_leaf({n}, 100 + i).detach());
    }
  }
};

// Gives every parameter of `model` the gradient drawn for step `step`, written into its flat place.
void gradients_in_place(ManyParameters& model, int step) {
  int i = 0;
  for (auto& [name, p] : model.named_parameters()) {
    Generator gen(500 + 1000 * step + i++);
    Tensor place(p.impl()->grad_home);
    place.copy_(Tensor::uniform(p.shape(), -1, 1, p.dtype(), gen));
    p.set_grad(place);
  }
}

}  // namespace

// The whole-buffer update (one launch through the segment table, weight-decay exclusions in its rows)
// and the one-launch norm over a flat gradient buffer against their CPU twins, for every optimiser.
TEST(CudaParity, WholeBufferUpdateAndNormThroughTheSegmentTable) {
  SKIP_WITHOUT_CUDA();
  for (const std::string kind : {"sgd", "adam", "adamw", "adamax", "radam", "radamw"}) {
    SCOPED_TRACE(kind);
    const optim::OptimizerOptions o = options_with_decay(kind, 0.05, {"bias"});
    ManyParameters cpu_model, gpu_model;
    gpu_model.to(kCuda);
    const auto cpu_flat = cpu_model.flatten_parameters(), gpu_flat = gpu_model.flatten_parameters();
    optim::Optimizer cpu_opt(cpu_model.named_parameters(), o, cpu_flat), gpu_opt(gpu_model.named_parameters(), o, gpu_flat);
    for (int step = 0; step < 3; ++step) {
      gradients_in_place(cpu_model, step);
      gradients_in_place(gpu_model, step);
      const double max_norm = step == 1 ? 1e9 : 3.0;
      const Tensor cpu_clip = cpu_opt.grad_norm_and_clip_factor(max_norm);
      const uint64_t before = kernel_dispatches();
      const Tensor gpu_clip = gpu_opt.grad_norm_and_clip_factor(max_norm);
      EXPECT_EQ(kernel_dispatches() - before, 2u) << "one reduction over the buffer and the finish";
      EXPECT_TRUE(tensors_near(gpu_clip.to(Device::cpu()), cpu_clip, 0, 1e-12)) << "step " << step;
      cpu_opt.step(0.01, cpu_clip);
      gpu_opt.step(0.01, gpu_clip);
      EXPECT_EQ(gpu_opt.whole_buffer_updates(), 1);
      const auto cpu_params = cpu_model.named_parameters(), gpu_params = gpu_model.named_parameters();
      for (size_t i = 0; i < cpu_params.size(); ++i)
        ASSERT_TRUE(tensors_near(gpu_params[i].second, cpu_params[i].second, 1e-6, 1e-6)) << "step " << step << " " << i;
      // The padding between members is left alone: zero.
      const std::vector<float> values = gpu_flat->groups()[0].values.to(Device::cpu()).to_vector<float>();
      std::vector<bool> member(values.size(), false);
      for (const nn::FlatParameters::Member& m : gpu_flat->members())
        for (int64_t e = 0; e < m.parameter.numel(); ++e) member[static_cast<size_t>(m.offset + e)] = true;
      for (size_t e = 0; e < values.size(); ++e)
        if (!member[e]) ASSERT_EQ(values[e], 0.0f) << "padding element " << e;
    }
    // A non-finite step, decided on the device: a NaN gradient, or a finite one with an infinite loss,
    // makes the factor NaN and both update kernels (whole buffer and per tensor) change nothing.
    const std::vector<float> before = gpu_flat->groups()[0].values.to(Device::cpu()).to_vector<float>();
    gradients_in_place(gpu_model, 7);
    const Tensor inf_loss = gpu_opt.grad_norm_and_clip_factor(3.0, 1.0, Tensor::full({}, INFINITY, DType::F32, kCuda));
    EXPECT_TRUE(std::isnan(inf_loss.to(Device::cpu()).to_vector<double>()[1]));
    gpu_opt.step(0.01, inf_loss);
    Tensor(gpu_model.named_parameters()[40].second.grad()).fill_(std::nan(""));
    const Tensor nan_norm = gpu_opt.grad_norm_and_clip_factor(3.0);
    EXPECT_TRUE(std::isnan(nan_norm.to(Device::cpu()).to_vector<double>()[1]));
    gpu_opt.step(0.01, nan_norm);
    EXPECT_EQ(gpu_flat->groups()[0].values.to(Device::cpu()).to_vector<float>(), before);
    // (Named to match the options' weight-decay exclusion, which must name some parameter.)
    nn::NamedTensors loose{{"loose.bias", rand_leaf({5000}, 3).detach().to(kCuda).set_requires_grad(true)}};
    const Tensor loose_before = loose[0].second.clone();
    optim::Optimizer per_tensor(loose, o);
    loose[0].second.set_grad(Tensor::full({5000}, std::nan(""), DType::F32, kCuda));
    per_tensor.step(0.01, optim::grad_norm_and_clip_factor(loose, 3.0));
    EXPECT_TRUE(tensors_near(loose[0].second, loose_before, 0, 0));
  }
}

// The moving average of the weights (train.ema_decay) kept on cuda:0 against the CPU's: updates before
// and after the start step, the exchange into the parameters and back.
TEST(CudaParity, WeightEmaOnDevice) {
  SKIP_WITHOUT_CUDA();
  const Tensor init = rand_leaf({70000}, 33).detach();
  nn::NamedTensors cpu_params{{"w", init.clone()}}, gpu_params{{"w", init.to(kCuda)}};
  train::WeightEma cpu_ema(cpu_params, 0.9, 2), gpu_ema(gpu_params, 0.9, 2);
  for (int64_t step = 1; step <= 5; ++step) {
    Generator gen(50 + step);
    const Tensor w = Tensor::uniform(init.shape(), -1, 1, DType::F32, gen);
    cpu_params[0].second.copy_(w);
    gpu_params[0].second.copy_(w);
    cpu_ema.update(step);
    gpu_ema.update(step);
  }
  {
    const train::WeightEma::InModel a(&cpu_ema), b(&gpu_ema);
    EXPECT_TRUE(gpu_params[0].second.device().is_cuda());
    EXPECT_TRUE(tensors_near(gpu_params[0].second, cpu_params[0].second, 1e-6, 1e-6));
    EXPECT_TRUE(tensors_near(gpu_ema.raw_weights()[0].second, cpu_ema.raw_weights()[0].second, 0, 0));
  }
  EXPECT_TRUE(tensors_near(gpu_params[0].second, cpu_params[0].second, 0, 0));
}

// The cuDNN LSTM against the CPU LSTM: 2 layers, both directions, dropout between layers (same
// masks), initial states, padding at the end of sequences; outputs and all gradients.
// The helper itself, on the CPU (no device needed): both copies draw the same dropout between layers
// from generators that live as long as the pair (on an H200, 2026-11-28, generators local to
// lstm_pair left the modules a dangling pointer: garbage batch shards in the dropout's check).
TEST(CudaParityHelpers, LstmPairOwnsTheGeneratorsItsModulesDrawDropoutFrom) {
  nn::LSTMOptions o;
  o.input_size = 3;
  o.hidden_size = 4;
  o.num_layers = 3;
  o.dropout = 0.5;
  const LstmPair m = lstm_pair(o, 11, Device::cpu());
  const Tensor x = rand_leaf({6, 2, 3}, 12);
  const uint64_t before = m.cpu_gen->offset();
  const Tensor a = m.cpu->forward(x).output, b = m.gpu->forward(x).output;
  EXPECT_GT(m.cpu_gen->offset(), before) << "no dropout was drawn";
  EXPECT_EQ(m.cpu_gen->offset(), m.gpu_gen->offset());
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
}

namespace {

// nn::LSTM (6 inputs, 5 units a direction) on cuda:0 against the CPU's: outputs, states and every
// gradient, from initial states, with padding at the end of sequences (lengths 7, 6, 5, 4).
LstmPair expect_cudnn_lstm_parity(DType dt, bool bidir, int64_t layers, double dropout, uint64_t seed) {
  const double tol = dt == DType::F32 ? 1e-4 : 1e-10;
  nn::LSTMOptions o;
  o.input_size = 6;
  o.hidden_size = 5;
  o.num_layers = layers;
  o.dropout = dropout;
  o.bidirectional = bidir;
  o.dtype = dt;
  LstmPair m = lstm_pair(o, seed);
  const int64_t L = 7, B = 4, out = (bidir ? 2 : 1) * 5;
  const Tensor x = rand_leaf({L, B, 6}, seed + 43, dt), h0 = rand_leaf({layers, B, out}, seed + 44, dt),
               c0 = rand_leaf({layers, B, out}, seed + 45, dt);
  expect_parity(lstm_forward(m), {x, h0, c0, padding_at_end(L, B)}, tol);
  expect_same_parameters_and_grads(*m.cpu, *m.gpu, tol);
  return m;
}

}  // namespace

TEST(CudaParity, CudnnLstmMatchesCpuLstm) {
  SKIP_WITHOUT_CUDA();
  for (DType dt : {DType::F32, DType::F64})
    for (bool bidir : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (bidir ? " bidirectional" : ""));
      expect_cudnn_lstm_parity(dt, bidir, 2, 0.3, 7);
    }
}

// The whole stack in one cuDNN call where no dropout goes between the layers (dropout 0 in training,
// any dropout in evaluation) against the CPU LSTM: 3 layers, both directions, initial states, padding
// at the end of sequences, float32 and float64; outputs and all gradients; one cuDNN forward call a
// pass (the host profile's marks), where dropout in training keeps one per layer.
TEST(CudaParity, CudnnLstmStackInOneCallMatchesCpuLstm) {
  SKIP_WITHOUT_CUDA();
  const auto cudnn_forward_calls = [](const std::function<void()>& run) {
    start_host_profile();
    run();
    int64_t calls = 0;
    for (const HostProfileEntry& e : stop_host_profile())
      if (e.name.rfind("lstm_cudnn_forward (", 0) == 0) calls += static_cast<int64_t>(e.marks);
    return calls;
  };
  for (DType dt : {DType::F32, DType::F64})
    for (bool bidir : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (bidir ? " bidirectional" : ""));
      const double tol = dt == DType::F32 ? 1e-4 : 1e-10;
      const LstmPair m = expect_cudnn_lstm_parity(dt, bidir, 3, 0.0, 17);
      const Tensor x = rand_leaf({7, 4, 6}, 60, dt).detach(), xg = x.to(kCuda);
      EXPECT_EQ(cudnn_forward_calls([&] { m.gpu->forward(xg); }), 1);
      // Evaluation with dropout set: one call, the CPU's eval outputs.
      nn::LSTMOptions with_dropout = m.cpu->options;
      with_dropout.dropout = 0.4;
      const LstmPair e = lstm_pair(with_dropout, 18);
      e.cpu->train(false);
      e.gpu->train(false);
      {
        autograd::NoGradGuard no_grad;
        const nn::RecurrentOutput a = e.cpu->forward(x), b = e.gpu->forward(xg);
        EXPECT_TRUE(tensors_near(b.output.to(Device::cpu()), a.output, tol, tol));
        EXPECT_TRUE(tensors_near(b.h.to(Device::cpu()), a.h, tol, tol));
        EXPECT_TRUE(tensors_near(b.c.to(Device::cpu()), a.c, tol, tol));
        EXPECT_EQ(cudnn_forward_calls([&] { e.gpu->forward(xg); }), 1);
      }
      e.gpu->train(true);
      EXPECT_EQ(cudnn_forward_calls([&] { e.gpu->forward(xg); }), 3) << "dropout between layers: one call per layer";
    }
}

// copy_pieces: unbind's backward with rows nothing used (their zeros written by the kernel, not
// filled by the engine) and a concatenation of 60 pieces (two launches of at most 32), also along a
// middle axis; bf16 too (2-byte words).
TEST(CudaParity, ConcatAndUnbindOfManyPieces) {
  SKIP_WITHOUT_CUDA();
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    expect_parity(
        [](const Inputs& v) {
          const std::vector<Tensor> rows = unbind(v[0]);  // 70 rows of (3, 2)
          std::vector<Tensor> kept;
          for (size_t i = 0; i < rows.size(); ++i)
            if (i % 7 != 0) kept.push_back(rows[i]);  // 60 pieces; rows 0, 7, ... get no gradient
          return std::vector<Tensor>{concat(kept, 0), concat({v[1], v[1], v[1]}, 1)};
        },
        {rand_leaf({70, 3, 2}, 120, dt), rand_leaf({4, 5, 3}, 121, dt)}, 0);
  }
}

// The fused LSTM recurrence op (CUDA twin) against its CPU kernels: both directions, with and without
// bias and initial state, padding at the start, middle and end of sequences, h exact and rounded to
// bf16 values; outputs and gradients.
TEST(CudaParity, FusedLstmRecurrence) {
  SKIP_WITHOUT_CUDA();
  const int64_t L = 9, B = 4, H = 37;
  std::vector<float> pad(L * B, 0.0f);
  pad[0 * B + 1] = pad[1 * B + 1] = pad[4 * B + 2] = pad[7 * B + 3] = pad[8 * B + 3] = 1.0f;
  const Tensor mask_pad = Tensor::from_vector(pad, {L, B});
  for (DType dt : {DType::F32, DType::F64})
    for (int bits = 0; bits < 4; ++bits) {
      const bool reverse = bits & 1, extras = bits & 2;
      SCOPED_TRACE(std::string(dtype_name(dt)) + (reverse ? " reverse" : "") + (extras ? " bias, h0, c0" : ""));
      const double tol = dt == DType::F32 ? 1e-4 : 1e-10;
      expect_parity(
          [&](const Inputs& v) {
            const LstmRecurrenceResult r = lstm_recurrence(v[0], v[1], v[2], v[3], v[4], v[5], reverse);
            return std::vector<Tensor>{r.output, r.h, r.c};
          },
          {rand_leaf({L, B, 4 * H}, 70, dt, -2, 2), rand_leaf({4 * H, H}, 71, dt, -0.5, 0.5),
           extras ? rand_leaf({4 * H}, 72, dt) : Tensor(), extras ? rand_leaf({B, H}, 73, dt) : Tensor(),
           extras ? rand_leaf({B, H}, 74, dt) : Tensor(), mask_pad},
          tol);
    }
  // h rounded to bf16 values (cuDNN's bf16 LSTM's twin): the same rounding on both; a float32 difference
  // that crosses a rounding boundary moves h by one bf16 step (2^-8 relative), hence the bound.
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse ? "bf16 h, reverse" : "bf16 h");
    expect_parity(
        [&](const Inputs& v) {
          const LstmRecurrenceResult r =
              lstm_recurrence(v[0], v[1], v[2], Tensor(), Tensor(), v[3], reverse, LstmHidden::Bf16Values);
          return std::vector<Tensor>{r.output, r.h, r.c};
        },
        {rand_leaf({L, B, 4 * H}, 75, DType::F32, -2, 2), rand_leaf({4 * H, H}, 76, DType::F32, -0.5, 0.5),
         rand_leaf({4 * H}, 77), mask_pad},
        2e-2);
  }
}

// An SRU stack module moved to the GPU trains like its CPU copy (forward, backward, parameter grads).
TEST(CudaParity, SruModuleOnDevice) {
  SKIP_WITHOUT_CUDA();
  nn::SRUOptions o;
  o.input_size = 8;
  o.hidden_size = 6;
  o.num_layers = 2;
  o.dropout = 0.2;
  o.bidirectional = true;
  o.projection_size = 4;
  Generator g_cpu(9), g_gpu(9);
  nn::SRU cpu(o, g_cpu), gpu(o, g_gpu);
  gpu.to(kCuda);
  expect_parity(
      [&](const Inputs& v) {
        const nn::SRU& m = v[0].device().is_cuda() ? gpu : cpu;
        auto [h, c] = m.forward(v[0]);
        return std::vector<Tensor>{h, c};
      },
      {rand_leaf({5, 3, 8}, 60)}, 1e-4);
  expect_same_parameters_and_grads(cpu, gpu, 1e-4);
}

// masked_softmax / masked_log_softmax with every mask broadcast form and mask dtype; rows of 300
// (several passes of a warp's lanes) through the warp-per-row kernel, rows of 5 and 20 (8 lanes a row,
// four rows a warp, the last warp's groups partly past the last row) and of 48 (16 lanes a row), also
// in bf16, rows of 1,500 through the block-per-row one; fully masked rows and rows with one unmasked entry. The random output weights reach the masked positions too, so the CUDA backward
// must ignore them as the CPU does.
TEST(CudaParity, MaskedSoftmaxEveryBroadcastForm) {
  SKIP_WITHOUT_CUDA();
  struct Case {
    Shape x, mask;
  };
  const std::vector<Case> cases = {{{4, 3, 300}, {4, 1, 300}}, {{6, 5, 300}, {5, 300}}, {{7, 300}, {7, 300}},
                                   {{2, 3, 4, 300}, {2, 1, 1, 300}}, {{4, 5, 300}, {1, 5, 1}}, {{9, 5}, {9, 5}},
                                   {{3, 4, 5}, {5}}, {{3, 1500}, {3, 1500}}, {{5, 7, 20}, {5, 7, 20}},
                                   {{3, 11, 48}, {3, 1, 48}}};
  uint64_t seed = 200;
  for (DType dt : {DType::F32, DType::F64, DType::BF16})
    for (const Case& c : cases)
      for (DType mask_dtype : {DType::I32, DType::F32, DType::I64}) {
        if (dt == DType::BF16 && c.x.back() != 20 && c.x.back() != 48) continue;  // the short rows' kernels
        SCOPED_TRACE(std::string(dtype_name(dt)) + " x " + shape_str(c.x) + " mask " + shape_str(c.mask) + " " +
                     std::string(dtype_name(mask_dtype)));
        // bf16: both devices compute in float32 and round each output once; their sums' orders differ, so
        // an output may land one bf16 step (up to 2^-7 relative) apart, and the backward reads that output:
        // a bound of two steps (a wrong row or lane would be off by O(1)).
        const double tol = dt == DType::F32 ? 1e-5 : dt == DType::BF16 ? 2e-2 : 1e-10;
        const Tensor x = rand_leaf(c.x, ++seed, dt, -5, 5);
        std::vector<int32_t> bits;
        for (double u : rand_leaf(c.mask, ++seed, DType::F64, 0, 1).to_vector<double>()) bits.push_back(u < 0.3);
        const int64_t C = c.mask.back();
        if (C > 1 && bits.size() >= 2 * static_cast<size_t>(C)) {
          std::fill(bits.begin(), bits.begin() + C, 1);      // row 0 fully masked
          std::fill(bits.begin() + C, bits.begin() + 2 * C, 1);
          bits[C + C / 2] = 0;                               // row 1 has a single unmasked entry
        }
        const Tensor mask = Tensor::from_vector(bits, c.mask).to(mask_dtype);
        expect_parity(one([](const Inputs& v) { return masked_softmax(v[0], v[1]); }), {x, mask}, tol);
        expect_parity(one([](const Inputs& v) { return masked_log_softmax(v[0], v[1]); }), {x, mask}, tol);
      }
}

// Multi-head attention with a causal mask over [memory | segment] and with a per-batch padding
// mask, dropout on the weights (same Philox masks on both devices), and DrQA's layers with their
// parameter gradients.
TEST(CudaParity, AttentionAndDrQALayers) {
  SKIP_WITHOUT_CUDA();
  for (DType dt : {DType::F32, DType::F64}) {
    SCOPED_TRACE(dtype_name(dt));
    const double tol = dt == DType::F32 ? 1e-4 : 1e-10;
    const int64_t L = 6, M = 4, B = 3, H = 2, dh = 8;
    const Tensor causal = nn::causal_mask(L, M + L, M);
    expect_parity(
        [&](const Inputs& v) {
          Generator gen(5);
          const Tensor kv = concat({v[1], v[0]}, 0);
          const nn::AttentionResult r = nn::scaled_dot_product_attention_with_weights(
              nn::split_heads(v[0], H), nn::split_heads(kv, H), nn::split_heads(kv, H), v[2], 0.2, true, gen);
          return std::vector<Tensor>{nn::merge_heads(r.output, H), r.weights};
        },
        {rand_leaf({L, B, H * dh}, 70, dt), rand_leaf({M, B, H * dh}, 71, dt), causal}, tol);
    const Tensor pad = nn::padding_mask({6, 2, 4}, L).view({B, 1, 1, L});
    expect_parity(
        [&](const Inputs& v) {
          auto heads = [&](const Tensor& t) { return reshape(nn::split_heads(t, H), {B, H, L, dh}); };
          return std::vector<Tensor>{nn::merge_heads(
              nn::scaled_dot_product_attention(heads(v[0]), heads(v[1]), heads(v[2]), v[3]), H)};
        },
        {rand_leaf({L, B, H * dh}, 72, dt), rand_leaf({L, B, H * dh}, 73, dt), rand_leaf({L, B, H * dh}, 74, dt), pad},
        tol);

    const int64_t Lp = 7, Lq = 4, d = 10;
    Generator g_cpu(80), g_gpu(80);
    nn::SeqAttnMatch match_cpu(d, dt, g_cpu), match_gpu(d, dt, g_gpu);
    nn::LinearSeqAttn pool_cpu(d, dt, g_cpu), pool_gpu(d, dt, g_gpu);
    nn::BilinearSeqAttn bilinear_cpu(d, d, dt, g_cpu), bilinear_gpu(d, d, dt, g_gpu);
    match_gpu.to(kCuda);
    pool_gpu.to(kCuda);
    bilinear_gpu.to(kCuda);
    const Tensor p_mask = nn::padding_mask({7, 3, 5}, Lp), q_mask = nn::padding_mask({2, 4, 1}, Lq);
    const Tensor target = Tensor::from_vector(std::vector<int64_t>{6, 0, 4}, {B});
    expect_parity(
        [&](const Inputs& v) {
          const bool gpu = v[0].device().is_cuda();
          const Tensor aligned = (gpu ? match_gpu : match_cpu).forward(v[0], v[1], v[3]);
          const Tensor question = nn::weighted_average(v[1], (gpu ? pool_gpu : pool_cpu).forward(v[1], v[3]));
          const nn::BilinearSeqAttn& bilinear = gpu ? bilinear_gpu : bilinear_cpu;
          const Tensor p = v[0] + aligned;
          return std::vector<Tensor>{aligned, bilinear.forward(p, question, v[2]),
                                     cross_entropy(bilinear.log_probs(p, question, v[2]), v[4])};
        },
        {rand_leaf({B, Lp, d}, 81, dt), rand_leaf({B, Lq, d}, 82, dt), p_mask, q_mask, target}, tol);
    expect_same_parameters_and_grads(match_cpu, match_gpu, tol);
    expect_same_parameters_and_grads(pool_cpu, pool_gpu, tol);
    expect_same_parameters_and_grads(bilinear_cpu, bilinear_gpu, tol);
  }
}

// The Embed-SRU / Super-Embed-SRU recurrence, both forms, tanh on/off, with and without an initial
// state, dropout mask and padding.
TEST(CudaParity, EmbedSruRecurrenceBothForms) {
  SKIP_WITHOUT_CUDA();
  const int64_t L = 9, B = 5, d = 7;
  uint64_t seed = 300;
  for (DType dt : {DType::F32, DType::F64})
    for (bool super_embed : {false, true})
      for (bool use_tanh : {false, true})
        for (bool masks : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + (super_embed ? " super" : " embed") + (use_tanh ? " tanh" : "") +
                       (masks ? " masks" : ""));
          const double tol = dt == DType::F32 ? 1e-4 : 1e-10;
          EmbedSruRecurrenceOptions o;
          o.super_embed = super_embed;
          o.use_tanh = use_tanh;
          const Tensor u = rand_leaf({L, B, d}, ++seed, dt), x = rand_leaf({L, B, d}, ++seed, dt);
          const Tensor f = rand_leaf({L, B, d}, ++seed, dt, 0.01, 0.99), r = rand_leaf({L, B, d}, ++seed, dt, 0.01, 0.99);
          const auto [c0, mask_c, mask_pad] = recurrence_extras(masks, L, B, d, dt, seed);
          expect_parity(
              [o](const Inputs& v) {
                auto [h, c] = embed_sru_recurrence(v[0], v[1], v[2], v[3], v[4], v[5], v[6], o);
                return std::vector<Tensor>{h, c};
              },
              {u, f, r, x, c0, mask_c, mask_pad}, tol);
        }
}

// Both encoders moved to the GPU: forward, backward and parameter gradients as on the CPU, and the
// after-update hook clips the gate tables on the device (Tensor::clamp_).
TEST(CudaParity, EmbedSruModulesOnDeviceAndGateClipping) {
  SKIP_WITHOUT_CUDA();
  for (nn::EmbedSRUForm form : {nn::EmbedSRUForm::Embed, nn::EmbedSRUForm::SuperEmbed}) {
    nn::EmbedSRUOptions o;
    o.input_size = o.hidden_size = 6;
    o.num_layers = 2;
    o.v1 = true;
    o.use_tanh = true;
    Generator g_cpu(9), g_gpu(9);
    nn::EmbedSRU cpu(o, 11, form, g_cpu), gpu(o, 11, form, g_gpu);
    gpu.to(kCuda);
    cpu.eval();
    gpu.eval();
    const Tensor tokens = Tensor::from_vector(std::vector<int64_t>{0, 3, 10, 7, 7, 1, 2, 9, 4, 5, 6, 8, 0, 1, 2}, {5, 3});
    expect_parity(
        [&](const Inputs& v) {
          const bool on_gpu = v[0].device().is_cuda();
          nn::EncoderStatePtr state;
          const Tensor h = (on_gpu ? gpu : cpu).forward_sequence({v[0], Tensor(), tokens.to(v[0].device())}, state);
          return std::vector<Tensor>{h, dynamic_cast<const nn::CellState&>(*state).c};
        },
        {rand_leaf({5, 3, 6}, 61)}, 1e-4);
    expect_same_parameters_and_grads(cpu, gpu, 1e-4);
    for (nn::EmbedSRU* m : {&cpu, &gpu}) {
      m->first->forget->weight.fill_(2.0);
      m->first->reset->weight.fill_(-1.0);
      m->after_update();
    }
    EXPECT_EQ(gpu.first->forget->weight.to_vector<double>(), cpu.first->forget->weight.to_vector<double>());
    EXPECT_EQ(gpu.first->reset->weight.to(Device::cpu()).to_vector<float>(),
              std::vector<float>(11 * 6, static_cast<float>(nn::EmbedSRULayer::kGateMin)));
  }
}

// Every registered decoder (nn/decoder.h) on the card against its CPU twin: the teacher-forced pass with
// target and source padding, its input and parameter gradients, and a few decoding steps.
TEST(CudaParity, RegisteredDecoders) {
  SKIP_WITHOUT_CUDA();
  for (const nn::DecoderSpec& spec : nn::decoders()) {
    SCOPED_TRACE(spec.name);
    nn::DecoderArgs a;
    a.layer.width = 16;
    a.layer.heads = 2;
    a.layer.ff_size = 24;
    a.num_layers = 2;
    Generator g1(70), g2(70);
    const std::shared_ptr<nn::Decoder> cpu = spec.build(a, g1), gpu = spec.build(a, g2);
    gpu->to(kCuda);
    cpu->eval();
    gpu->eval();
    const Tensor x = rand_leaf({5, 3, 16}, 71), memory = rand_leaf({4, 3, 16}, 72);
    std::vector<int32_t> target_pad(3 * 5, 0), source_pad(3 * 4, 0);
    target_pad[1 * 5 + 4] = 1;
    source_pad[2 * 4 + 3] = 1;
    const Tensor tp = Tensor::from_vector(target_pad, {3, 5}), sp = Tensor::from_vector(source_pad, {3, 4});
    const Tensor x_gpu = fresh_copy(x, kCuda), memory_gpu = fresh_copy(memory, kCuda);
    const Tensor out_cpu = cpu->forward(x, tp, memory, sp), out_gpu = gpu->forward(x_gpu, tp.to(kCuda), memory_gpu, sp.to(kCuda));
    EXPECT_TRUE(tensors_near(out_gpu, out_cpu, 1e-5, 1e-5)) << "forward";
    autograd::backward(sum(out_cpu));
    autograd::backward(sum(out_gpu));
    EXPECT_TRUE(tensors_near(x_gpu.grad(), x.grad(), 1e-4, 1e-4)) << "grad x";
    const nn::NamedTensors pc = cpu->named_parameters(), pg = gpu->named_parameters();
    for (size_t i = 0; i < pc.size(); ++i)
      EXPECT_TRUE(tensors_near(pg[i].second.grad(), pc[i].second.grad(), 1e-4, 1e-4)) << pc[i].first;
    const auto state_cpu = cpu->start_decoding(memory.detach(), sp), state_gpu = gpu->start_decoding(memory_gpu.detach(), sp.to(kCuda));
    for (int64_t t = 0; t < 3; ++t) {
      const Tensor step = slice(x.detach(), 0, t, t + 1);
      EXPECT_TRUE(tensors_near(gpu->forward_step(step.to(kCuda), *state_gpu), cpu->forward_step(step, *state_cpu), 1e-5, 1e-5))
          << "step " << t;
    }
  }
}

// The fused attention's CUDA kernels (ops/cuda/attention.cu) against their CPU twin: each head width
// (32, 64, 128 values: W = 1, 2, 4; dv != dh), one and several key tiles of 32 with the causal tile
// skips (memory and a window), key padding with a sequence whose queries see no key, dropout on the
// weights (the same Philox words on both devices), bf16 heads, float64, and the head-major layout of
// split heads and the decoding cache; bf16 heads of 64 on the tensor-core kernels
// (ops/cuda/attention_tensor_cores.cu: tiles of 64, the same masks, dropout and layouts).
TEST(CudaParity, FusedAttentionEveryMaskLengthAndWidth) {
  SKIP_WITHOUT_CUDA();
  struct Case {
    const char* name;
    int64_t Lq, Lk, heads, dh, dv;
    AttentionPattern pattern;
    bool padding;
    double dropout;
    DType dtype;
    double tol;
    HeadsLayout layout = HeadsLayout::TimeMajor;
  };
  const Case cases[] = {
      {"L 1, widths 8 / 12", 1, 1, 2, 8, 12, {}, false, 0.0, DType::F32, 1e-5},
      {"L 7, key padding, widths 64", 7, 7, 3, 64, 64, {}, true, 0.0, DType::F32, 1e-5},
      {"L 64, causal, widths 128 / 100", 64, 64, 2, 128, 100, {true, 0, -1}, false, 0.0, DType::F32, 1e-5},
      {"L 200 over 203 keys, memory 3, window 50", 200, 203, 2, 32, 32, {true, 3, 50}, false, 0.0, DType::F32, 1e-5},
      {"L 64, causal, key padding, dropout 0.2", 64, 64, 4, 16, 16, {true, 0, -1}, true, 0.2, DType::F32, 1e-5},
      {"bf16, L 64, causal, widths 128 / 100", 64, 64, 2, 128, 100, {true, 0, -1}, false, 0.0, DType::BF16, 2e-2},
      {"bf16, L 33, key padding, dropout 0.2", 33, 33, 2, 64, 64, {}, true, 0.2, DType::BF16, 2e-2},
      {"f64, L 40, causal, key padding, widths 64 / 24", 40, 40, 2, 64, 24, {true, 0, -1}, true, 0.0, DType::F64, 1e-10},
      {"head-major: one query over a ring of 16, offset 5", 1, 16, 4, 64, 64, {true, 5, -1}, false, 0.0, DType::F32, 1e-5,
       HeadsLayout::HeadMajor},
      {"head-major: L 33 over 40 keys, key padding, dropout 0.2", 33, 40, 2, 32, 48, {}, true, 0.2, DType::F32, 1e-5,
       HeadsLayout::HeadMajor},
      // bf16 heads of 64 features and >= 16 queries: the tensor-core kernels on cards of 8.0 and later.
      {"bf16 tensor cores, L 16", 16, 16, 2, 64, 64, {}, false, 0.0, DType::BF16, 2e-2},
      {"bf16 tensor cores, L 200 over 203 keys, memory 3, window 50", 200, 203, 2, 64, 64, {true, 3, 50}, false, 0.0,
       DType::BF16, 2e-2},
      {"bf16 tensor cores, L 130, causal, key padding, dropout 0.2", 130, 130, 2, 64, 64, {true, 0, -1}, true, 0.2,
       DType::BF16, 2e-2},
      {"bf16 tensor cores, head-major: L 33 over 40 keys, key padding, dropout 0.2", 33, 40, 2, 64, 64, {}, true, 0.2,
       DType::BF16, 2e-2, HeadsLayout::HeadMajor},
  };
  uint64_t seed = 900;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const int64_t B = 3;
    Tensor padding;
    if (c.padding) {
      std::vector<float> pad(static_cast<size_t>(B * c.Lk), 0.0f);
      for (int64_t j = c.Lk - 3; j < c.Lk; ++j) pad[static_cast<size_t>(c.Lk + j)] = 1.0f;  // row 1: 3 keys
      for (int64_t j = 0; j < c.Lk; ++j) pad[static_cast<size_t>(2 * c.Lk + j)] = 1.0f;     // row 2: every key
      padding = Tensor::from_vector(pad, {B, c.Lk});
    }
    const bool time_major = c.layout == HeadsLayout::TimeMajor;
    const auto shape = [&](int64_t L, int64_t d) {
      return time_major ? Shape{L, B, c.heads * d} : Shape{B * c.heads, L, d};
    };
    const Tensor q = rand_leaf(shape(c.Lq, c.dh), ++seed, c.dtype, -2, 2);
    const Tensor k = rand_leaf(shape(c.Lk, c.dh), ++seed, c.dtype, -2, 2);
    const Tensor v = rand_leaf(shape(c.Lk, c.dv), ++seed, c.dtype);
    expect_parity(one([&c](const Inputs& x) {
                    Generator gen(77);  // the same dropout words on both devices
                    return fused_attention(x[0], x[1], x[2], c.heads, c.pattern, x[3],
                                           1.0 / std::sqrt(static_cast<double>(c.dh)), c.dropout, c.dropout > 0, gen,
                                           c.layout);
                  }),
                  {q, k, v, padding}, c.tol);
  }
}

// The tensor-core kernels against the SIMT kernels on one card (allow_tensor_core_attention), forward and
// backward: the bench shape (L 512, 8 heads of 64, causal) with dropout, causal, unmasked and
// windowed calls without it, and key padding over a length that is no multiple of the 64-query tiles,
// with q, k and v aligned (16-byte words) and as views 2 elements into their storage (4-byte words);
// each path counted where it ran.
TEST(CudaParity, FusedAttentionTensorCoresMatchTheSimtKernels) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend";
#else
  SKIP_WITHOUT_CUDA();
  if (cuda::compute_capability(0) < 80) GTEST_SKIP() << "the tensor-core attention needs compute capability 8.0";
  struct Case {
    const char* name;
    int64_t L, B, heads;
    AttentionPattern pattern;
    bool padding;
    double dropout;
    bool offset;  // q, k, v start 2 elements into their storage
  };
  // (The kernels compute the tiles every query sees whole without a mask: the first two cases hold both
  // kinds of tile, the third only unmasked ones, the fourth a window's both sides.)
  for (const Case& c : {Case{"L 512, 8 heads, causal, dropout 0.1", 512, 2, 8, {true, 0, -1}, false, 0.1, false},
                        Case{"L 200, causal", 200, 2, 2, {true, 0, -1}, false, 0.0, false},
                        Case{"L 256, no mask", 256, 2, 2, {}, false, 0.0, false},
                        Case{"L 300, causal window 100", 300, 2, 2, {true, 0, 100}, false, 0.0, false},
                        Case{"L 77, key padding", 77, 3, 2, {}, true, 0.0, false},
                        Case{"L 77, key padding, at an offset", 77, 3, 2, {}, true, 0.0, true}}) {
    SCOPED_TRACE(c.name);
    Tensor padding;
    if (c.padding) {
      std::vector<float> pad(static_cast<size_t>(c.B * c.L), 0.0f);
      for (int64_t j = c.L - 9; j < c.L; ++j) pad[static_cast<size_t>(c.L + j)] = 1.0f;
      padding = Tensor::from_vector(pad, {c.B, c.L}).to(kCuda);
    }
    const Shape shape{c.L, c.B, c.heads * 64};
    const Tensor q = rand_leaf(shape, 951, DType::BF16, -2, 2), k = rand_leaf(shape, 952, DType::BF16, -2, 2);
    const Tensor v = rand_leaf(shape, 953, DType::BF16), weights = rand_leaf(shape, 954);
    std::vector<Tensor> results[2];
    // A leaf holding t's values from element `at` of its storage, and the view of them shaped as t.
    const auto placed = [&](const Tensor& t, Tensor& leaf) {
      const int64_t at = c.offset ? 2 : 0, n = t.numel();
      leaf = Tensor::zeros({n + at}, t.dtype(), kCuda);
      leaf.narrow0(at, n).copy_(t.detach().to(kCuda).view({n}));
      leaf.set_requires_grad(true);
      return reshape(slice(leaf, 0, at, at + n), t.shape());  // (recorded views: the gradient reaches the leaf)
    };
    const auto gradient_of = [&](const Tensor& leaf, const Tensor& t) {
      return leaf.grad().narrow0(c.offset ? 2 : 0, t.numel()).view(t.shape());
    };
    for (int tensor_cores = 0; tensor_cores < 2; ++tensor_cores) {
      cuda::allow_tensor_core_attention(tensor_cores == 1);
      Tensor q_leaf, k_leaf, v_leaf;
      const Tensor qd = placed(q, q_leaf), kd = placed(k, k_leaf), vd = placed(v, v_leaf);
      const uint64_t before = cuda::tensor_core_attention_calls(), narrow_before = cuda::tensor_core_attention_narrow_calls();
      Generator gen(78);
      const Tensor out = fused_attention(qd, kd, vd, c.heads, c.pattern, padding, 0.125, c.dropout, c.dropout > 0, gen);
      autograd::backward(sum(mul(cast(out, DType::F32), weights.to(kCuda))));
      EXPECT_EQ(cuda::tensor_core_attention_calls() - before, tensor_cores ? 2u : 0u);
      EXPECT_EQ(cuda::tensor_core_attention_narrow_calls() - narrow_before, tensor_cores && c.offset ? 2u : 0u)
          << "16-byte words where the rows allow them, 4-byte ones elsewhere";
      for (const Tensor& t : {out, gradient_of(q_leaf, q), gradient_of(k_leaf, k), gradient_of(v_leaf, v)})
        results[tensor_cores].push_back(t.to(Device::cpu()).to(DType::F32));
    }
    cuda::allow_tensor_core_attention(true);
    const char* names[] = {"out", "dq", "dk", "dv"};
    for (size_t i = 0; i < 4; ++i) EXPECT_LT(max_error_over_largest(results[1][i], results[0][i]), 2e-2) << names[i];
  }
#endif
}
