// The fused LSTM recurrence (ops/lstm_recurrence.h) against the composed LSTM it replaced on the CPU
// (nn::LSTM with LSTMImplementation::Composed, per-step basic ops): outputs, last states and every
// gradient in float64 within 1e-10, over directions, layers with dropout between them, initial
// states and padding anywhere in a sequence; the float path within float rounding; the op's checks;
// the bf16 path (h rounded to bf16 values, nn::LSTM at train.precision bf16) within bf16 rounding.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "core/float16.h"
#include "nn/lstm.h"
#include "ops/lstm_recurrence.h"
#include "ops/ops.h"
#include "ops/sru_recurrence.h"
#include "testing.h"

using namespace sru;
using namespace sru::nn;
using sru::testing::error_of;
using sru::testing::leaf;
using sru::testing::max_error_over_largest;

namespace {

struct LstmRun {
  RecurrentOutput out;
  std::vector<std::pair<std::string, Tensor>> grads;  // parameters, then x, h0, c0
};

// Forward + backward of a random projection of (output, h, c), with the same dropout masks each time.
LstmRun run_lstm(LSTM& lstm, Generator& gen, LSTMImplementation impl, const Tensor& x, const Tensor& h0,
                 const Tensor& c0, const Tensor& mask_pad) {
  lstm.set_implementation(impl);
  lstm.zero_grad();
  for (const Tensor* t : {&x, &h0, &c0})
    if (t->defined()) t->impl()->grad.reset();
  gen.set_state(31, 0);
  RecurrentOutput r = lstm.forward(x, h0, c0, mask_pad);
  Generator cot(5);
  Tensor loss;
  for (const Tensor& t : {r.output, r.h, r.c}) {
    const Tensor term = sum(t * Tensor::uniform(t.shape(), -1, 1, t.dtype(), cot));
    loss = loss.defined() ? loss + term : term;
  }
  autograd::backward(loss);
  LstmRun run{{r.output.detach(), r.h.detach(), r.c.detach()}, {}};
  for (auto& [name, p] : lstm.named_parameters()) run.grads.emplace_back(name, p.grad());
  run.grads.emplace_back("x", x.grad());
  if (h0.defined()) run.grads.emplace_back("h0", h0.grad());
  if (c0.defined()) run.grads.emplace_back("c0", c0.grad());
  return run;
}

::testing::AssertionResult close(const Tensor& a, const Tensor& b, double rtol) {
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << "one is undefined";
  if (!a.defined()) return ::testing::AssertionSuccess();
  if (a.shape() != b.shape()) return ::testing::AssertionFailure() << shape_str(a.shape()) << " vs " << shape_str(b.shape());
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  for (size_t i = 0; i < va.size(); ++i)
    if (!(std::abs(va[i] - vb[i]) <= rtol * std::max(1.0, std::abs(vb[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << va[i] << " vs " << vb[i];
  return ::testing::AssertionSuccess();
}

// Padding at the start, in the middle and at the end of sequences, and one sequence with none.
Tensor scattered_padding(int64_t L, int64_t B) {
  std::vector<float> m(L * B, 0.0f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t) m[t * B + b] = (b == 1 && t < 2) || (b == 2 && t == L / 2) || (b == 3 && t >= L - 3);
  return Tensor::from_vector(m, {L, B});
}

}  // namespace

TEST(LstmFused, EqualsComposedLstmOutputsAndEveryGradient) {
  const int64_t L = 7, B = 5, n_in = 4, H = 3;
  for (int bits = 0; bits < 16; ++bits) {
    const bool bidirectional = bits & 1, initial_state = bits & 2, padding = bits & 4, training = bits & 8;
    SCOPED_TRACE(::testing::Message() << "bidirectional " << bidirectional << ", h0/c0 " << initial_state
                                      << ", padding " << padding << ", training (dropout) " << training);
    LSTMOptions o;
    o.input_size = n_in;
    o.hidden_size = H;
    o.num_layers = 2;
    o.dropout = 0.4;
    o.bidirectional = bidirectional;
    o.dtype = DType::F64;
    Generator gen(12);
    LSTM lstm(o, gen);
    lstm.train(training);
    const int64_t out = (bidirectional ? 2 : 1) * H;
    const Tensor x = leaf({L, B, n_in}, 1);
    const Tensor h0 = initial_state ? leaf({2, B, out}, 2) : Tensor();
    const Tensor c0 = initial_state ? leaf({2, B, out}, 3) : Tensor();
    const Tensor mask = padding ? scattered_padding(L, B) : Tensor();
    const LstmRun fused = run_lstm(lstm, gen, LSTMImplementation::Fused, x, h0, c0, mask);
    const LstmRun composed = run_lstm(lstm, gen, LSTMImplementation::Composed, x, h0, c0, mask);
    EXPECT_TRUE(close(fused.out.output, composed.out.output, 1e-10)) << "output";
    EXPECT_TRUE(close(fused.out.h, composed.out.h, 1e-10)) << "h";
    EXPECT_TRUE(close(fused.out.c, composed.out.c, 1e-10)) << "c";
    ASSERT_EQ(fused.grads.size(), composed.grads.size());
    for (size_t i = 0; i < fused.grads.size(); ++i)
      EXPECT_TRUE(close(fused.grads[i].second, composed.grads[i].second, 1e-10)) << "grad " << fused.grads[i].first;
  }
}

// Float: the polynomial sigmoid/tanh and float GEMMs stay within float rounding of the composed ops.
TEST(LstmFused, FloatMatchesComposedWithinRounding) {
  LSTMOptions o;
  o.input_size = 16;
  o.hidden_size = 24;
  o.num_layers = 2;
  o.bidirectional = true;
  Generator gen(3);
  LSTM lstm(o, gen);
  Generator data(4);
  Tensor x = Tensor::uniform({20, 6, 16}, -2, 2, DType::F32, data);
  x.set_requires_grad(true);
  const LstmRun fused = run_lstm(lstm, gen, LSTMImplementation::Fused, x, Tensor(), Tensor(), scattered_padding(20, 6));
  const LstmRun composed =
      run_lstm(lstm, gen, LSTMImplementation::Composed, x, Tensor(), Tensor(), scattered_padding(20, 6));
  EXPECT_TRUE(close(fused.out.output, composed.out.output, 2e-5));
  EXPECT_TRUE(close(fused.out.c, composed.out.c, 2e-5));
  for (size_t i = 0; i < fused.grads.size(); ++i)
    EXPECT_TRUE(close(fused.grads[i].second, composed.grads[i].second, 1e-4)) << fused.grads[i].first;
}

// A padded step's output is exactly 0 and its state the previous one, in both directions.
TEST(LstmFused, PaddedStepsCarryTheStateAndOutputZero) {
  const int64_t L = 5, B = 2, H = 3;
  Generator gen(8);
  const Tensor gx = Tensor::uniform({L, B, 4 * H}, -1, 1, DType::F64, gen);
  const Tensor w = Tensor::uniform({4 * H, H}, -1, 1, DType::F64, gen);
  std::vector<int32_t> pad(L * B, 0);
  pad[3 * B + 1] = pad[4 * B + 1] = 1;  // sequence 1 has length 3
  const Tensor mask = Tensor::from_vector(pad, {L, B});
  for (bool reverse : {false, true}) {
    const LstmRecurrenceResult r = lstm_recurrence(gx, w, Tensor(), Tensor(), Tensor(), mask, reverse);
    for (int64_t t : {3, 4})
      for (int64_t j = 0; j < H; ++j) EXPECT_EQ(r.output.data<double>()[(t * B + 1) * H + j], 0.0);
    // Forward: the last state is the one after t = 2; reverse: the padded steps come first and leave
    // the zero state alone, so the result equals the unpadded sequence of length 3 run in reverse.
    const LstmRecurrenceResult alone =
        lstm_recurrence(gx.narrow0(0, 3), w, Tensor(), Tensor(), Tensor(), Tensor(), reverse);
    for (int64_t j = 0; j < H; ++j) {
      EXPECT_NEAR(r.h.data<double>()[H + j], alone.h.data<double>()[H + j], 1e-14);
      EXPECT_NEAR(r.c.data<double>()[H + j], alone.c.data<double>()[H + j], 1e-14);
    }
  }
}

TEST(LstmFused, BadArgumentsNameTheOpAndShapes) {
  const Tensor gx = Tensor::zeros({3, 2, 8}), w = Tensor::zeros({8, 2});
  EXPECT_NE(error_of([&] { lstm_recurrence(Tensor::zeros({3, 2, 7}), w, Tensor(), Tensor(), Tensor(), Tensor(), false); })
                .find("gates_x must be (L, B, 4H)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { lstm_recurrence(gx, Tensor::zeros({8, 3}), Tensor(), Tensor(), Tensor(), Tensor(), false); })
                .find("weight_hh must be (8, 2)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { lstm_recurrence(gx, w, Tensor(), Tensor::zeros({2, 3}), Tensor(), Tensor(), false); })
                .find("h0 must be (2, 2)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { lstm_recurrence(gx, w, Tensor(), Tensor(), Tensor(), Tensor::zeros({2, 3}), false); })
                .find("mask_pad must be (3, 2)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { lstm_recurrence(gx, w.to(DType::F64), Tensor(), Tensor(), Tensor(), Tensor(), false); })
                .find("lstm_recurrence"),
            std::string::npos);
}

// LstmHidden::Bf16Values (the CPU twin of cuDNN's bf16 LSTM): every output and the last h are bfloat16
// values, the result stays within bf16 rounding of the exact float32 recurrence, forward and backward,
// and float64 is refused by name.
TEST(LstmFused, Bf16HiddenRoundsEveryStepAndStaysNearFloat32) {
  const int64_t L = 12, B = 3, H = 16;
  Generator gen(21);
  auto rand = [&](Shape s, double bound) {
    Tensor t = Tensor::uniform(s, -bound, bound, DType::F32, gen);
    t.set_requires_grad(true);
    return t;
  };
  const Tensor gx = rand({L, B, 4 * H}, 2), w = rand({4 * H, H}, 0.5), bias = rand({4 * H}, 0.5);
  const Tensor cotangent = Tensor::uniform({L, B, H}, -1, 1, DType::F32, gen);
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse ? "reverse" : "forward");
    std::vector<Tensor> outputs, grads;
    for (LstmHidden hidden : {LstmHidden::Exact, LstmHidden::Bf16Values}) {
      for (const Tensor* t : {&gx, &w, &bias}) t->impl()->grad.reset();
      const LstmRecurrenceResult r =
          lstm_recurrence(gx, w, bias, Tensor(), Tensor(), scattered_padding(L, B), reverse, hidden);
      autograd::backward(sum(r.output * cotangent) + sum(r.c));
      if (hidden == LstmHidden::Bf16Values)
        for (const Tensor& t : {r.output, r.h})
          for (float v : t.to_vector<float>()) ASSERT_EQ(v, round_to_bf16(v)) << "not a bf16 value";
      outputs.push_back(r.output.detach());
      for (const Tensor* t : {&gx, &w, &bias}) grads.push_back(t->grad());
    }
    // One rounding of h (2^-9 relative) per step, damped by the gates: far under 1e-2 over 12 steps,
    // and far over float32's rounding (so the flag did something).
    const double out_error = max_error_over_largest(outputs[1], outputs[0]);
    EXPECT_LT(out_error, 1e-2);
    EXPECT_GT(out_error, 1e-5);
    for (size_t i = 0; i < 3; ++i) EXPECT_LT(max_error_over_largest(grads[3 + i], grads[i]), 2e-2) << "gradient " << i;
  }
  EXPECT_NE(error_of([&] {
              lstm_recurrence(gx.detach().to(DType::F64), w.detach().to(DType::F64), Tensor(), Tensor(), Tensor(),
                              Tensor(), false, LstmHidden::Bf16Values);
            }).find("needs float32"),
            std::string::npos);
}

// The row kernels' baseline, AVX2 and AVX-512 builds (picked with the SRU's: cpu::sru_kernel_isa) give
// the same outputs, states and gradients to the bit: float with exact and bf16 hidden states, double;
// both directions, padding, H not a multiple of any vector width.
TEST(LstmFused, BaselineAvx2AndAvx512RowKernelsAgreeExactly) {
  struct Restore {
    ~Restore() { cpu::limit_sru_kernel_isa(cpu::SruKernelIsa::Avx512); }
  } restore;
  const int64_t L = 9, B = 5, H = 37;
  const auto run = [&](DType dtype, LstmHidden hidden, bool reverse) {
    Generator gen(77);
    auto leaf = [&](Shape s, double bound) { return Tensor::uniform(s, -bound, bound, dtype, gen).set_requires_grad(true); };
    const Tensor gx = leaf({L, B, 4 * H}, 3), w = leaf({4 * H, H}, 0.5), bias = leaf({4 * H}, 0.5);
    const Tensor h0 = leaf({B, H}, 1), c0 = leaf({B, H}, 1);
    const Tensor cotangent = Tensor::uniform({L, B, H}, -1, 1, dtype, gen);
    const LstmRecurrenceResult r = lstm_recurrence(gx, w, bias, h0, c0, scattered_padding(L, B), reverse, hidden);
    autograd::backward(sum(r.output * cotangent) + sum(r.c) + sum(r.h));
    std::vector<std::vector<double>> values;
    for (const Tensor& t : {r.output, r.h, r.c, gx.grad(), w.grad(), bias.grad(), h0.grad(), c0.grad()})
      values.push_back(t.to_vector<double>());
    return values;
  };
  const std::string widest = cpu::sru_kernel_isa();
  for (const auto& [dtype, hidden] : {std::pair{DType::F32, LstmHidden::Exact}, std::pair{DType::F32, LstmHidden::Bf16Values},
                                      std::pair{DType::F64, LstmHidden::Exact}})
    for (bool reverse : {false, true}) {
      cpu::limit_sru_kernel_isa(cpu::SruKernelIsa::Avx512);
      const auto fast = run(dtype, hidden, reverse);
      for (const auto isa : {cpu::SruKernelIsa::Avx2, cpu::SruKernelIsa::Baseline}) {
        cpu::limit_sru_kernel_isa(isa);
        if (cpu::sru_kernel_isa() == widest) continue;
        EXPECT_EQ(run(dtype, hidden, reverse), fast) << dtype_name(dtype) << (hidden == LstmHidden::Bf16Values ? " bf16 hidden" : "")
                                                     << (reverse ? " reverse" : "") << ": " << widest << " vs "
                                                     << cpu::sru_kernel_isa();
      }
    }
}

// nn::LSTM at train.precision bf16 on the CPU (cuDNN's bf16 LSTM's twin): float32 in, float32 out, every
// output a bf16 value (the top layer's bf16 output widened), within bf16 rounding of the float32 LSTM,
// and float32 parameter gradients near float32's.
TEST(LstmFused, Bf16PrecisionIsCudnnsTwinOnTheCpu) {
  const int64_t L = 10, B = 4, n_in = 12, H = 16;
  LSTMOptions o;
  o.input_size = n_in;
  o.hidden_size = H;
  o.num_layers = 2;
  o.bidirectional = true;
  o.dropout = 0.25;
  Generator gen(5);
  LSTM lstm(o, gen);
  Generator data(6);
  Tensor x = Tensor::uniform({L, B, n_in}, -1, 1, DType::F32, data);
  x.set_requires_grad(true);
  const Tensor c0 = Tensor::uniform({2, B, 2 * H}, -1, 1, DType::F32, data);
  const Tensor mask = scattered_padding(L, B);
  const LstmRun exact = run_lstm(lstm, gen, LSTMImplementation::Fused, x, Tensor(), c0, mask);
  const sru::testing::PrecisionScope bf16(MatmulPrecision::Medium);
  const LstmRun rounded = run_lstm(lstm, gen, LSTMImplementation::Fused, x, Tensor(), c0, mask);
  for (const Tensor* t : {&rounded.out.output, &rounded.out.h, &rounded.out.c}) {
    ASSERT_EQ(t->dtype(), DType::F32);
    for (float v : t->to_vector<float>()) ASSERT_EQ(v, round_to_bf16(v)) << "not a bf16 value";
  }
  EXPECT_LT(max_error_over_largest(rounded.out.output, exact.out.output), 3e-2);
  EXPECT_GT(max_error_over_largest(rounded.out.output, exact.out.output), 1e-4) << "bf16 made no difference";
  EXPECT_LT(max_error_over_largest(rounded.out.c, exact.out.c), 3e-2);
  ASSERT_EQ(rounded.grads.size(), exact.grads.size());
  for (size_t i = 0; i < exact.grads.size(); ++i) {
    if (!exact.grads[i].second.defined()) continue;  // c0 takes no gradient here
    ASSERT_EQ(rounded.grads[i].second.dtype(), DType::F32) << rounded.grads[i].first;
    EXPECT_LT(max_error_over_largest(rounded.grads[i].second, exact.grads[i].second), 5e-2) << rounded.grads[i].first;
  }
}
