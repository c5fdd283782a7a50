// The op table's harness on the CPU (ops/op_table.h): every entry, every case, in the forward mode
// (float32, and bf16 storage where the entry takes it, forward and backward, against float64 on the
// same values) and the gradient mode (float64 central differences); and the coverage checks: every
// kernel that SRU_KERNEL reaches belongs to an entry (or is listed as outside the table, with the tests
// that cover it), every kernel an entry names exists, and every entry has every mode. The parity mode is
// tests/parity/test_cuda_op_table.cpp; the bench mode `srubench ops` (e2e: app_srubench_ops).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "autograd/engine.h"
#include "ops/op_table.h"
#include "ops/ops.h"
#include "testing.h"

using namespace sru;

namespace {

// The SRU_KERNEL / SRU_KERNEL_IN base names used anywhere under src/, with a file that uses each.
std::map<std::string, std::string> dispatched_kernels() {
  std::map<std::string, std::string> found;
#ifdef SRU_SOURCE_DIR
  // An argument: anything but commas, with calls one level deep (the device is often x.device()).
  const std::string arg = R"((?:[^,()]|\([^()]*\))+)";
  const std::regex kernel("SRU_KERNEL\\(" + arg + ",\\s*([a-z_0-9]+)\\s*[,)]");
  const std::regex kernel_in("SRU_KERNEL_IN\\(" + arg + "," + arg + ",\\s*([a-z_0-9]+)\\s*[,)]");
  for (const auto& file : std::filesystem::recursive_directory_iterator(std::string(SRU_SOURCE_DIR) + "/src")) {
    const std::string ext = file.path().extension().string();
    // dispatch.h defines the macros (its comments and definitions name no kernel).
    if ((ext != ".cpp" && ext != ".h") || file.path().filename() == "dispatch.h") continue;
    std::ifstream in(file.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (const std::regex* re : {&kernel, &kernel_in})
      for (auto it = std::sregex_iterator(s.begin(), s.end(), *re); it != std::sregex_iterator(); ++it)
        found.emplace((*it)[1].str(), file.path().filename().string());
  }
#endif
  return found;
}

// |a - b| <= tol (1 + |b|) everywhere, and the same shapes; the first mismatch otherwise.
std::string compare(const Tensor& a, const Tensor& b, double tol) {
  if (a.shape() != b.shape()) return "shapes differ: " + a.str() + " vs " + b.str();
  const std::vector<double> x = a.to(DType::F64).to_vector<double>(), y = b.to(DType::F64).to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (!(std::abs(x[i] - y[i]) <= tol * (1.0 + std::abs(y[i]))))
      return "element " + std::to_string(i) + ": " + std::to_string(x[i]) + " vs float64 " + std::to_string(y[i]);
  return "";
}

}  // namespace

TEST(OpTable, EveryDispatchedKernelBelongsToAnEntryAndEveryNamedKernelExists) {
#ifndef SRU_SOURCE_DIR
  GTEST_SKIP() << "built without SRU_SOURCE_DIR";
#endif
  const auto dispatched = dispatched_kernels();
  ASSERT_GT(dispatched.size(), 30u) << "the scan of src/ for SRU_KERNEL found too few kernels";
  std::set<std::string> claimed;
  for (const OpEntry& e : op_table()) claimed.insert(e.kernels.begin(), e.kernels.end());
  for (const KernelOutsideTable& k : kernels_outside_op_table()) claimed.insert(k.kernel);
  for (const auto& [kernel, file] : dispatched) {
    EXPECT_TRUE(claimed.count(kernel)) << "kernel " << kernel << " (" << file << ") belongs to no op table entry: "
                                       << "add the op to src/ops/op_table.cpp (docs/architecture.md, Adding an op)";
  }
  for (const std::string& kernel : claimed)
    EXPECT_TRUE(dispatched.count(kernel)) << "the op table names kernel " << kernel << ", which no SRU_KERNEL call reaches";
}

TEST(OpTable, EveryEntryHasEveryMode) {
  std::set<std::string> names;
  for (const OpEntry& e : op_table()) {
    SCOPED_TRACE(e.name);
    EXPECT_TRUE(names.insert(e.name).second) << "two entries named " << e.name;
    EXPECT_FALSE(e.kernels.empty());
    EXPECT_TRUE(std::count(e.dtypes.begin(), e.dtypes.end(), DType::F32) && std::count(e.dtypes.begin(), e.dtypes.end(), DType::F64))
        << "every op computes in float32 and float64 (the gradient check's dtype)";
    EXPECT_FALSE(e.cases.empty()) << "no cases: no forward, gradient or parity check";
    for (const OpCase& c : e.cases) EXPECT_TRUE(c.run && !c.inputs.empty()) << c.label;
    EXPECT_TRUE(e.bench.run && !e.bench.inputs.empty()) << "no bench case";
  }
  EXPECT_GE(op_table().size(), 40u);
}

class OpTableEntry : public ::testing::TestWithParam<size_t> {
 protected:
  const OpEntry& entry() const { return op_table()[GetParam()]; }
};

// Each dtype the entry lists against float64 on the same drawn values (16-bit storage: on the rounded
// values, within bf16's half ulp of the outputs).
TEST_P(OpTableEntry, ForwardAgreesWithFloat64) {
  uint64_t seed = 100;
  for (const OpCase& c : entry().cases) {
    ++seed;
    for (const DType dtype : entry().dtypes) {
      if (dtype == DType::F64) continue;
      SCOPED_TRACE(c.label + " at " + std::string(dtype_name(dtype)));
      const std::vector<Tensor> inputs = make_op_inputs(c, dtype, Device::cpu(), seed);
      std::vector<Tensor> reference_inputs;
      for (const Tensor& x : inputs) {
        Tensor r = x.detach().to(DType::F64).clone();
        r.set_requires_grad(true);
        reference_inputs.push_back(r);
      }
      const std::vector<Tensor> out = c.run(inputs, make_op_fixed(c, inputs));
      const std::vector<Tensor> reference = c.run(reference_inputs, make_op_fixed(c, reference_inputs));
      ASSERT_EQ(out.size(), reference.size());
      const double tol = dtype == DType::F32 ? 2e-5 : 1e-2;
      for (size_t i = 0; i < out.size(); ++i) {
        const std::string diff = compare(out[i], reference[i], tol);
        EXPECT_TRUE(diff.empty()) << "output " << i << ": " << diff;
      }
      if (dtype == DType::F32 || !entry().differentiable) continue;
      // 16-bit storage: backward too, each output's cotangent drawn in float32 and stored in its dtype (as
      // the CUDA parity mode seeds it), against float64's backward from the same cotangents.
      std::vector<Tensor> roots, seeds, reference_roots, reference_seeds;
      for (size_t i = 0; i < out.size(); ++i) {
        if (!out[i].requires_grad()) continue;
        Generator gen(100 + i);
        const Tensor w = Tensor::uniform(out[i].shape(), -1, 1, DType::F32, gen).to(out[i].dtype());
        roots.push_back(out[i]);
        seeds.push_back(w);
        reference_roots.push_back(reference[i]);
        reference_seeds.push_back(w.to(DType::F64));
      }
      autograd::backward(roots, seeds);
      autograd::backward(reference_roots, reference_seeds);
      for (size_t i = 0; i < inputs.size(); ++i) {
        const std::string diff = compare(inputs[i].grad(), reference_inputs[i].grad(), tol);
        EXPECT_TRUE(diff.empty()) << "gradient of input " << i << ": " << diff;
      }
    }
  }
}

TEST_P(OpTableEntry, GradientsMatchFiniteDifferencesInFloat64) {
  if (!entry().differentiable) GTEST_SKIP() << entry().name << " is not differentiable";
  uint64_t seed = 200;
  for (const OpCase& c : entry().cases) {
    SCOPED_TRACE(c.label);
    const std::vector<Tensor> inputs = make_op_inputs(c, DType::F64, Device::cpu(), ++seed);
    const std::vector<Tensor> fixed = make_op_fixed(c, inputs);
    sru::testing::expect_gradients_match([&](const std::vector<Tensor>& x) { return c.run(x, fixed); }, inputs);
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTableEntry, ::testing::Range<size_t>(0, op_table().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) { return op_table_identifier(info.param); });

// The bf16 kernels compute in float32 and round once: each output's bits equal round-to-nearest-even of
// the float32 math on the same (bf16) operands, as the CUDA twins compute it.
TEST(Bf16Kernels, ElementWiseOutputsAreTheFloat32MathRoundedOnce) {
  Generator gen(5);
  const Tensor a = Tensor::uniform({257}, -2, 2, DType::F32, gen).to(DType::BF16);
  const Tensor b = Tensor::uniform({257}, 0.5, 2, DType::F32, gen).to(DType::BF16);
  const std::vector<float> fa = a.to(DType::F32).to_vector<float>(), fb = b.to(DType::F32).to_vector<float>();
  const auto expect_rounded = [&](const Tensor& out, const std::function<float(float, float)>& math, const char* what) {
    ASSERT_EQ(out.dtype(), DType::BF16) << what;
    const std::vector<float> got = out.to(DType::F32).to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], round_to_bf16(math(fa[i], fb[i]))) << what << " at " << i << ": " << fa[i] << ", " << fb[i];
  };
  expect_rounded(add(a, b), [](float x, float y) { return x + y; }, "add");
  expect_rounded(mul(a, b), [](float x, float y) { return x * y; }, "mul");
  expect_rounded(div(a, b), [](float x, float y) { return x / y; }, "div");
  expect_rounded(mul_scalar(a, 0.3), [](float x, float) { return x * 0.3f; }, "mul_scalar");
  expect_rounded(tanh(a), [](float x, float) { return std::tanh(x); }, "tanh");
  expect_rounded(exp(a), [](float x, float) { return std::exp(x); }, "exp");
}

// Runs f, which must throw sru::Error with `expected` in its message.
static void expect_error_containing(const std::function<void()>& f, const std::string& expected) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one saying: " << expected;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

// What autocast keeps in float32 stays float32 beside bf16 storage; ops without bf16 kernels refuse it.
TEST(Bf16Kernels, LossesStatisticsAndWeightsStayFloat32) {
  Generator gen(6);
  Tensor logits = Tensor::uniform({4, 5}, -2, 2, DType::F32, gen).to(DType::BF16);
  logits.set_requires_grad(true);
  const Tensor target = Tensor::from_vector(std::vector<int64_t>{0, 4, 2, 1}, {4});
  const Tensor loss = cross_entropy(logits, target);
  EXPECT_EQ(loss.dtype(), DType::F32);
  autograd::backward({loss}, {Tensor::ones({}, DType::F32)});
  EXPECT_EQ(logits.grad().dtype(), DType::BF16);

  Tensor x = Tensor::uniform({3, 8}, -1, 1, DType::F32, gen).to(DType::BF16);
  Tensor w = Tensor::ones({8}, DType::F32), bias = Tensor::zeros({8}, DType::F32);
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  const Tensor y = layer_norm(x, w, bias);
  EXPECT_EQ(y.dtype(), DType::BF16);
  autograd::backward({y}, {Tensor::ones(y.shape(), DType::BF16)});
  EXPECT_EQ(x.grad().dtype(), DType::BF16);
  EXPECT_EQ(w.grad().dtype(), DType::F32);
  const Tensor xd = x.detach(), wd = w.detach();
  expect_error_containing([&] { layer_norm(xd, wd.to(DType::BF16), Tensor()); }, "weight/bias must be f32 with x of bf16");
  expect_error_containing([&] { topk(xd, 2); }, "expected a floating tensor (f32 or f64), got bf16");
}

// Where bf16 meets float32 (a bf16 run's sublayer answer beside its float32 residual stream): the
// element-wise ops and concat promote to float32, as PyTorch does, each gradient coming back in its
// operand's dtype; under autocast (precision bf16) a product takes both operands as bf16, outside it a
// mix is refused by name; float32 beside float64 stays an error everywhere.
TEST(Bf16Kernels, Bf16BesideFloat32PromotesAndProductsUnderAutocastTakeBothAsBf16) {
  struct RestorePrecision {
    ~RestorePrecision() { set_matmul_precision(MatmulPrecision::Highest); }
  } restore;
  Generator gen(7);
  Tensor a = Tensor::uniform({3, 4}, -1, 1, DType::F32, gen).to(DType::BF16);
  Tensor b = Tensor::uniform({3, 4}, -1, 1, DType::F32, gen);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  const std::vector<float> fa = a.to(DType::F32).to_vector<float>(), fb = b.to_vector<float>();
  const Tensor sum_ab = add(a, b), product_ba = mul(b, a);
  ASSERT_EQ(sum_ab.dtype(), DType::F32);
  ASSERT_EQ(product_ba.dtype(), DType::F32);
  const std::vector<float> s = sum_ab.to_vector<float>(), p = product_ba.to_vector<float>();
  for (size_t i = 0; i < s.size(); ++i) {
    ASSERT_EQ(s[i], fa[i] + fb[i]) << i;
    ASSERT_EQ(p[i], fb[i] * fa[i]) << i;
  }
  autograd::backward({sum(sum_ab)}, {Tensor::ones({}, DType::F32)});
  EXPECT_EQ(a.grad().dtype(), DType::BF16);
  EXPECT_EQ(b.grad().dtype(), DType::F32);
  const Tensor joined = concat({a.detach(), b.detach()}, 0);
  ASSERT_EQ(joined.dtype(), DType::F32);
  EXPECT_EQ(joined.to_vector<float>()[0], fa[0]);
  EXPECT_EQ(joined.to_vector<float>()[12], fb[0]);
  const Tensor ad = a.detach(), bd = b.detach();
  expect_error_containing([&] { add(bd, bd.to(DType::F64)); }, "dtypes f32 and f64 differ");
  expect_error_containing([&] { matmul(ad, bd, false, true); }, "matmul: dtypes bf16 and f32 differ");
  set_matmul_precision(MatmulPrecision::Medium);
  const Tensor mixed = matmul(ad, bd, false, true), both16 = matmul(ad, bd.to(DType::BF16), false, true);
  ASSERT_EQ(mixed.dtype(), DType::BF16);
  EXPECT_EQ(mixed.to(DType::F32).to_vector<float>(), both16.to(DType::F32).to_vector<float>());
  EXPECT_EQ(bmm(reshape(bd, {1, 3, 4}), reshape(ad, {1, 3, 4}), false, true).dtype(), DType::BF16);
  expect_error_containing([&] { add(bd, bd.to(DType::F64)); }, "dtypes f32 and f64 differ");
}
