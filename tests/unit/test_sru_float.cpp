// The float32 path of the fused SRU kernel: the vectorised exp/sigmoid are accurate, float32 results
// track float64 ones, and the AVX2 and baseline builds of the kernel agree bit for bit.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/engine.h"
#include "ops/ops.h"
#include "ops/sru_math.h"
#include "ops/sru_recurrence.h"
#include "testing.h"

using namespace sru;

TEST(SruFloat, VectorisedExpAndSigmoidAreAccurate) {
  double worst_exp = 0, worst_sigmoid = 0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f * static_cast<float>(i) / 200000.0f;
    const double exact = std::exp(static_cast<double>(x));
    worst_exp = std::max(worst_exp, std::abs(exp_nonpositive(x) - exact) / exact);
    for (float s : {x / 4, -x / 4}) {
      const double exact_s = 1.0 / (1.0 + std::exp(-static_cast<double>(s)));
      worst_sigmoid = std::max(worst_sigmoid, std::abs(sru_sigmoid(s) - exact_s) / exact_s);
    }
  }
  EXPECT_LT(worst_exp, 3e-7);
  EXPECT_LT(worst_sigmoid, 3e-7);
  // exp clamps its input at -87, so far tails come out as ~1.6e-38 instead of smaller: harmless.
  EXPECT_GE(sru_sigmoid(-200.0f), 0.0f);
  EXPECT_LT(sru_sigmoid(-200.0f), 1e-37f);
  EXPECT_EQ(sru_sigmoid(200.0f), 1.0f);
}

namespace {

struct Result {
  std::vector<double> h, c, gU, gx, gw, gb, gc0;
};

Result run(DType dtype, const SruRecurrenceOptions& o, int64_t L, int64_t B) {
  const int64_t out = (o.bidirectional ? 2 : 1) * o.hidden_size;
  Generator gen(12);
  auto make = [&](Shape s) { return Tensor::uniform(s, -1, 1, DType::F64, gen).to(dtype).set_requires_grad(true); };
  Tensor U = make({L, B, out * o.k}), x = make({L, B, out}), w = make({2 * out}), b = make({2 * out}), c0 = make({B, out});
  Tensor mask_pad = Tensor::zeros({L, B}, DType::I32);
  mask_pad.data<int32_t>()[(L - 1) * B] = 1;
  auto [h, c] = sru_recurrence(U, x, w, b, c0, Tensor(), mask_pad, o);
  Tensor gh = Tensor::uniform(h.shape(), -1, 1, DType::F64, gen).to(dtype);
  autograd::backward(sum(h * gh) + sum(c));
  return {h.to_vector<double>(),      c.to_vector<double>(),      U.grad().to_vector<double>(),
          x.grad().to_vector<double>(), w.grad().to_vector<double>(), b.grad().to_vector<double>(),
          c0.grad().to_vector<double>()};
}

double max_relative(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1.0, std::abs(b[i])));
  return worst;
}

SruRecurrenceOptions options(bool bidirectional) {
  SruRecurrenceOptions o;
  o.hidden_size = 37;  // not a multiple of the vector width: exercises the loop tails
  o.bidirectional = bidirectional;
  o.k = 3;
  o.scale_x = 1.1;
  return o;
}

}  // namespace

TEST(SruFloat, Float32TracksFloat64) {
  for (bool bidir : {false, true}) {
    const Result f32 = run(DType::F32, options(bidir), 20, 3), f64 = run(DType::F64, options(bidir), 20, 3);
    EXPECT_LT(max_relative(f32.h, f64.h), 1e-5);
    EXPECT_LT(max_relative(f32.c, f64.c), 1e-5);
    EXPECT_LT(max_relative(f32.gU, f64.gU), 1e-5);
    EXPECT_LT(max_relative(f32.gx, f64.gx), 1e-5);
    EXPECT_LT(max_relative(f32.gc0, f64.gc0), 1e-5);
    // weight_c / bias gradients sum 60 terms per element.
    EXPECT_LT(max_relative(f32.gw, f64.gw), 1e-4);
    EXPECT_LT(max_relative(f32.gb, f64.gb), 1e-4);
  }
}

TEST(SruFloat, BaselineAvx2AndAvx512BuildsAgreeExactly) {
  const std::string widest = cpu::sru_kernel_isa();
  if (widest == "baseline") GTEST_SKIP() << "this processor runs the baseline build only";
  struct Restore {
    ~Restore() { cpu::limit_sru_kernel_isa(cpu::SruKernelIsa::Avx512); }
  } restore;
  for (DType dtype : {DType::F32, DType::F64}) {
    const Result fast = run(dtype, options(true), 9, 4);
    for (const auto [isa, name] : {std::pair{cpu::SruKernelIsa::Avx2, "avx2"},
                                   std::pair{cpu::SruKernelIsa::Baseline, "baseline"}}) {
      if (name == widest) continue;
      cpu::limit_sru_kernel_isa(isa);
      EXPECT_STREQ(cpu::sru_kernel_isa(), name);
      const Result other = run(dtype, options(true), 9, 4);
      EXPECT_EQ(fast.h, other.h) << widest << " vs " << name;
      EXPECT_EQ(fast.c, other.c) << widest << " vs " << name;
      EXPECT_EQ(fast.gU, other.gU) << widest << " vs " << name;
      EXPECT_EQ(fast.gx, other.gx) << widest << " vs " << name;
      EXPECT_EQ(fast.gw, other.gw) << widest << " vs " << name;
    }
    cpu::limit_sru_kernel_isa(cpu::SruKernelIsa::Avx512);
  }
}

// The bf16 I/O kernels (U, x and grad h read as bf16, h, grad U and grad x rounded in the unit loops)
// give the bits of widening the operands, running the float32 kernels and rounding the results after,
// in every build this processor runs (baseline, AVX2, AVX-512), for k 3 and 4, both directions, a
// padded position, a dropout mask and values that round to even, overflow and NaN.
TEST(SruFloat, Bf16IoKernelsGiveTheBitsOfTheWidenedFloatKernels) {
  struct Restore {
    ~Restore() { cpu::limit_sru_kernel_isa(cpu::SruKernelIsa::Avx512); }
  } restore;
  const auto bits = [](const Tensor& t) {
    const Tensor b = t.to(DType::BF16);
    const auto* p = b.data<bf16>();
    std::vector<uint16_t> out(static_cast<size_t>(b.numel()));
    for (size_t i = 0; i < out.size(); ++i) out[i] = p[i].bits;
    return out;
  };
  for (const auto isa : {cpu::SruKernelIsa::Avx512, cpu::SruKernelIsa::Avx2, cpu::SruKernelIsa::Baseline}) {
    cpu::limit_sru_kernel_isa(isa);
    for (int k : {3, 4})
      for (bool bidir : {false, true}) {
        SCOPED_TRACE(::testing::Message() << cpu::sru_kernel_isa() << " k " << k << (bidir ? " bidirectional" : ""));
        SruRecurrenceOptions o = options(bidir);
        o.k = k;
        const int64_t L = 9, B = 3, out = (bidir ? 2 : 1) * o.hidden_size;
        Generator gen(41);
        auto bf16_of = [&](Shape s, double scale) {
          return Tensor::uniform(s, -scale, scale, DType::F32, gen).to(DType::BF16);
        };
        Tensor U16 = bf16_of({L, B, out * k}, 3), x16 = bf16_of({L, B, out}, 2), gh16 = bf16_of({L, B, out}, 1);
        U16.data<bf16>()[5] = bf16(std::nanf(""));     // NaN stays NaN through h
        gh16.data<bf16>()[7] = bf16(3.0e38f);          // grad U overflows to inf where it meets a large factor
        const Tensor w = Tensor::uniform({2 * out}, -1, 1, DType::F32, gen);
        const Tensor b = Tensor::uniform({2 * out}, -1, 1, DType::F32, gen);
        const Tensor c0 = Tensor::uniform({B, out}, -1, 1, DType::F32, gen);
        const Tensor mask_c = Tensor::full({B, out}, 1.25, DType::F32);
        Tensor mask_pad = Tensor::zeros({L, B}, DType::I32);
        mask_pad.data<int32_t>()[(L - 1) * B + 1] = 1;
        const auto run_with = [&](const Tensor& U0, const Tensor& x0, const Tensor& gh) {
          Tensor U = U0.clone().set_requires_grad(true), x = x0.clone().set_requires_grad(true);
          Tensor w1 = w.clone().set_requires_grad(true), b1 = b.clone().set_requires_grad(true);
          auto [h, c] = sru_recurrence(U, x, w1, b1, c0, mask_c, mask_pad, o);
          autograd::backward(h, gh);
          std::vector<std::vector<uint16_t>> rounded{bits(h), bits(U.grad())};
          if (k == 3) rounded.push_back(bits(x.grad()));
          return std::pair{rounded, std::vector<std::vector<float>>{c.to_vector<float>(), w1.grad().to_vector<float>(),
                                                                    b1.grad().to_vector<float>()}};
        };
        const auto io = run_with(U16, x16, gh16);
        const auto widened = run_with(U16.to(DType::F32), x16.to(DType::F32), gh16.to(DType::F32));
        EXPECT_EQ(io.first, widened.first) << "h, grad U, grad x";
        ASSERT_EQ(io.second.size(), widened.second.size());
        for (size_t i = 0; i < io.second.size(); ++i)
          for (size_t j = 0; j < io.second[i].size(); ++j)
            ASSERT_TRUE(io.second[i][j] == widened.second[i][j] ||
                        (std::isnan(io.second[i][j]) && std::isnan(widened.second[i][j])))
                << "float result " << i << " element " << j;
      }
  }
}

// bf16 I/O (ops/sru_recurrence.h): h, grad U and grad x are the float64 results on the same rounded
// inputs rounded once to bf16 (within half a bf16 step, 2^-8 relative, plus float32's own error); c,
// grad weight_c, grad bias and grad c0 stay float32 and track float64 as at float32. With padding, a
// dropout mask, c0, both directions and k = 3 and 4.
TEST(SruFloat, Bf16InputsAndOutputsRoundOnceAroundFloat32Math) {
  for (int k : {3, 4})
    for (bool bidir : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "k " << k << (bidir ? " bidirectional" : ""));
      SruRecurrenceOptions o = options(bidir);
      o.k = k;
      const int64_t L = 11, B = 3, out = (bidir ? 2 : 1) * o.hidden_size;
      Generator gen(31);
      auto bf16_of = [&](Shape s) { return Tensor::uniform(s, -1, 1, DType::F32, gen).to(DType::BF16); };
      auto f32_of = [&](Shape s) { return Tensor::uniform(s, -1, 1, DType::F32, gen); };
      const Tensor U16 = bf16_of({L, B, out * k}), x16 = bf16_of({L, B, out}), gh16 = bf16_of({L, B, out});
      const Tensor w = f32_of({2 * out}), b = f32_of({2 * out}), c0 = f32_of({B, out});
      const Tensor mask_c = Tensor::full({B, out}, 1.25, DType::F32);
      Tensor mask_pad = Tensor::zeros({L, B}, DType::I32);
      mask_pad.data<int32_t>()[(L - 1) * B + 1] = 1;
      // The run under test: bf16 I/O, float32 parameters.
      Tensor U = U16.clone().set_requires_grad(true), x = x16.clone().set_requires_grad(true);
      Tensor w1 = w.clone().set_requires_grad(true), b1 = b.clone().set_requires_grad(true);
      Tensor c01 = c0.clone().set_requires_grad(true);
      auto [h, c] = sru_recurrence(U, x, w1, b1, c01, mask_c, mask_pad, o);
      ASSERT_EQ(h.dtype(), DType::BF16);
      ASSERT_EQ(c.dtype(), DType::F32);
      autograd::backward(h, gh16);
      ASSERT_EQ(U.grad().dtype(), DType::BF16);
      if (k == 3) ASSERT_EQ(x.grad().dtype(), DType::BF16);
      ASSERT_EQ(w1.grad().dtype(), DType::F32);
      // The reference: float64 on the same values.
      auto f64_leaf = [](const Tensor& t) { return t.to(DType::F64).set_requires_grad(true); };
      Tensor Ur = f64_leaf(U16), xr = f64_leaf(x16), wr = f64_leaf(w), br = f64_leaf(b),
             c0r = f64_leaf(c0);
      auto [hr, cr] = sru_recurrence(Ur, xr, wr, br, c0r, mask_c.to(DType::F64), mask_pad, o);
      autograd::backward(hr, gh16.to(DType::F64));
      auto expect_rounded_once = [](const Tensor& got, const Tensor& ref, const char* what) {
        const std::vector<double> g = got.to_vector<double>(), r = ref.to_vector<double>();
        for (size_t i = 0; i < r.size(); ++i)
          ASSERT_LE(std::abs(g[i] - r[i]), std::ldexp(std::abs(r[i]), -8) * 1.001 + 1e-6)
              << what << " element " << i << ": " << g[i] << " vs " << r[i];
      };
      expect_rounded_once(h, hr, "h");
      expect_rounded_once(U.grad(), Ur.grad(), "grad U");
      if (k == 3) expect_rounded_once(x.grad(), xr.grad(), "grad x");
      EXPECT_LT(max_relative(c.to_vector<double>(), cr.to_vector<double>()), 1e-5);
      EXPECT_LT(max_relative(c01.grad().to_vector<double>(), c0r.grad().to_vector<double>()), 1e-5);
      EXPECT_LT(max_relative(w1.grad().to_vector<double>(), wr.grad().to_vector<double>()), 1e-4);
      EXPECT_LT(max_relative(b1.grad().to_vector<double>(), br.grad().to_vector<double>()), 1e-4);
    }
}

// bf16 U with parameters of another dtype, or x of another dtype than U, is refused by name.
TEST(SruFloat, Bf16IoRefusesMixedOperandsByName) {
  SruRecurrenceOptions o = options(false);
  const int64_t L = 2, B = 1, out = o.hidden_size;
  const Tensor U = Tensor::zeros({L, B, 3 * out}, DType::BF16), x = Tensor::zeros({L, B, out}, DType::BF16);
  const Tensor w32 = Tensor::zeros({2 * out}), w16 = Tensor::zeros({2 * out}, DType::BF16);
  const std::string m = sru::testing::error_of([&] { sru_recurrence(U, x, w16, w32, Tensor(), Tensor(), Tensor(), o); });
  EXPECT_NE(m.find("weight_c must be f32 with U of bf16, got bf16"), std::string::npos) << m;
  const std::string n = sru::testing::error_of([&] { sru_recurrence(U, x.to(DType::F32), w32, w32, Tensor(), Tensor(), Tensor(), o); });
  EXPECT_NE(n.find("x must be bf16 with U of bf16, got f32"), std::string::npos) << n;
  const std::string f = sru::testing::error_of([&] { sru_recurrence(U.to(DType::F16), x, w32, w32, Tensor(), Tensor(), Tensor(), o); });
  EXPECT_NE(f.find("U must be f32, f64 or bf16, got f16"), std::string::npos) << f;
}
