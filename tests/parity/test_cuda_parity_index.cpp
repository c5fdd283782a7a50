// CUDA parity of the index ops (label `cuda`; each test skips without a device): index_select and its
// index_add backward, topk through both CUDA paths (block selection for k <= 32, segmented radix sort
// above) against the CPU kernels, with ties and NaN compared index for index, and index errors found by
// the kernel reported at the next host wait; index_copy_ against the CPU, exact, with repeated indices
// (the last write wins on both), a CPU index, and bad indices. Tolerances: index ops copy values, so forward results are
// exact; gradients 1e-5 (float32) / 1e-10 (float64) as in test_cuda_parity.cpp (the index_add sums run
// in the same order, so they are expected exact too).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/host_sync.h"
#include "cuda_parity.h"

using namespace sru;
using namespace sru::testing;

namespace {

// Uniform values rounded to a grid of 0.25 (many ties), with every 37th a NaN when `with_nan`.
Tensor tied_values(const Shape& shape, uint64_t seed, DType dtype, bool with_nan) {
  Generator gen(seed);
  std::vector<double> v = Tensor::uniform(shape, -3, 3, DType::F64, gen).to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::round(v[i] * 4) / 4;
    if (with_nan && i % 37 == 3) v[i] = std::numeric_limits<double>::quiet_NaN();
  }
  return Tensor::from_vector(v, shape, dtype);
}

// topk on the CPU and on cuda:0: identical indices, and values equal (NaN for NaN).
void expect_same_topk(const Tensor& x, int64_t k) {
  SCOPED_TRACE(::testing::Message() << "shape " << shape_str(x.shape()) << " k " << k << " " << dtype_name(x.dtype()));
  const TopK cpu = topk(x, k), gpu = topk(x.to(kCuda), k);
  ASSERT_TRUE(gpu.values.device().is_cuda());
  EXPECT_EQ(gpu.indices.to_vector<int64_t>(), cpu.indices.to_vector<int64_t>());
  const std::vector<double> vc = cpu.values.to_vector<double>(), vg = gpu.values.to_vector<double>();
  ASSERT_EQ(vc.size(), vg.size());
  for (size_t i = 0; i < vc.size(); ++i)
    ASSERT_TRUE(std::isnan(vc[i]) ? std::isnan(vg[i]) : vg[i] == vc[i]) << "slot " << i;
}

// Uniform values in [-100, 100) as dt (integers for I64).
Tensor values_of(const Shape& shape, uint64_t seed, DType dt) {
  return rand_leaf(shape, seed, DType::F64, -100, 100).detach().to(dt);
}

// index_copy_ of src into a copy of dst on the CPU and on cuda:0 (the index on the CPU, or moved to the
// device when `index_on_device`): identical values.
void expect_same_index_copy(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src,
                            bool index_on_device = true) {
  SCOPED_TRACE(::testing::Message() << "dst " << shape_str(dst.shape()) << " dim " << dim << " m " << index.numel()
                                    << " " << dtype_name(dst.dtype()) << (index_on_device ? "" : " cpu index"));
  Tensor cpu = dst.detach().clone(), gpu = dst.detach().to(kCuda);
  index_copy_(cpu, dim, index, src.detach());
  index_copy_(gpu, dim, index_on_device ? index.to(kCuda) : index, src.detach().to(kCuda));
  ASSERT_TRUE(gpu.device().is_cuda());
  EXPECT_EQ(gpu.to_vector<double>(), cpu.to_vector<double>());
}

}  // namespace

TEST(CudaParityIndex, IndexCopyMatchesTheCpu) {
  SKIP_WITHOUT_CUDA();
  for (DType dt : {DType::F32, DType::F64, DType::I64}) {
    const Tensor h = values_of({2, 6, 33}, 21, dt);
    const Tensor rows = i64({5, 0, 3, 1}, {4});
    expect_same_index_copy(h, 1, rows, values_of({2, 4, 33}, 22, dt));
    expect_same_index_copy(h, 0, i64({1}, {1}).to(DType::I32), values_of({1, 6, 33}, 23, dt));
    expect_same_index_copy(h, -1, rows, values_of({2, 6, 4}, 24, dt), false);
    // The decoding cache's write: one slot of (N, capacity, d).
    expect_same_index_copy(values_of({8, 17, 16}, 25, dt), 1, i64({9}, {1}),
                           values_of({8, 1, 16}, 26, dt));
    // Repeated indices: the last write wins on both; many positions over few rows.
    expect_same_index_copy(h, 1, i64({5, 5, 0, 3, 3, 3, 1}, {7}), values_of({2, 7, 33}, 27, dt));
    std::vector<int64_t> many(3000);
    for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int64_t>((i * 7919) % 11);
    expect_same_index_copy(values_of({3, 11, 17}, 28, dt), 1, i64(many, {3000}),
                           values_of({3, 3000, 17}, 29, dt));
    // An empty index writes nothing.
    expect_same_index_copy(h, 1, i64({}, {0}), Tensor::zeros({2, 0, 33}, dt));
  }
}

TEST(CudaParityIndex, IndexCopyTakesACpuIndex) {
  SKIP_WITHOUT_CUDA();
  Tensor x = Tensor::zeros({4, 5}, DType::F32, kCuda);
  index_copy_(x, 0, i64({3, 0, 3}, {3}), Tensor::from_vector(std::vector<double>(15, 2.0), {3, 5}, DType::F32).to(kCuda));
  EXPECT_EQ(x.to_vector<double>()[0], 2.0);
  // A CPU index is checked on the host: the error comes at the call, before anything is queued.
  const std::string m = error_of([&] { index_copy_(x, 1, i64({0, 5}, {2}), Tensor::zeros({4, 2}, DType::F32, kCuda)); });
  EXPECT_NE(m.find("index_copy_: index 5 at position 1 is out of range for dim 1 of size 5"), std::string::npos) << m;
}

TEST(CudaParityIndex, IndexCopyBadDeviceIndexIsReportedAtTheNextHostWait) {
  SKIP_WITHOUT_CUDA();
  Tensor x = Tensor::zeros({2, 5, 3}, DType::F32, kCuda);
  const Tensor bad = i64({1, 4, 9, 2}, {4}).to(kCuda);
  EXPECT_EQ(error_of([&] { index_copy_(x, 1, bad, Tensor::ones({2, 4, 3}, DType::F32, kCuda)); }), "");
  const std::string m = error_of([&] { read_scalars({sum(x)}); });
  EXPECT_NE(m.find("index_copy_: index 9 at position 2 is out of range for dim 1 of size 5"), std::string::npos) << m;
  // The good slices were written, the bad one skipped: 3 slices of 3 in 2 batch rows.
  EXPECT_EQ(sum(x).item<double>(), 18.0);
  // A src without elements still has its indices checked.
  const std::string e = error_of([&] {
    Tensor empty = Tensor::zeros({0, 5}, DType::F32, kCuda);
    index_copy_(empty, 1, i64({0, -2}, {2}).to(kCuda), Tensor::zeros({0, 2}, DType::F32, kCuda));
    read_scalars({sum(empty)});
  });
  EXPECT_NE(e.find("index -2 at position 1 is out of range for dim 1 of size 5"), std::string::npos) << e;
}

TEST(CudaParityIndex, IndexCopyMixedDevicesAreRefused) {
  SKIP_WITHOUT_CUDA();
  Tensor cpu = Tensor::zeros({3, 2});
  std::string m = error_of([&] { index_copy_(cpu, 0, i64({0}, {1}).to(kCuda), Tensor::zeros({1, 2})); });
  EXPECT_NE(m.find("index on cuda:0 and dst on cpu"), std::string::npos) << m;
  m = error_of([&] { index_copy_(cpu, 0, i64({0}, {1}), Tensor::zeros({1, 2}, DType::F32, kCuda)); });
  EXPECT_NE(m.find("index_copy_: tensors on cpu and cuda:0"), std::string::npos) << m;
}

TEST(CudaParityIndex, IndexSelectForwardAndBackward) {
  SKIP_WITHOUT_CUDA();
  for (DType dt : {DType::F32, DType::F64}) {
    const double tol = dt == DType::F32 ? 1e-5 : 1e-10;
    const Tensor h = rand_leaf({2, 6, 33}, 1, dt);
    const Tensor batch_rows = i64({5, 5, 0, 3, 3, 3, 1}, {7});
    // The beam-search gathers: dim 1 of (layers, B, d), dim 0 of (B, d); the last and a negative dim.
    expect_parity(one([&](const Inputs& v) { return index_select(v[0], 1, v[1]); }), {h, batch_rows}, tol);
    expect_parity(one([&](const Inputs& v) { return index_select(v[0], 0, v[1]); }),
                  {rand_leaf({6, 40}, 2, dt), batch_rows.to(DType::I32)}, tol);
    expect_parity(one([&](const Inputs& v) { return index_select(v[0], -1, v[1]); }),
                  {rand_leaf({3, 4, 6}, 3, dt), batch_rows}, tol);
    expect_parity(one([&](const Inputs& v) { return index_select(v[0], -3, v[1]); }),
                  {rand_leaf({6, 2, 5}, 4, dt), batch_rows}, tol);
    // An empty index.
    expect_parity(one([&](const Inputs& v) { return index_select(v[0], 1, v[1]); }), {h, i64({}, {0})}, tol);
    // Many positions over few rows (long runs after the backward's sort).
    std::vector<int64_t> many(3000);
    for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int64_t>((i * 7919) % 11);
    expect_parity(one([&](const Inputs& v) { return index_select(v[0], 1, v[1]); }),
                  {rand_leaf({3, 11, 17}, 5, dt), i64(many, {3000})}, tol);
  }
}

TEST(CudaParityIndex, IndexSelectTakesACpuIndex) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = rand_leaf({4, 5}, 6).detach();
  const Tensor idx = i64({3, 0, 3}, {3});
  const Tensor out = index_select(x.to(kCuda), 0, idx);
  EXPECT_TRUE(out.device().is_cuda());
  EXPECT_TRUE(tensors_near(out, index_select(x, 0, idx), 0, 0));
  // A CPU index is checked on the host: the error comes at the call.
  const std::string m = error_of([&] { index_select(x.to(kCuda), 1, i64({0, 5}, {2})); });
  EXPECT_NE(m.find("index 5 at position 1 is out of range for dim 1 of size 5"), std::string::npos) << m;
}

TEST(CudaParityIndex, BadDeviceIndexIsReportedAtTheNextHostWait) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = Tensor::zeros({2, 5, 3}, DType::F32, kCuda);
  const Tensor bad = i64({1, 4, 9, 2}, {4}).to(kCuda);
  Tensor out;
  EXPECT_EQ(error_of([&] { out = index_select(x, 1, bad); }), "");  // no host wait at the call
  const std::string m = error_of([&] { read_scalars({sum(out)}); });
  EXPECT_NE(m.find("index_select: index 9 at position 2 is out of range for dim 1 of size 5"), std::string::npos) << m;
  // An output without elements still checks its indices.
  const std::string e = error_of([&] {
    read_scalars({sum(index_select(Tensor::zeros({0, 5}, DType::F32, kCuda), 1, i64({0, -2}, {2}).to(kCuda)))});
  });
  EXPECT_NE(e.find("index -2 at position 1 is out of range for dim 1 of size 5"), std::string::npos) << e;
}

TEST(CudaParityIndex, TopKBothPathsMatchTheCpu) {
  SKIP_WITHOUT_CUDA();
  for (DType dt : {DType::F32, DType::F64}) {
    const Tensor small = tied_values({9, 70}, 7, dt, true);
    for (int64_t k : {1, 5, 32, 33, 64, 70}) expect_same_topk(small, k);  // selection: k <= 32; sort above
    // Beam-search sizes: candidates of a 32k vocabulary; and a full sort (top-p) of a long row.
    const Tensor vocab = tied_values({3, 32000}, 8, dt, false);
    for (int64_t k : {1, 10, 400}) expect_same_topk(vocab, k);
    expect_same_topk(tied_values({2, 5000}, 9, dt, true), 5000);
    // Rows beyond the capped grid of the selection kernel, and 3-d input.
    expect_same_topk(tied_values({70000, 3}, 10, dt, false), 2);
    expect_same_topk(tied_values({4, 3, 50}, 11, dt, true), 40);
    // Signed zeros tie: the same index order and the picked entry's own sign on both.
    expect_same_topk(Tensor::from_vector(std::vector<double>{0.0, -0.0, 0.0, -0.0, -1}, {5}, dt), 4);
  }
}

TEST(CudaParityIndex, TopKGradients) {
  SKIP_WITHOUT_CUDA();
  for (DType dt : {DType::F32, DType::F64}) {
    const double tol = dt == DType::F32 ? 1e-5 : 1e-10;
    for (int64_t k : {1, 8, 50, 100}) {
      expect_parity([k](const Inputs& v) {
        const TopK r = topk(v[0], k);
        return std::vector<Tensor>{r.values, r.indices};
      }, {rand_leaf({5, 100}, 12 + k, dt)}, tol);
    }
  }
}

TEST(CudaParityIndex, MixedDevicesAreRefused) {
  SKIP_WITHOUT_CUDA();
  const std::string m = error_of([] { index_select(Tensor::zeros({3}), 0, i64({0}, {1}).to(kCuda)); });
  EXPECT_NE(m.find("index on cuda:0 and x on cpu"), std::string::npos) << m;
}
