// Helpers shared by the tests: tensor comparisons with readable failures, and random inputs.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/tensor.h"
#include "ops/matmul.h"
#include "ops/shape_ops.h"
#include "optim/optimizer.h"

namespace sru::testing {

// The options of optimiser `kind` with weight decay wd (SGD with momentum 0.9), excluding the parameters
// whose names contain one of `exclude`.
inline optim::OptimizerOptions options_with_decay(const std::string& kind, double wd,
                                                  std::vector<std::string> exclude = {}) {
  optim::OptimizerOptions o;
  o.kind = kind;
  o.momentum = kind == "sgd" ? 0.9 : 0.0;
  o.weight_decay = wd;
  o.weight_decay_exclude = std::move(exclude);
  return o;
}

// Sets the process's matmul precision (train.precision) for one scope, then puts back the one before.
class PrecisionScope {
 public:
  explicit PrecisionScope(MatmulPrecision p) : before_(matmul_precision()) { set_matmul_precision(p); }
  ~PrecisionScope() { set_matmul_precision(before_); }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  MatmulPrecision before_;
};

// Tensors of literal values for the tests, one per dtype: f64({1, 2, 3, 4}, {2, 2}), i64({2, 0}, {2}).
inline Tensor f32(std::vector<double> v, Shape s) { return Tensor::from_vector(v, s, DType::F32); }
inline Tensor f64(std::vector<double> v, Shape s) { return Tensor::from_vector(v, s, DType::F64); }
inline Tensor i64(std::vector<int64_t> v, Shape s) { return Tensor::from_vector(v, s, DType::I64); }
inline Tensor i32(std::vector<int32_t> v, Shape s) { return Tensor::from_vector(v, s, DType::I32); }

// Asserts t has `shape` and its values equal `expected` within atol + rtol * |expected| (equal
// infinities match).
inline ::testing::AssertionResult values_near(const Tensor& t, const Shape& shape, const std::vector<double>& expected,
                                              double atol = 1e-6, double rtol = 1e-6) {
  if (t.shape() != shape)
    return ::testing::AssertionFailure() << "shape " << shape_str(t.shape()) << ", expected " << shape_str(shape);
  const auto v = t.to_vector<double>();
  if (v.size() != expected.size())
    return ::testing::AssertionFailure() << v.size() << " values, expected " << expected.size();
  for (size_t i = 0; i < v.size(); ++i)
    if (!(v[i] == expected[i] || std::abs(v[i] - expected[i]) <= atol + rtol * std::abs(expected[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << v[i] << " vs expected " << expected[i];
  return ::testing::AssertionSuccess();
}

// Asserts two tensors have equal shapes and values within tolerance.
// The largest |a - reference| over the largest |reference| (at least 1e-6): a low-precision run's error
// on the scale of the float32 values it approximates, not element by element.
inline double max_error_over_largest(const Tensor& a, const Tensor& reference) {
  const std::vector<double> x = a.to(Device::cpu()).to_vector<double>(), y = reference.to(Device::cpu()).to_vector<double>();
  double diff = 0, scale = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return diff / scale;
}

inline ::testing::AssertionResult tensors_near(const Tensor& a, const Tensor& b, double atol = 1e-6,
                                               double rtol = 1e-6) {
  return values_near(a, b.shape(), b.to_vector<double>(), atol, rtol);
}

// A random f64 leaf in [low, high) that requires grad, for gradient checks.
inline Tensor leaf(const Shape& shape, uint64_t seed, double low = -1.0, double high = 1.0) {
  Generator gen(seed);
  Tensor t = Tensor::uniform(shape, low, high, DType::F64, gen);
  t.set_requires_grad(true);
  return t;
}

// For gradient checks of the recurrences at L = 4, B = 2: a float64 dropout mask (2, width) of ones with
// one 0 and one 2, and a padding mask (4, 2) whose second sequence ends after 2 steps.
struct MaskAndPadding {
  Tensor mask, padding;
};
inline MaskAndPadding gradcheck_mask_and_padding(int64_t width) {
  MaskAndPadding m;
  m.mask = Tensor::from_vector(std::vector<double>(2 * width, 1.0), {2, width});
  m.mask.data<double>()[1] = 0.0;
  m.mask.data<double>()[2] = 2.0;
  m.padding = Tensor::from_vector(std::vector<int64_t>{0, 0, 0, 0, 0, 1, 0, 1}, {4, 2});
  return m;
}

// The error message thrown by fn, or "" when it does not throw sru::Error.
template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A directory of this process's own under gtest's TempDir(): ctest runs each test and its nanfill.* twin
// at the same time, so files with fixed names must not share one directory.
// Feeds consecutive pieces of the time axis: run_piece(t, t + n) for each n of `pieces` in order (a
// stateful decoder carries its state between them); returns the outputs joined along dim 0.
template <typename RunPiece>
Tensor joined_over_pieces(const std::vector<int64_t>& pieces, RunPiece&& run_piece) {
  std::vector<Tensor> outs;
  int64_t t = 0;
  for (int64_t n : pieces) {
    outs.push_back(run_piece(t, t + n));
    t += n;
  }
  return concat(outs, 0);
}

inline const std::string& tmp_dir() {
  static const std::string dir = [] {
    const std::string d = ::testing::TempDir() + "srutrain-test-" + std::to_string(::getpid()) + "/";
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Writes bytes to a file named `name` in this process's temporary directory; returns its path.
inline std::string temp_file(const std::string& name, const std::string& bytes) {
  const std::string path = tmp_dir() + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// n "LABEL text" lines (the classify format) of 1..max_words filler words w0..w<vocabulary-1> ending in
// "yes" (label 1) or "no" (label 0): only the last word tells the class, so a model must read each
// sentence's state at its own last word.
inline std::string last_word_sentences(int n, uint32_t seed, int max_words = 12, int vocabulary = 20) {
  std::mt19937 rng(seed);
  std::string out;
  for (int i = 0; i < n; ++i) {
    const int label = static_cast<int>(rng() % 2), len = 1 + static_cast<int>(rng() % max_words);
    out += std::to_string(label);
    for (int w = 0; w < len; ++w) out += " w" + std::to_string(rng() % vocabulary);
    out += label ? " yes\n" : " no\n";
  }
  return out;
}

// Expects f's autograd gradients to match central finite differences (autograd/gradcheck.h).
inline void expect_gradients_match(const autograd::SingleFn& f, const std::vector<Tensor>& inputs) {
  const auto r = autograd::gradcheck(f, inputs);
  EXPECT_TRUE(r.ok) << r.message << "max abs error " << r.max_abs_error;
}
inline void expect_gradients_match(const autograd::MultiFn& f, const std::vector<Tensor>& inputs) {
  const auto r = autograd::gradcheck(f, inputs);
  EXPECT_TRUE(r.ok) << r.message << "max abs error " << r.max_abs_error;
}

}  // namespace sru::testing
