// Forward values and errors of the index ops (ops/index.h): index_select along every kind of dim, with
// repeated, empty, i32 and CPU-checked indices, its index_add backward by hand; index_copy_ by hand on
// dims 0 / 1 / last, its last-write-wins rule for repeated indices, bad indices and its refusals with
// grad; and topk's order (ties by smaller index, NaN first, -0 == +0) against an independent reference,
// its radix key, and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/parallel.h"
#include "ops/ops.h"
#include "testing.h"

using namespace sru;
using sru::testing::error_of;
using sru::testing::f32;
using sru::testing::f64;
using sru::testing::i32;
using sru::testing::i64;
using sru::testing::tensors_near;
using sru::testing::values_near;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// arange(n) as f64 of `shape`.
Tensor iota_f64(const Shape& shape) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  std::iota(v.begin(), v.end(), 0.0);
  return f64(v, shape);
}

// index_select by plain loops over (outer, n, inner), independent of the kernel's block copies.
std::vector<double> gather_reference(const Tensor& x, int dim, const std::vector<int64_t>& idx) {
  const int64_t outer = shape_prod(x.shape(), 0, dim), n = x.size(dim), inner = shape_prod(x.shape(), dim + 1, x.dim());
  const std::vector<double> xv = x.to_vector<double>();
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : idx)
      for (int64_t j = 0; j < inner; ++j) out.push_back(xv[(o * n + i) * inner + j]);
  return out;
}

// index_copy_ by plain loops over (outer, n, inner), positions in order (so the last write wins),
// independent of the kernel's block copies and its skipping of overridden positions.
std::vector<double> scatter_reference(const Tensor& dst, int dim, const std::vector<int64_t>& idx, const Tensor& src) {
  const int64_t outer = shape_prod(dst.shape(), 0, dim), n = dst.size(dim);
  const int64_t inner = shape_prod(dst.shape(), dim + 1, dst.dim()), m = static_cast<int64_t>(idx.size());
  std::vector<double> out = dst.to_vector<double>();
  const std::vector<double> sv = src.to_vector<double>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < inner; ++j) out[(o * n + idx[i]) * inner + j] = sv[(o * m + i) * inner + j];
  return out;
}

// topk by a stable sort on the radix key (a different route to the same order: larger key first, equal
// keys keep column order).
template <typename T>
void topk_reference(const std::vector<T>& row, int64_t k, std::vector<T>& values, std::vector<int64_t>& indices) {
  std::vector<int64_t> order(row.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return topk_sort_key(row[a]) > topk_sort_key(row[b]); });
  for (int64_t j = 0; j < k; ++j) {
    indices.push_back(order[j]);
    values.push_back(row[order[j]]);
  }
}

// d as a float; finite values beyond float's range become infinities (a plain cast would be undefined).
float to_float(double d) {
  if (std::isfinite(d) && std::abs(d) > std::numeric_limits<float>::max())
    return std::copysign(std::numeric_limits<float>::infinity(), static_cast<float>(d > 0 ? 1 : -1));
  return static_cast<float>(d);
}

// Same values, NaN matching NaN, -0 distinct from +0 (the value of the picked entry itself).
template <typename T>
bool same_bits_or_nan(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

}  // namespace

// ---- index_select ----

TEST(IndexSelect, Dim0GathersRowsWithRepeats) {
  const Tensor x = f32({0, 1, 10, 11, 20, 21}, {3, 2});
  EXPECT_TRUE(values_near(index_select(x, 0, i64({2, 0, 2}, {3})), {3, 2}, {20, 21, 0, 1, 20, 21}));
  EXPECT_TRUE(values_near(index_select(x, 0, i32({1}, {1})), {1, 2}, {10, 11}));
}

TEST(IndexSelect, MiddleDimGathersBatchRowsOfStates) {
  // Beam search: decoder states (layers, B, d) keep batch rows 3, 3, 0, 1 (dim 1).
  const Tensor h = iota_f64({2, 4, 3});
  const Tensor out = index_select(h, 1, i64({3, 3, 0, 1}, {4}));
  EXPECT_TRUE(values_near(out, {2, 4, 3},
                          {9, 10, 11, 9, 10, 11, 0, 1, 2, 3, 4, 5, 21, 22, 23, 21, 22, 23, 12, 13, 14, 15, 16, 17}));
  EXPECT_TRUE(values_near(index_select(h, 1, i64({2}, {1})), {2, 1, 3}, {6, 7, 8, 18, 19, 20}));
}

TEST(IndexSelect, LastAndNegativeDims) {
  const Tensor x = f32({0, 1, 2, 3, 4, 5}, {2, 3});
  EXPECT_TRUE(values_near(index_select(x, 1, i64({2, 0}, {2})), {2, 2}, {2, 0, 5, 3}));
  EXPECT_TRUE(values_near(index_select(x, -1, i64({2, 0}, {2})), {2, 2}, {2, 0, 5, 3}));
  EXPECT_TRUE(values_near(index_select(x, -2, i64({1, 1}, {2})), {2, 3}, {3, 4, 5, 3, 4, 5}));
  const Tensor v = f64({5, 6, 7}, {3});  // 1-d: dim 0 is the last
  EXPECT_TRUE(values_near(index_select(v, -1, i32({2, 2, 0, 1}, {4})), {4}, {7, 7, 5, 6}));
}

TEST(IndexSelect, I32AndI64IndicesAgreeOnEveryDim) {
  const Tensor x = iota_f64({3, 4, 5});
  for (int dim = -3; dim < 3; ++dim) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    const int d = dim < 0 ? dim + 3 : dim;
    const std::vector<int64_t> idx = {x.size(d) - 1, 0, x.size(d) - 1, 1};
    const Tensor a = index_select(x, dim, i64(idx, {4}));
    const Tensor b = index_select(x, dim, i32(std::vector<int32_t>(idx.begin(), idx.end()), {4}));
    Shape expected_shape = x.shape();
    expected_shape[d] = 4;
    EXPECT_TRUE(values_near(a, expected_shape, gather_reference(x, d, idx), 0, 0));
    EXPECT_TRUE(tensors_near(b, a, 0, 0));
  }
}

TEST(IndexSelect, IntegerValuesAreGatheredToo) {
  // Beam search also reorders token histories (i64).
  const Tensor tokens = i64({1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor out = index_select(tokens, 0, i64({2, 2, 0}, {3}));
  EXPECT_EQ(out.dtype(), DType::I64);
  EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{5, 6, 5, 6, 1, 2}));
}

TEST(IndexSelect, EmptyIndexGivesEmptyOutputAndZeroGradient) {
  Tensor x = iota_f64({2, 3, 2});
  x.set_requires_grad(true);
  const Tensor out = index_select(x, 1, i64({}, {0}));
  EXPECT_EQ(out.shape(), (Shape{2, 0, 2}));
  autograd::backward(sum(out));
  EXPECT_TRUE(values_near(x.grad(), {2, 3, 2}, std::vector<double>(12, 0.0)));
  // An empty dim with an empty index is fine too.
  EXPECT_EQ(index_select(Tensor::zeros({0, 3}), 0, i64({}, {0})).shape(), (Shape{0, 3}));
}

TEST(IndexSelect, BackwardAccumulatesRepeatedIndices) {
  Tensor x = iota_f64({3, 2});
  x.set_requires_grad(true);
  const Tensor w = f64({1, 2, 3, 4, 5, 6}, {3, 2});
  autograd::backward(sum(mul(index_select(x, 0, i64({2, 0, 2}, {3})), w)));
  EXPECT_TRUE(values_near(x.grad(), {3, 2}, {3, 4, 0, 0, 1 + 5, 2 + 6}));
  // Along the last dim of (2, 3): columns 1, 1, 1, 0.
  Tensor y = iota_f64({2, 3});
  y.set_requires_grad(true);
  autograd::backward(sum(mul(index_select(y, -1, i32({1, 1, 1, 0}, {4})), f64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}))));
  EXPECT_TRUE(values_near(y.grad(), {2, 3}, {4, 1 + 2 + 3, 0, 8, 5 + 6 + 7, 0}));
}

TEST(IndexSelect, LargeGatherAndBackwardAreThreadCountIndependent) {
  // Enough blocks for several threads, many repeats: the same values, bit for bit, on 1 thread and all.
  Generator gen(5);
  const Tensor x = Tensor::uniform({6, 200, 70}, -1, 1, DType::F32, gen);
  std::vector<int64_t> idx(500);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>((i * 37) % 13) * 15;  // 13 distinct rows
  const Tensor index = i64(idx, {500});
  const Tensor w = Tensor::uniform({6, 500, 70}, -1, 1, DType::F32, gen);
  const int before = num_threads();
  std::vector<std::vector<float>> outs, grads;
  for (int threads : {1, 0}) {
    set_num_threads(threads);
    Tensor leaf = x.clone();
    leaf.set_requires_grad(true);
    const Tensor out = index_select(leaf, 1, index);
    autograd::backward(sum(mul(out, w)));
    outs.push_back(out.to_vector<float>());
    grads.push_back(leaf.grad().to_vector<float>());
  }
  set_num_threads(before);
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(grads[0], grads[1]);
  const std::vector<double> ref = gather_reference(x, 1, idx);
  EXPECT_TRUE(values_near(Tensor::from_vector(outs[0], {6, 500, 70}), {6, 500, 70}, ref, 0, 0));
  // The gradient of row r sums the w rows that selected it, in index order.
  const std::vector<float> wv = w.to_vector<float>();
  for (int64_t o : {0, 5})
    for (int64_t r : {0, 15, 180, 7}) {
      float expected = 0;
      for (size_t i = 0; i < idx.size(); ++i)
        if (idx[i] == r) expected += wv[(o * 500 + i) * 70 + 3];
      EXPECT_EQ(grads[0][(o * 200 + r) * 70 + 3], expected) << "o " << o << " row " << r;
    }
}

TEST(IndexSelect, OutOfRangeIndexNamesValueDimAndSize) {
  const Tensor x = Tensor::zeros({2, 3, 4});
  std::string m = error_of([&] { index_select(x, 1, i64({0, 3}, {2})); });
  EXPECT_NE(m.find("index_select: index 3 at position 1 is out of range for dim 1 of size 3"), std::string::npos) << m;
  m = error_of([&] { index_select(x, -1, i32({2, -1, 9}, {3})); });
  EXPECT_NE(m.find("index -1 at position 1 is out of range for dim 2 of size 4"), std::string::npos) << m;
  // Checked even when the output has no elements.
  m = error_of([&] { index_select(Tensor::zeros({0, 3}), 1, i64({5}, {1})); });
  EXPECT_NE(m.find("index 5 at position 0 is out of range for dim 1 of size 3"), std::string::npos) << m;
}

TEST(IndexSelect, ArgumentErrors) {
  const Tensor x = Tensor::zeros({2, 3});
  EXPECT_NE(error_of([&] { index_select(x, 2, i64({0}, {1})); }).find("dim 2 out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { index_select(x, -3, i64({0}, {1})); }).find("dim -3 out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { index_select(x, 0, f32({0}, {1})); }).find("index must be i64 or i32, got f32"),
            std::string::npos);
  EXPECT_NE(error_of([&] { index_select(x, 0, i64({0, 1}, {1, 2})); }).find("index must be 1-d, got shape (1, 2)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { index_select(Tensor::scalar(1.0), 0, i64({0}, {1})); }).find("0-d"), std::string::npos);
}

// ---- index_copy_ ----

TEST(IndexCopy, Dim0WritesRowsAndLeavesTheOthers) {
  Tensor dst = f32({0, 1, 10, 11, 20, 21}, {3, 2});
  Tensor& ret = index_copy_(dst, 0, i64({2, 0}, {2}), f32({-1, -2, -3, -4}, {2, 2}));
  EXPECT_EQ(&ret, &dst);
  EXPECT_TRUE(values_near(dst, {3, 2}, {-3, -4, 10, 11, -1, -2}));
  index_copy_(dst, 0, i32({1}, {1}), f32({7, 8}, {1, 2}));
  EXPECT_TRUE(values_near(dst, {3, 2}, {-3, -4, 7, 8, -1, -2}));
}

TEST(IndexCopy, MiddleDimWritesSlotsOfEveryBatchRow) {
  // A key/value cache (N, capacity, d) = (2, 4, 3): slots 3 and 1 of both rows.
  Tensor dst = iota_f64({2, 4, 3});
  index_copy_(dst, 1, i64({3, 1}, {2}), f64({100, 101, 102, 110, 111, 112, 200, 201, 202, 210, 211, 212}, {2, 2, 3}));
  EXPECT_TRUE(values_near(dst, {2, 4, 3},
                          {0, 1, 2, 110, 111, 112, 6, 7, 8, 100, 101, 102,
                           12, 13, 14, 210, 211, 212, 18, 19, 20, 200, 201, 202}, 0, 0));
  // One slot, as the cache's write of a decoding step: (N, 1, d) rows into slot 2.
  index_copy_(dst, 1, i64({2}, {1}), f64({-1, -2, -3, -4, -5, -6}, {2, 1, 3}));
  EXPECT_TRUE(values_near(dst, {2, 4, 3},
                          {0, 1, 2, 110, 111, 112, -1, -2, -3, 100, 101, 102,
                           12, 13, 14, 210, 211, 212, -4, -5, -6, 200, 201, 202}, 0, 0));
}

TEST(IndexCopy, LastAndNegativeDims) {
  Tensor x = Tensor::zeros({2, 3});
  index_copy_(x, -1, i64({2, 0}, {2}), f32({1, 2, 3, 4}, {2, 2}));
  EXPECT_TRUE(values_near(x, {2, 3}, {2, 0, 1, 4, 0, 3}));
  Tensor y = Tensor::zeros({2, 3});
  index_copy_(y, 1, i64({2, 0}, {2}), f32({1, 2, 3, 4}, {2, 2}));
  EXPECT_TRUE(tensors_near(y, x, 0, 0));
  index_copy_(y, -2, i64({1}, {1}), f32({7, 8, 9}, {1, 3}));
  EXPECT_TRUE(values_near(y, {2, 3}, {2, 0, 1, 7, 8, 9}));
  Tensor v = f64({5, 6, 7}, {3});  // 1-d: dim 0 is the last
  index_copy_(v, -1, i32({1}, {1}), f64({9}, {1}));
  EXPECT_TRUE(values_near(v, {3}, {5, 9, 7}));
}

TEST(IndexCopy, I32AndI64IndicesAgreeWithTheReferenceOnEveryDim) {
  const Tensor x = iota_f64({3, 4, 5});
  for (int dim = -3; dim < 3; ++dim) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    const int d = dim < 0 ? dim + 3 : dim;
    const std::vector<int64_t> idx = {x.size(d) - 1, 0, 1};
    Shape src_shape = x.shape();
    src_shape[d] = 3;
    const Tensor src = mul_scalar(iota_f64(src_shape), -1.0);
    Tensor a = x.clone(), b = x.clone();
    index_copy_(a, dim, i64(idx, {3}), src);
    index_copy_(b, dim, i32(std::vector<int32_t>(idx.begin(), idx.end()), {3}), src);
    EXPECT_TRUE(values_near(a, x.shape(), scatter_reference(x, d, idx, src), 0, 0));
    EXPECT_TRUE(tensors_near(b, a, 0, 0));
  }
}

TEST(IndexCopy, RepeatedIndicesTheLastWriteWins) {
  Tensor dst = Tensor::zeros({3, 2}, DType::F64);
  index_copy_(dst, 0, i64({1, 0, 1, 1}, {4}), f64({1, 1, 2, 2, 3, 3, 4, 4}, {4, 2}));
  EXPECT_TRUE(values_near(dst, {3, 2}, {2, 2, 4, 4, 0, 0}));
  // Along the last dim of (2, 3): columns 2, 2, 0 -> column 2 takes the second.
  Tensor y = Tensor::zeros({2, 3}, DType::F64);
  index_copy_(y, -1, i32({2, 2, 0}, {3}), f64({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_TRUE(values_near(y, {2, 3}, {3, 0, 2, 6, 0, 5}));
}

TEST(IndexCopy, LargeScatterWithRepeatsIsThreadCountIndependent) {
  Generator gen(6);
  const Tensor base = Tensor::uniform({6, 200, 70}, -1, 1, DType::F32, gen);
  std::vector<int64_t> idx(500);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>((i * 37) % 13) * 15;  // 13 distinct rows
  const Tensor src = Tensor::uniform({6, 500, 70}, -1, 1, DType::F32, gen);
  const int before = num_threads();
  std::vector<std::vector<float>> outs;
  for (int threads : {1, 0}) {
    set_num_threads(threads);
    Tensor dst = base.clone();
    index_copy_(dst, 1, i64(idx, {500}), src);
    outs.push_back(dst.to_vector<float>());
  }
  set_num_threads(before);
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_TRUE(values_near(Tensor::from_vector(outs[0], {6, 200, 70}), {6, 200, 70},
                          scatter_reference(base, 1, idx, src), 0, 0));
}

TEST(IndexCopy, IntegerValuesAndEmptyIndex) {
  Tensor tokens = i64({1, 2, 3, 4, 5, 6}, {3, 2});
  index_copy_(tokens, 0, i64({0}, {1}), i64({9, 8}, {1, 2}));
  EXPECT_EQ(tokens.to_vector<int64_t>(), (std::vector<int64_t>{9, 8, 3, 4, 5, 6}));
  // An empty index writes nothing.
  Tensor x = iota_f64({2, 3, 2});
  index_copy_(x, 1, i64({}, {0}), Tensor::zeros({2, 0, 2}, DType::F64));
  EXPECT_TRUE(tensors_near(x, iota_f64({2, 3, 2}), 0, 0));
}

TEST(IndexCopy, CpuIndexWithCpuDst) {
  // Index, dst and src all on the CPU: the kernel checks and writes on the host.
  Tensor dst = Tensor::zeros({2, 2, 2}, DType::F64);
  const Tensor index = i64({1}, {1});
  ASSERT_TRUE(index.device().is_cpu() && dst.device().is_cpu());
  index_copy_(dst, 2, index, f64({1, 2, 3, 4}, {2, 2, 1}));
  EXPECT_TRUE(values_near(dst, {2, 2, 2}, {0, 1, 0, 2, 0, 3, 0, 4}));
}

TEST(IndexCopy, OutOfRangeIndexIsRefusedBeforeAnythingIsWritten) {
  Tensor x = Tensor::zeros({2, 3, 4});
  std::string m = error_of([&] { index_copy_(x, 1, i64({0, 3}, {2}), Tensor::ones({2, 2, 4})); });
  EXPECT_NE(m.find("index_copy_: index 3 at position 1 is out of range for dim 1 of size 3"), std::string::npos) << m;
  EXPECT_TRUE(tensors_near(x, Tensor::zeros({2, 3, 4}), 0, 0)) << "position 0 was valid but nothing is written";
  m = error_of([&] { index_copy_(x, -1, i32({2, -1, 9}, {3}), Tensor::ones({2, 3, 3})); });
  EXPECT_NE(m.find("index -1 at position 1 is out of range for dim 2 of size 4"), std::string::npos) << m;
  // Checked even when src has no elements.
  Tensor e = Tensor::zeros({0, 3});
  m = error_of([&] { index_copy_(e, 1, i64({5}, {1}), Tensor::zeros({0, 1})); });
  EXPECT_NE(m.find("index_copy_: index 5 at position 0 is out of range for dim 1 of size 3"), std::string::npos) << m;
}

TEST(IndexCopy, ArgumentErrors) {
  Tensor x = Tensor::zeros({2, 3});
  const Tensor row = Tensor::zeros({1, 3});
  EXPECT_NE(error_of([&] { index_copy_(x, 2, i64({0}, {1}), row); }).find("dim 2 out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { index_copy_(x, -3, i64({0}, {1}), row); }).find("dim -3 out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { index_copy_(x, 0, f32({0}, {1}), row); }).find("index must be i64 or i32, got f32"),
            std::string::npos);
  EXPECT_NE(error_of([&] { index_copy_(x, 0, i64({0}, {1, 1}), row); }).find("index must be 1-d, got shape (1, 1)"),
            std::string::npos);
  Tensor s = Tensor::scalar(1.0);
  EXPECT_NE(error_of([&] { index_copy_(s, 0, i64({0}, {1}), row); }).find("0-d"), std::string::npos);
  std::string m = error_of([&] { index_copy_(x, 0, i64({0, 1}, {2}), row); });
  EXPECT_NE(m.find("src must be dst's shape with size(0) = index.numel() = 2, i.e. (2, 3), got (1, 3)"),
            std::string::npos) << m;
  m = error_of([&] { index_copy_(x, 0, i64({0}, {1}), Tensor::zeros({1, 3}, DType::F64)); });
  EXPECT_NE(m.find("index_copy_: dtypes f32 and f64 differ"), std::string::npos) << m;
  m = error_of([&] { index_copy_(x, 0, i64({0}, {1}), x.narrow0(1, 1)); });
  EXPECT_NE(m.find("src shares dst's storage"), std::string::npos) << m;
}

TEST(IndexCopy, RefusedWithGradAndRecordsNoHistory) {
  Tensor src = f64({1, 2}, {1, 2});
  src.set_requires_grad(true);
  Tensor dst = Tensor::zeros({2, 2}, DType::F64);
  std::string m = error_of([&] { index_copy_(dst, 0, i64({1}, {1}), src); });
  EXPECT_NE(m.find("index_copy_: src requires grad and grad mode is on"), std::string::npos) << m;
  EXPECT_TRUE(tensors_near(dst, Tensor::zeros({2, 2}, DType::F64), 0, 0));
  // A non-leaf src (with a grad_fn) is refused the same way.
  m = error_of([&] { index_copy_(dst, 0, i64({1}, {1}), mul(src, src)); });
  EXPECT_NE(m.find("src requires grad and grad mode is on"), std::string::npos) << m;
  // Detached, or with grad mode off, it writes and records nothing.
  index_copy_(dst, 0, i64({1}, {1}), src.detach());
  EXPECT_TRUE(values_near(dst, {2, 2}, {0, 0, 1, 2}));
  {
    autograd::NoGradGuard no_grad;
    index_copy_(dst, 0, i64({0}, {1}), src);
  }
  EXPECT_TRUE(values_near(dst, {2, 2}, {1, 2, 1, 2}));
  EXPECT_FALSE(dst.requires_grad());
  EXPECT_EQ(dst.grad_fn(), nullptr);
  // A dst that requires grad is refused, with grad mode on or off.
  Tensor leaf = Tensor::zeros({2, 2}, DType::F64);
  leaf.set_requires_grad(true);
  m = error_of([&] { index_copy_(leaf, 0, i64({0}, {1}), src.detach()); });
  EXPECT_NE(m.find("index_copy_: dst requires grad"), std::string::npos) << m;
  autograd::NoGradGuard no_grad;
  m = error_of([&] { index_copy_(leaf, 0, i64({0}, {1}), src.detach()); });
  EXPECT_NE(m.find("index_copy_: dst requires grad"), std::string::npos) << m;
  EXPECT_TRUE(tensors_near(leaf, Tensor::zeros({2, 2}, DType::F64), 0, 0));
}

// ---- topk ----

TEST(TopK, PicksLargestPerRowInOrder) {
  const Tensor x = f32({1, 5, 3, 4, 2, -1, -3, 0, 7, 6}, {2, 5});
  const TopK r = topk(x, 2);
  EXPECT_TRUE(values_near(r.values, {2, 2}, {5, 4, 7, 6}));
  EXPECT_EQ(r.indices.dtype(), DType::I64);
  EXPECT_EQ(r.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 3, 4}));
  // Leading dims are kept: (2, 1, 5) -> (2, 1, 3).
  const TopK r3 = topk(x.view({2, 1, 5}), 3);
  EXPECT_EQ(r3.values.shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(r3.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 2, 3, 4, 2}));
}

TEST(TopK, KOneIsArgmaxAndKEqualCIsAFullSort) {
  const Tensor x = f64({0.5, -2, 9, 3, 3.5, -7}, {6});
  const TopK one = topk(x, 1);
  EXPECT_TRUE(values_near(one.values, {1}, {9}));
  EXPECT_EQ(one.indices.to_vector<int64_t>(), (std::vector<int64_t>{2}));
  const TopK all = topk(x, 6);
  EXPECT_TRUE(values_near(all.values, {6}, {9, 3.5, 3, 0.5, -2, -7}));
  EXPECT_EQ(all.indices.to_vector<int64_t>(), (std::vector<int64_t>{2, 4, 3, 0, 1, 5}));
}

TEST(TopK, TiesGoToTheSmallerIndex) {
  const TopK r = topk(f32({1, 3, 3, 2, 3}, {5}), 4);
  EXPECT_TRUE(values_near(r.values, {4}, {3, 3, 3, 2}));
  EXPECT_EQ(r.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 4, 3}));
  // -0 and +0 are equal values: ordered by index, each keeping its own sign.
  const TopK z = topk(f64({0.0, -0.0, -1, 0.0}, {4}), 4);
  EXPECT_EQ(z.indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 3, 2}));
  EXPECT_TRUE(std::signbit(z.values.to_vector<double>()[1]));
  // All equal: the identity order.
  EXPECT_EQ(topk(Tensor::ones({7}), 7).indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(TopK, NaNCountsAsLargestAndInfinitiesOrder) {
  const TopK r = topk(f32({1, kNaN, 5, kNaN, -kInf, kInf}, {6}), 6);
  EXPECT_EQ(r.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 5, 2, 0, 4}));
  const std::vector<float> v = r.values.to_vector<float>();
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
  EXPECT_EQ(v[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[3], 5.0f);
  EXPECT_EQ(v[5], -std::numeric_limits<float>::infinity());
  const TopK one = topk(f64({3, -kNaN, 4}, {3}), 1);  // a NaN with its sign bit set counts the same
  EXPECT_EQ(one.indices.to_vector<int64_t>(), (std::vector<int64_t>{1}));
}

TEST(TopK, RadixKeyAgreesWithTheOrder) {
  // The CUDA kernel sorts by topk_sort_key; it must rank exactly as topk_ranks_before, ties included.
  const double tiny = std::numeric_limits<double>::denorm_min(), big = std::numeric_limits<double>::max();
  const std::vector<double> special = {kNaN, -kNaN, kInf, -kInf, 0.0, -0.0, 1.0, -1.0, 1.5, -1.5, tiny, -tiny,
                                       big, -big, 1e-30, -1e-30, 3e38, -3e38, 1e300, -1e300};
  for (double a : special)
    for (double b : special) {
      SCOPED_TRACE(::testing::Message() << a << " vs " << b);
      const bool tie64 = topk_ranks_before(a, 0, b, 1) && topk_ranks_before(b, 0, a, 1);
      EXPECT_EQ(topk_sort_key(a) == topk_sort_key(b), tie64);
      if (!tie64) {
        EXPECT_EQ(topk_sort_key(a) > topk_sort_key(b), topk_ranks_before(a, 0, b, 1));
      }
      const float fa = to_float(a), fb = to_float(b);
      const bool tie32 = topk_ranks_before(fa, 0, fb, 1) && topk_ranks_before(fb, 0, fa, 1);
      EXPECT_EQ(topk_sort_key(fa) == topk_sort_key(fb), tie32);
      if (!tie32) {
        EXPECT_EQ(topk_sort_key(fa) > topk_sort_key(fb), topk_ranks_before(fa, 0, fb, 1));
      }
    }
}

TEST(TopK, MatchesStableSortReferenceWithTiesAndNaN) {
  // Values on a coarse grid (many ties) with some NaN and -0, every k from small to C.
  Generator gen(9);
  const int64_t rows = 7, C = 300;
  std::vector<double> u = Tensor::uniform({rows, C}, -4, 4, DType::F64, gen).to_vector<double>();
  for (size_t i = 0; i < u.size(); ++i) {
    u[i] = std::round(u[i] * 2) / 2;
    if (i % 41 == 5) u[i] = kNaN;
    if (u[i] == 0 && i % 2) u[i] = -0.0;
  }
  for (DType dt : {DType::F32, DType::F64})
    for (int64_t k : {1, 2, 17, 150, 299, 300}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " k " << k);
      const TopK r = topk(Tensor::from_vector(u, {rows, C}, dt), k);
      ASSERT_EQ(r.values.shape(), (Shape{rows, k}));
      const std::vector<double> got_v = r.values.to_vector<double>();
      const std::vector<int64_t> got_i = r.indices.to_vector<int64_t>();
      for (int64_t row = 0; row < rows; ++row) {
        std::vector<double> ref_v;
        std::vector<int64_t> ref_i;
        topk_reference(std::vector<double>(u.begin() + row * C, u.begin() + (row + 1) * C), k, ref_v, ref_i);
        for (int64_t j = 0; j < k; ++j) {
          ASSERT_EQ(got_i[row * k + j], ref_i[j]) << "row " << row << " slot " << j;
          ASSERT_TRUE(same_bits_or_nan(got_v[row * k + j], ref_v[j])) << "row " << row << " slot " << j;
        }
      }
    }
}

TEST(TopK, BackwardScattersIntoZeros) {
  Tensor x = f64({1, 5, 3, 4, 2, -1, -3, 0, 7, 6}, {2, 5});
  x.set_requires_grad(true);
  const TopK r = topk(x, 2);
  EXPECT_FALSE(r.indices.requires_grad());
  autograd::backward(sum(mul(r.values, f64({10, 20, 30, 40}, {2, 2}))));
  EXPECT_TRUE(values_near(x.grad(), {2, 5}, {0, 10, 0, 20, 0, 0, 0, 0, 30, 40}));
}

TEST(TopK, KOutOfRangeAndBadInputsAreErrors) {
  const Tensor x = Tensor::zeros({2, 4});
  EXPECT_NE(error_of([&] { topk(x, 0); }).find("topk: k = 0 must be in [1, 4]"), std::string::npos);
  EXPECT_NE(error_of([&] { topk(x, 5); }).find("topk: k = 5 must be in [1, 4]"), std::string::npos);
  EXPECT_NE(error_of([&] { topk(Tensor::zeros({3, 0}), 1); }).find("k = 1 must be in [1, 0]"), std::string::npos);
  EXPECT_NE(error_of([&] { topk(Tensor::scalar(1.0), 1); }).find("0-d"), std::string::npos);
  EXPECT_NE(error_of([&] { topk(i64({1, 2}, {2}), 1); }).find("floating"), std::string::npos);
  // No rows: an empty result of the right shape.
  EXPECT_EQ(topk(Tensor::zeros({0, 4}), 2).values.shape(), (Shape{0, 2}));
}
