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

TEST(SruFloat, BaselineAndAvx2BuildsAgreeExactly) {
  if (std::string(cpu::sru_kernel_isa()) != "avx2") GTEST_SKIP() << "this processor runs the baseline build only";
  for (DType dtype : {DType::F32, DType::F64}) {
    const Result fast = run(dtype, options(true), 9, 4);
    cpu::force_baseline_sru_kernels(true);
    EXPECT_STREQ(cpu::sru_kernel_isa(), "baseline");
    const Result base = run(dtype, options(true), 9, 4);
    cpu::force_baseline_sru_kernels(false);
    EXPECT_EQ(fast.h, base.h);
    EXPECT_EQ(fast.c, base.c);
    EXPECT_EQ(fast.gU, base.gU);
    EXPECT_EQ(fast.gx, base.gx);
    EXPECT_EQ(fast.gw, base.gw);
  }
}
