// SRU++ on CUDA against the CPU (label cuda; skipped without a device): the causal_softmax kernel
// (rows of one block pass and of several, offsets, windows, rows that see nothing) and whole SRU++ stacks
// moved to the device — causal attention with heads, memory carried over two segments in training and
// in evaluation (the window), dropout and attention dropout (the same Philox masks on both devices),
// projected-linear layers, and bidirectional full attention with padding. Outputs, the carried state,
// and every parameter's gradient. Tolerances as tests/parity/test_cuda_parity.cpp: 1e-5 for the row
// kernel in float32, 1e-4 for what is composed with GEMMs and the recurrence, 1e-10 in float64.
#include <gtest/gtest.h>

#include "cuda_parity.h"
#include "nn/srupp.h"
#include "srupp_testing.h"

using namespace sru;
using namespace sru::testing;

TEST(CudaParity, CausalSoftmax) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 300;
  for (DType dt : {DType::F32, DType::F64})
    for (const auto& [Lq, Lk, offset, window] :
         {std::tuple{5, 5, 0, -1}, std::tuple{7, 300, 293, -1}, std::tuple{6, 300, 294, 100}, std::tuple{4, 5, 9, 1},
          std::tuple{3, 700, 0, -1}, std::tuple{9, 30, 21, -1}, std::tuple{5, 40, 35, 10}}) {  // float32: 8, 16 lanes a row
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " " << Lq << " " << Lk << " " << offset << " " << window);
      const double tol = dt == DType::F32 ? 1e-5 : 1e-10;
      expect_parity(one([o = offset, w = window](const Inputs& v) { return causal_softmax(v[0], 0.3, o, w); }),
                    {rand_leaf({3, Lq, Lk}, ++seed, dt, -5, 5)}, tol);
      // With a key-padding mask read in the same kernel: (3, 1, Lk), the last third of row 1's keys padded.
      std::vector<int32_t> pad(3 * Lk, 0);
      for (int64_t j = 2 * Lk / 3; j < Lk; ++j) pad[Lk + j] = 1;
      expect_parity(one([o = offset, w = window](const Inputs& v) { return causal_softmax(v[0], 0.3, o, w, v[1]); }),
                    {rand_leaf({3, Lq, Lk}, ++seed, dt, -5, 5), Tensor::from_vector(pad, {3, 1, Lk})}, tol);
    }
}

namespace {

// Two segments through copies of one SRU++ stack on the CPU and on cuda:0 (the second with the state
// the first left, memory included), then the parameters and their gradients.
void expect_stack_parity(const nn::SRUppOptions& o, bool training, const Tensor& pad, double tol) {
  Generator g_cpu(5), g_gpu(5);
  nn::SRUpp cpu(o, g_cpu), gpu(o, g_gpu);
  set_alpha(cpu, 0.7);
  set_alpha(gpu, 0.7);
  gpu.to(kCuda);
  cpu.train(training);
  gpu.train(training);
  const int64_t L = 6, B = 3;
  expect_parity(
      [&](const Inputs& v) {
        const bool on_gpu = v[0].device().is_cuda();
        const nn::SRUpp& m = on_gpu ? gpu : cpu;
        (on_gpu ? g_gpu : g_cpu).set_state(31, 0);
        nn::EncoderStatePtr state;
        const Tensor first = m.forward_sequence({v[0], pad, Tensor()}, state);
        const Tensor second = m.forward_sequence({v[1], pad, Tensor()}, state);
        std::vector<Tensor> out = {first, second};
        const std::vector<Tensor> carried = srupp_state_tensors(state);
        out.insert(out.end(), carried.begin(), carried.end());
        return out;
      },
      {rand_leaf({L, B, o.input_size}, 40, o.dtype), rand_leaf({L, B, o.input_size}, 41, o.dtype)}, tol);
  expect_same_parameters_and_grads(cpu, gpu, tol);
}

}  // namespace

TEST(CudaParity, SruppStacks) {
  SKIP_WITHOUT_CUDA();
  for (DType dt : {DType::F32, DType::F64}) {
    const double tol = dt == DType::F32 ? 1e-4 : 1e-10;
    nn::SRUppOptions o = srupp_options(12, 16, 8, 3, 2, dt);
    o.memory_length = 4;
    for (const bool training : {true, false}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << (training ? " training" : " evaluation"));
      expect_stack_parity(o, training, Tensor(), tol);
    }
    SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " dropout, projected layers, layer norm after");
    nn::SRUppOptions d = o;
    d.dropout = 0.2;
    d.attn_dropout = 0.3;
    d.attention_every_n_layers = 2;
    d.layer_norm = true;
    d.normalize_after = true;
    d.rescale = true;
    expect_stack_parity(d, true, Tensor(), tol);
    SCOPED_TRACE("bidirectional with padding");
    nn::SRUppOptions b = o;
    b.memory_length = 0;
    b.bidirectional = true;
    b.causal = false;
    b.hidden_size = 6;  // out 12 = input: k = 3
    std::vector<int32_t> pad(6 * 3, 0);
    for (int64_t t = 3; t < 6; ++t) pad[t * 3 + 1] = 1;
    expect_stack_parity(b, true, Tensor::from_vector(pad, {6, 3}), tol);
  }
}
