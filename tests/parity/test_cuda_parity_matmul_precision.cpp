// The matmul precision settings on a GPU (ops/matmul.h, train.precision): float32 GEMMs at
// highest, high (TF32) and medium (BF16) against the exact product of the same float inputs, each
// within its own error bound, and on cards with tensor cores for float32 (compute capability 8.0 and
// later) measurably coarser than FP32 — so a setting that did not reach cuBLAS fails. The cuDNN LSTM
// and the fused LSTM recurrence at high stay near their CPU twins, the cuDNN LSTM at bf16 near its CPU
// twin. Skips without a CUDA device.
//
// Bound per element of C = A B (K terms): inputs rounded to p mantissa bits have relative error at most
// u = 2^-p (truncation; 2^-(p+1) when rounded to nearest), so each product is off by at most
// (2u + u^2) |a||b|, and the FP32 sum adds at most K 2^-24 sum |a||b|:
//   |C - C_exact| <= (2u + u^2 + K 2^-24) (|A| |B|).   TF32: p = 10, BF16: p = 7, FP32: p = 23.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#include "core/float16.h"
#include "cuda_parity.h"
#include "ops/bf16_round.h"
#include "nn/lstm.h"
#include "ops/lstm_cudnn.h"
#include "ops/lstm_recurrence.h"
#include "ops/matmul.h"

using namespace sru;
using namespace sru::testing;

namespace {

struct ErrorStats {
  double worst_of_bound = 0;   // max |err| / bound: must be <= 1
  double worst_relative = 0;   // max |err| / (|A||B|): how coarse the products were
  double mean_relative = 0;
};

// C = A (M, K) B (K, N) on the GPU at `precision` against the float64 product of the same inputs, or,
// with bf16_reference, of the inputs rounded to bfloat16 on the CPU (core/float16.h).
ErrorStats gemm_errors(MatmulPrecision precision, int mantissa_bits, const Tensor& a, const Tensor& b,
                       bool bf16_reference = false) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  Tensor c;
  {
    const PrecisionScope scope(precision);
    c = matmul(a.to(kCuda), b.to(kCuda)).to(Device::cpu());
  }
  std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
  const std::vector<float> cv = c.to_vector<float>();
  if (bf16_reference) {
    for (float& v : av) v = round_to_bf16(v);
    for (float& v : bv) v = round_to_bf16(v);
  }
  const double u = std::ldexp(1.0, -mantissa_bits);
  const double factor = 2 * u + u * u + static_cast<double>(K) * std::ldexp(1.0, -24);
  ErrorStats s;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double exact = 0, magnitude = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(av[i * K + k]) * static_cast<double>(bv[k * N + j]);
        exact += p;
        magnitude += std::fabs(p);
      }
      const double err = std::fabs(static_cast<double>(cv[i * N + j]) - exact);
      s.worst_of_bound = std::max(s.worst_of_bound, err / (factor * magnitude));
      s.worst_relative = std::max(s.worst_relative, err / magnitude);
      s.mean_relative += err / magnitude / static_cast<double>(M * N);
    }
  return s;
}

}  // namespace

TEST(CudaParity, MatmulPrecisionTf32AndBf16WithinTheirBounds) {
  SKIP_WITHOUT_CUDA();
  // Large enough that cuBLAS picks tensor-core kernels when allowed (small products may run on SIMT).
  const Tensor a = rand_leaf({256, 512}, 90).detach(), b = rand_leaf({512, 256}, 91).detach();
  const ErrorStats highest = gemm_errors(MatmulPrecision::Highest, 23, a, b);
  const ErrorStats high = gemm_errors(MatmulPrecision::High, 10, a, b);
  const ErrorStats medium = gemm_errors(MatmulPrecision::Medium, 7, a, b);
  EXPECT_LE(highest.worst_of_bound, 1.0);
  EXPECT_LE(high.worst_of_bound, 1.0);
  EXPECT_LE(medium.worst_of_bound, 1.0);
  EXPECT_LT(highest.worst_relative, 1e-6) << "highest must be FP32";
  EXPECT_EQ(matmul_precision(), MatmulPrecision::Highest) << "the scope put the default back";
  if (cuda::compute_capability(0) < 80) GTEST_SKIP() << "no float32 tensor cores before compute capability 8.0";
  const char* tf32_override = std::getenv("NVIDIA_TF32_OVERRIDE");
  if (tf32_override && std::string(tf32_override) == "0") GTEST_SKIP() << "NVIDIA_TF32_OVERRIDE=0 disables TF32";
  // With K = 512 random products, TF32's rounding leaves ~2e-5 of sum |a||b| (worst of 65536 ~1e-4) and
  // FP32's ~3e-8; BF16's 3-8x TF32's (8 with both rounded alike, ~3 if TF32 truncates and BF16 rounds).
  EXPECT_GT(high.worst_relative, 1e-6) << "high ran without TF32 tensor cores";
  EXPECT_GT(medium.mean_relative, 2 * high.mean_relative) << "medium ran without BF16 inputs";
  // And medium is exactly the bfloat16 operands' product summed in FP32: against the product of the
  // inputs rounded on the CPU only the sums' rounding is left (bound with p = 23, FP32's own, doubled:
  // tensor cores may truncate their partial sums where FMA rounds them).
  const ErrorStats medium_of_rounded = gemm_errors(MatmulPrecision::Medium, 23, a, b, true);
  EXPECT_LE(medium_of_rounded.worst_of_bound, 2.0) << "medium is not the product of round-to-nearest bf16 operands";
  EXPECT_LT(medium_of_rounded.mean_relative, medium.mean_relative / 10);
}

// Medium through the operand layouts matmul and bmm hand the GEMM wrapper: transposed operands, batches,
// and leading dims folded into rows, each against the FP32 product of bf16-rounded inputs. (A matrix
// shared by a batch, stride 0, only reaches the wrapper with batch 1.)
TEST(CudaParity, MatmulPrecisionMediumIsTheProductOfBf16Operands) {
  SKIP_WITHOUT_CUDA();
  auto rounded = [](const Tensor& t) {
    std::vector<float> v = t.to_vector<float>();
    for (float& x : v) x = round_to_bf16(x);
    return Tensor::from_vector(v, t.shape());
  };
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Tensor a = rand_leaf(ta ? Shape{3, 96, 7} : Shape{3, 7, 96}, 97).detach();
      const Tensor b = rand_leaf(tb ? Shape{3, 5, 96} : Shape{3, 96, 5}, 98).detach();
      Tensor got;
      {
        const PrecisionScope scope(MatmulPrecision::Medium);
        got = bmm(a.to(kCuda), b.to(kCuda), ta, tb).to(Device::cpu());
      }
      // FP32 sums of 96 exact products: |err| <= 96 2^-24 sum |a||b| <= 6e-6 * 96.
      EXPECT_TRUE(tensors_near(got, bmm(rounded(a), rounded(b), ta, tb), 1e-3, 1e-5)) << "ta " << ta << " tb " << tb;
      EXPECT_FALSE(tensors_near(got, bmm(a, b, ta, tb), 1e-6, 1e-6)) << "medium left the operands unrounded";
    }
  // x (L, B, n) @ W (n, m): the leading dims fold into rows, W is shared.
  const Tensor x = rand_leaf({4, 6, 40}, 99).detach(), w = rand_leaf({40, 24}, 100).detach();
  Tensor got;
  {
    const PrecisionScope scope(MatmulPrecision::Medium);
    got = matmul(x.to(kCuda), w.to(kCuda)).to(Device::cpu());
  }
  EXPECT_TRUE(tensors_near(got, matmul(rounded(x), rounded(w)), 1e-3, 1e-5));
}

// The GPU's rounding kernel (ops/cuda/bf16_round.cu) against its CPU twin, bit for bit: random values
// over the float range's middle, the special values, an odd count (the scalar tail) and an input one
// float past 16-byte alignment (the scalar path throughout).
TEST(CudaParity, Bf16RoundingKernelMatchesItsCpuTwinBitForBit) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend (no cuda::round_to_bf16 to call)";
#else
  SKIP_WITHOUT_CUDA();
  const std::vector<float> xs = rounding_test_values(10001, 101);
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<uint16_t> want(xs.size());
  cpu::round_to_bf16(xs.data(), want.data(), n);
  const Tensor in = Tensor::from_vector(xs, {n}).to(kCuda);
  for (int64_t offset : {0, 1}) {
    // Exactly the n bf16 values (and half a word), poisoned with all-ones bits (a NaN nothing here
    // rounds to), so that an element the kernel skipped fails and every byte read back was written.
    const Tensor out = Tensor::full({(n + 1) / 2}, -1, DType::I32, kCuda);
    cuda::round_to_bf16(in.data<float>() + offset, static_cast<uint16_t*>(out.data_ptr()), n - offset, 0);
    const std::vector<int32_t> words = out.to_vector<int32_t>();
    std::vector<uint16_t> got(words.size() * 2);
    std::memcpy(got.data(), words.data(), words.size() * sizeof(int32_t));
    int mismatches = 0;
    for (int64_t i = 0; i + offset < n; ++i)
      if (got[i] != want[i + offset] && ++mismatches <= 5)
        ADD_FAILURE() << "offset " << offset << " element " << i << ": " << xs[i + offset] << " -> 0x" << std::hex
                      << got[i] << ", CPU 0x" << want[i + offset];
    EXPECT_EQ(mismatches, 0) << "offset " << offset;
  }
#endif
}

// Batched products (attention) and transposed operands take the same path.
TEST(CudaParity, MatmulPrecisionHighBatchedAndTransposed) {
  SKIP_WITHOUT_CUDA();
  const PrecisionScope scope(MatmulPrecision::High);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Tensor ba = rand_leaf(ta ? Shape{3, 96, 7} : Shape{3, 7, 96}, 92);
      const Tensor bb = rand_leaf(tb ? Shape{3, 5, 96} : Shape{3, 96, 5}, 93);
      // |err| <= (2^-9 + 96 2^-24) sum |a||b| <= ~0.002 * 96: 2e-2 absolute and relative covers it.
      expect_parity(one([=](const Inputs& x) { return bmm(x[0], x[1], ta, tb); }), {ba, bb}, 2e-2);
    }
}

// The LSTMs at high: cuDNN may use TF32 and the fused recurrence's per-step GEMMs do; both stay near
// the CPU's FP32 (errors compound over the steps, hence the loose tolerance).
TEST(CudaParity, LstmsAtMatmulPrecisionHigh) {
  SKIP_WITHOUT_CUDA();
  const PrecisionScope scope(MatmulPrecision::High);
  nn::LSTMOptions o;
  o.input_size = 16;
  o.hidden_size = 24;
  o.num_layers = 2;
  const LstmPair m = lstm_pair(o, 7);
  const int64_t L = 9, B = 4;
  expect_parity(lstm_forward(m), {rand_leaf({L, B, 16}, 94), Tensor(), Tensor(), Tensor()}, 2e-2);
  const int64_t H = 37;
  expect_parity(
      [&](const Inputs& v) {
        const LstmRecurrenceResult r = lstm_recurrence(v[0], v[1], Tensor(), Tensor(), Tensor(), Tensor(), false);
        return std::vector<Tensor>{r.output, r.c};
      },
      {rand_leaf({L, B, 4 * H}, 95, DType::F32, -2, 2), rand_leaf({4 * H, H}, 96, DType::F32, -0.5, 0.5)}, 2e-2);
}

// The cuDNN LSTM at bf16 (CUDNN_DATA_BFLOAT16, train.precision bf16) against its CPU twin (the fused
// recurrence with h rounded to bf16 values, nn/lstm.h): 2 layers, both directions, dropout between
// layers (one cuDNN call per layer) and without (the stack in one call), initial states, padding at
// the end; outputs, states and every gradient. Both round x, the weights and h to bf16 and sum in
// float32; where cuDNN rounds inside (the input projection, c, a one-call stack's output between
// layers) is its own, so the bound is a few bf16 steps compounded over the steps, as for TF32 above.
// Then the same at tf32, which must differ from bf16 by more than float32 rounding: bf16 reached cuDNN.
TEST(CudaParity, CudnnLstmAtBf16MatchesItsCpuTwin) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend (no cuDNN LSTM)";
#else
  SKIP_WITHOUT_CUDA();
  if (!cuda::lstm_cudnn_supports_bf16(0)) GTEST_SKIP() << "cuDNN's LSTM takes bf16 from compute capability 8.0";
  for (double dropout : {0.3, 0.0})
  for (bool bidir : {false, true}) {
    SCOPED_TRACE(::testing::Message() << (bidir ? "bidirectional" : "unidirectional") << ", dropout " << dropout);
    nn::LSTMOptions o;
    o.input_size = 16;
    o.hidden_size = 24;
    o.num_layers = 2;
    o.dropout = dropout;
    o.bidirectional = bidir;
    const LstmPair m = lstm_pair(o, 7);
    const int64_t L = 9, B = 4, out = (bidir ? 2 : 1) * 24;
    const Inputs inputs{rand_leaf({L, B, 16}, 97), rand_leaf({2, B, out}, 98), rand_leaf({2, B, out}, 99),
                        padding_at_end(L, B)};
    const Inputs on_gpu{inputs[0].to(kCuda), inputs[1].to(kCuda), inputs[2].to(kCuda), inputs[3]};
    Tensor gpu_bf16, gpu_tf32;
    {
      const PrecisionScope scope(MatmulPrecision::Medium);
      expect_parity(lstm_forward(m), inputs, 3e-2);
      expect_same_parameters_and_grads(*m.cpu, *m.gpu, 5e-2);
      gpu_bf16 = lstm_forward(m)(on_gpu)[0].to(Device::cpu());
    }
    {
      const PrecisionScope scope(MatmulPrecision::High);
      gpu_tf32 = lstm_forward(m)(on_gpu)[0].to(Device::cpu());
    }
    EXPECT_EQ(gpu_bf16.dtype(), DType::F32);
    EXPECT_GT(max_error_over_largest(gpu_bf16, gpu_tf32), 1e-4) << "bf16 ran like tf32: not bf16 in cuDNN";
  }
#endif
}

// The Linear's bias (and linear_relu's ReLU: CUBLASLT_EPILOGUE_RELU_BIAS) in cuBLASLt's epilogue: float32
// at highest and high and bf16 take the fused path
// (the epilogue counter moves once per call), also for an input viewed at an offset that is only
// 4-byte aligned (its alignment handed to the heuristic), and match the CPU (which adds the bias after
// the product, as the epilogue does: float32 to float rounding of the product).
TEST(CudaParity, LinearBiasRidesInTheGemmEpilogue) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend";
#else
  SKIP_WITHOUT_CUDA();
  // Inputs that bf16 holds exactly: every product is exact in float32 at each precision, so the GPU's
  // pre-activations differ from the CPU's by the order of the sums only, and the ReLU's mask (y > 0)
  // does not flip on an element near zero (a flip moves that row's whole gradient, which no tolerance
  // on rounding covers: the tf32 run of 2026-11-29 did, by 0.07-0.12 on three elements).
  const auto exact_leaf = [](const Shape& shape, uint64_t seed) {
    return rand_leaf(shape, seed).detach().to(DType::BF16).to(DType::F32).set_requires_grad(true);
  };
  const Tensor x = exact_leaf({7, 5, 24}, 111), w = exact_leaf({40, 24}, 112), b = exact_leaf({40}, 113);
  const Tensor offset_x = exact_leaf({7 * 5 * 24 + 1}, 114);  // x at offset 1: 4-byte aligned only
  for (MatmulPrecision p : {MatmulPrecision::Highest, MatmulPrecision::High, MatmulPrecision::Medium}) {
    SCOPED_TRACE(precision_name(p));
    const PrecisionScope scope(p);
    const double tol = p == MatmulPrecision::Highest ? 1e-5 : 2e-2;
    for (bool with_relu : {false, true})
      for (bool shifted : {false, true}) {
        SCOPED_TRACE(std::string(with_relu ? "with the ReLU, " : "") + (shifted ? "offset input" : "aligned input"));
        const uint64_t before = cuda::linear_epilogue_calls();
        expect_parity(one([&](const Inputs& v) {
                        const Tensor input = shifted ? v[3].narrow0(1, 7 * 5 * 24).view({7, 5, 24}) : v[0];
                        return with_relu ? linear_relu(input, v[1], v[2]) : linear(input, v[1], v[2]);
                      }),
                      {x, w, b, offset_x}, tol);
        EXPECT_EQ(cuda::linear_epilogue_calls() - before, 1u)
            << (shifted ? "offset input" : "aligned input") << (with_relu ? ", with the ReLU" : "");
      }
  }
#endif
}

// The Linear's backward: dW = dy^T x with db (the column sums of dy) in cuBLASLt's bias-gradient
// epilogue, one call per pass at every precision, also when the second of two passes adds dW into the
// weight's .grad (beta 1: the epilogue's vector must still be written over, not added to), against
// the CPU's GEMM and double column sums.
TEST(CudaParity, LinearBiasGradientRidesInTheWeightGradientGemm) {
#if !defined(SRU_WITH_CUDA)
  GTEST_SKIP() << "built without the CUDA backend";
#else
  SKIP_WITHOUT_CUDA();
  const Tensor x1 = rand_leaf({7, 5, 24}, 121), x2 = rand_leaf({7, 5, 24}, 122), dy = rand_leaf({7, 5, 40}, 123);
  const Tensor w = rand_leaf({40, 24}, 124), b = rand_leaf({40}, 125);
  for (MatmulPrecision p : {MatmulPrecision::Highest, MatmulPrecision::High, MatmulPrecision::Medium}) {
    SCOPED_TRACE(precision_name(p));
    const PrecisionScope scope(p);
    const double tol = p == MatmulPrecision::Highest ? 1e-5 : 3e-2;
    std::vector<Tensor> grads[2];
    uint64_t calls[2] = {0, 0};
    for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
      const Device device = on_gpu ? kCuda : Device::cpu();
      const Tensor wd = fresh_copy(w, device), bd = fresh_copy(b, device);
      const uint64_t before = cuda::linear_bias_gradient_epilogue_calls();
      for (const Tensor& x : {x1, x2})  // two passes: the second adds into .grad
        // (cast, not Tensor::to: at medium the Linear's output is bf16 and the conversion must be recorded.)
        autograd::backward(sum(mul(cast(linear(x.detach().to(device), wd, bd), DType::F32), dy.detach().to(device))));
      calls[on_gpu] = cuda::linear_bias_gradient_epilogue_calls() - before;
      grads[on_gpu] = {wd.grad().to(Device::cpu()), bd.grad().to(Device::cpu())};
    }
    EXPECT_EQ(calls[0], 0u) << "the CPU ran the epilogue";
    EXPECT_EQ(calls[1], 2u) << "not one epilogue GEMM per pass";
    EXPECT_TRUE(tensors_near(grads[1][0], grads[0][0], tol, tol)) << "weight gradient";
    // The bias gradient at tf32 sums float32 dy (a rounding of dy to TF32 in the epilogue would show as
    // ~5e-4 relative error here: the bound then names the precision).
    const double bias_tol = p == MatmulPrecision::High ? 1e-4 : tol;
    EXPECT_TRUE(tensors_near(grads[1][1], grads[0][1], bias_tol, bias_tol)) << "bias gradient";
  }
#endif
}
