// Tensor basics: factories, views sharing storage, conversions, in-place updates, and error messages.
#include <gtest/gtest.h>

#include <random>

#include "core/allocator.h"
#include "core/device.h"
#include "core/parallel.h"
#include "testing.h"

using namespace sru;
using sru::testing::error_of;
using sru::testing::values_near;

TEST(Tensor, FactoriesFillValues) {
  EXPECT_TRUE(values_near(Tensor::zeros({2, 2}), {2, 2}, {0, 0, 0, 0}));
  EXPECT_TRUE(values_near(Tensor::ones({3}, DType::F64), {3}, {1, 1, 1}));
  EXPECT_TRUE(values_near(Tensor::full({2}, 2.5), {2}, {2.5, 2.5}));
  EXPECT_TRUE(values_near(Tensor::arange(4), {4}, {0, 1, 2, 3}));
  EXPECT_EQ(Tensor::arange(4).dtype(), DType::I64);
  Tensor s = Tensor::scalar(3.0);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_DOUBLE_EQ(s.item<double>(), 3.0);
}

TEST(Tensor, StorageIsAlignedForVectorLoads) {
  Tensor t = Tensor::empty({7, 3});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % kCpuAlignment, 0u);
}

TEST(Tensor, FromVectorConvertsAndChecksCount) {
  Tensor t = Tensor::from_vector(std::vector<double>{1.5, -2.0, 3.0}, {3}, DType::I32);
  EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_NE(error_of([] { Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}); }).find("do not fill shape (2, 2)"),
            std::string::npos);
}

TEST(Tensor, ViewSharesStorageAndInfersDim) {
  Tensor t = Tensor::arange(6, DType::F32);
  Tensor v = t.view({2, -1});
  EXPECT_EQ(v.shape(), (Shape{2, 3}));
  EXPECT_TRUE(v.shares_storage(t));
  v.data<float>()[4] = 40.0f;
  EXPECT_FLOAT_EQ(t.data<float>()[4], 40.0f);
  EXPECT_NE(error_of([&] { t.view({4, -1}); }).find("cannot infer"), std::string::npos);
  EXPECT_NE(error_of([&] { t.view({5}); }).find("does not match 6 elements"), std::string::npos);
}

TEST(Tensor, Narrow0IsAZeroCopyRowRange) {
  Tensor t = Tensor::arange(12, DType::F32).view({4, 3});
  Tensor rows = t.narrow0(1, 2);
  EXPECT_TRUE(values_near(rows, {2, 3}, {3, 4, 5, 6, 7, 8}));
  EXPECT_TRUE(rows.shares_storage(t));
  EXPECT_NE(error_of([&] { t.narrow0(3, 2); }).find("out of range"), std::string::npos);
}

TEST(Tensor, CloneAndConvertCopy) {
  Tensor t = Tensor::full({3}, 1.25);
  Tensor c = t.clone();
  c.fill_(2.0);
  EXPECT_FLOAT_EQ(t.data<float>()[0], 1.25f);
  Tensor d = t.to(DType::F64);
  EXPECT_EQ(d.dtype(), DType::F64);
  EXPECT_FALSE(d.shares_storage(t));
  EXPECT_TRUE(t.to(DType::F32).shares_storage(t));
}

// swap_data_ trades storage: every handle of either tensor sees the other's values, gradients stay.
TEST(Tensor, SwapDataTradesStorageForEveryHandle) {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector(std::vector<float>{5, 6, 7, 8}, {2, 2});
  a.set_requires_grad(true);
  a.set_grad(Tensor::ones({2, 2}));
  Tensor alias = a;  // another handle of a, as a module's parameter list holds
  a.swap_data_(b);
  EXPECT_EQ(alias.to_vector<float>(), (std::vector<float>{5, 6, 7, 8}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(alias.grad().to_vector<float>(), std::vector<float>(4, 1.0f));
  b.swap_data_(alias);  // back
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  Tensor other_shape = Tensor::zeros({4}, DType::F32), other_dtype = Tensor::zeros({2, 2}, DType::F64);
  EXPECT_NE(error_of([&] { a.swap_data_(other_shape); }).find("differ"), std::string::npos);
  EXPECT_NE(error_of([&] { a.swap_data_(other_dtype); }).find("differ"), std::string::npos);
  // A view (a parameter in flat storage) exchanges values instead: the larger tensor around it keeps
  // its storage and its other rows.
  Tensor whole = Tensor::from_vector(std::vector<float>{0, 0, 10, 11, 12, 13, 0, 0}, {4, 2});
  Tensor rows = whole.narrow0(1, 2);
  a.swap_data_(rows);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{10, 11, 12, 13}));
  EXPECT_EQ(whole.to_vector<float>(), (std::vector<float>{0, 0, 1, 2, 3, 4, 0, 0}));
  EXPECT_TRUE(rows.shares_storage(whole));
}

TEST(Tensor, InPlaceUpdates) {
  Tensor t = Tensor::full({4}, 1.0);
  t.add_(Tensor::full({4}, 2.0), 0.5).mul_(3.0);
  EXPECT_TRUE(values_near(t, {4}, {6, 6, 6, 6}));
  t.zero_();
  EXPECT_TRUE(values_near(t, {4}, {0, 0, 0, 0}));
  t.copy_(Tensor::arange(4, DType::F32));
  EXPECT_TRUE(values_near(t, {4}, {0, 1, 2, 3}));
}

TEST(Tensor, LargeInPlaceAddUsesAllThreadsAndIsExact) {
  const int64_t n = 1 << 20;  // above the parallel grain
  Tensor a = Tensor::full({n}, 1.0), b = Tensor::arange(n, DType::F32);
  a.add_(b);
  const float* p = a.data<float>();
  for (int64_t i = 0; i < n; i += 4099) ASSERT_FLOAT_EQ(p[i], 1.0f + static_cast<float>(i));
}

TEST(Tensor, DtypeMisuseIsAClearError) {
  Tensor t = Tensor::zeros({2});
  EXPECT_NE(error_of([&] { t.data<double>(); }).find("tensor of dtype f32 accessed as f64"), std::string::npos);
  EXPECT_NE(error_of([&] { Tensor::zeros({2}).item<float>(); }).find("has 2 elements"), std::string::npos);
  EXPECT_NE(error_of([] { Tensor::arange(3).set_requires_grad(true); }).find("only floating tensors"),
            std::string::npos);
  EXPECT_NE(error_of([] { Tensor::empty({2, -1}); }).find("negative dimension"), std::string::npos);
}

TEST(Tensor, ErrorsCarryTheirSourceLocationApartFromTheMessage) {
  try {
    Tensor::zeros({2}).item<float>();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find(".cpp"), std::string::npos) << "users see no source file: " << e.what();
    EXPECT_NE(e.location().find("core/tensor.cpp:"), std::string::npos) << e.location();
  }
}

TEST(Tensor, UndefinedTensorUseIsAnError) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_NE(error_of([&] { (void)t.shape(); }).find("undefined tensor"), std::string::npos);
}

TEST(Device, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::cuda(1).str(), "cuda:1");
  EXPECT_NE(error_of([] { Device::parse("gpu"); }).find("unknown device 'gpu'"), std::string::npos);
  EXPECT_NE(error_of([] { Device::parse("cuda:x"); }).find("unknown device"), std::string::npos);
}

TEST(Threads, SettingThreadCountIsObserved) {
  const int before = num_threads();
  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
  set_num_threads(0);
  EXPECT_GE(num_threads(), 1);
  set_num_threads(before);
}

TEST(Shape, SuffixRuleForBroadcasting) {
  EXPECT_TRUE(is_shape_suffix({3}, {2, 3}));
  EXPECT_TRUE(is_shape_suffix({1, 3}, {2, 3}));
  EXPECT_TRUE(is_shape_suffix({}, {2, 3}));
  EXPECT_TRUE(is_shape_suffix({1, 1, 3}, {3}));
  EXPECT_FALSE(is_shape_suffix({2}, {2, 3}));
  EXPECT_FALSE(is_shape_suffix({4, 2, 3}, {2, 3}));
  EXPECT_EQ(shape_str({2, 3}), "(2, 3)");
  EXPECT_EQ(shape_str({5}), "(5,)");
}

TEST(CpuAllocator, ReusesLargeBlocksAndTracksStatistics) {
  auto& alloc = CpuAllocator::instance();
  alloc.empty_cache();
  const AllocatorStats before = alloc.stats();
  void* first;
  {
    Tensor big = Tensor::empty({1 << 20});  // 4 MB: cached size class
    first = big.data_ptr();
    EXPECT_GE(alloc.stats().allocated, before.allocated + (4u << 20));
    EXPECT_GE(alloc.stats().peak_allocated, alloc.stats().allocated);
  }
  EXPECT_EQ(alloc.stats().allocated, before.allocated);
  EXPECT_GE(alloc.stats().reserved, before.reserved + (4u << 20)) << "the freed block stays cached";
  Tensor again = Tensor::empty({1 << 20});
  EXPECT_EQ(again.data_ptr(), first) << "a block of the same size class is reused";
  again = Tensor();
  alloc.empty_cache();
  EXPECT_EQ(alloc.stats().reserved, before.reserved);
}

TEST(CpuAllocator, VariableShapesReuseTheCacheSoReservedMemoryLevelsOff) {
  // Batches of varying length (length-sorted SQuAD paragraphs): caching one block per distinct size
  // grew without bound; size classes with splitting keep reserved memory within a small factor of
  // the peak in use, and it stops growing after the first pass.
  auto& alloc = CpuAllocator::instance();
  alloc.empty_cache();
  std::mt19937 rng(3);
  size_t reserved_after_first_pass = 0;
  for (int pass = 0; pass < 4; ++pass) {
    for (int batch = 0; batch < 60; ++batch) {
      const int64_t L = 100 + static_cast<int64_t>(rng() % 600);  // 1.2 MB to 8.4 MB per tensor
      std::vector<Tensor> activations;
      for (int layer = 0; layer < 4; ++layer) activations.push_back(Tensor::empty({L, 32, 100}));
      for (int layer = 0; layer < 4; layer += 2) activations[layer] = Tensor();
      activations.push_back(Tensor::empty({L, 32, 50}));
      for (const Tensor& t : activations)
        if (t.defined()) {
          EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % CpuAllocator::kAlignment, 0u);
        }
    }
    if (pass == 0) reserved_after_first_pass = alloc.stats().reserved;
  }
  const AllocatorStats s = alloc.stats();
  EXPECT_LE(s.reserved, 3 * s.peak_allocated) << "reserved " << s.reserved << ", peak in use " << s.peak_allocated;
  EXPECT_LE(s.reserved, reserved_after_first_pass * 5 / 4) << "the cache keeps growing";
  alloc.empty_cache();
}

TEST(CpuAllocator, SmallBlocksAreAlignedAndNotCached) {
  auto& alloc = CpuAllocator::instance();
  const size_t reserved = alloc.stats().reserved;
  {
    Tensor small = Tensor::empty({3});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data_ptr()) % CpuAllocator::kAlignment, 0u);
  }
  EXPECT_EQ(alloc.stats().reserved, reserved);
}
