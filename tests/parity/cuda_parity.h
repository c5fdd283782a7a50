// Helpers of the CUDA parity tests (label cuda): random leaves, fresh copies per device, and
// expect_parity, which runs a function on the CPU and on cuda:0 and compares outputs and gradients.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iterator>
#include <memory>
#include <vector>

#include "autograd/engine.h"
#include "core/cuda/device_info.h"
#include "nn/lstm.h"
#include "nn/module.h"
#include "ops/ops.h"
#include "testing.h"

namespace sru::testing {

using Inputs = std::vector<Tensor>;
using Fn = std::function<std::vector<Tensor>(const Inputs&)>;

inline const Device kCuda = Device::cuda(0);

#define SKIP_WITHOUT_CUDA()                                                                          \
  if (::sru::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: " << ::sru::cuda::unavailable_reason()

inline Tensor rand_leaf(const Shape& shape, uint64_t seed, DType dtype = DType::F32, double low = -1.0, double high = 1.0) {
  Generator gen(seed);
  Tensor t = Tensor::uniform(shape, low, high, dtype, gen);
  if (is_floating(dtype)) t.set_requires_grad(true);
  return t;
}

// A fresh leaf copy of t on `device` (so gradients of earlier checks do not accumulate into it).
inline Tensor fresh_copy(const Tensor& t, Device device) {
  if (!t.defined()) return t;
  Tensor c = t.detach().to(device);
  if (c.shares_storage(t)) c = c.clone();
  if (t.requires_grad()) c.set_requires_grad(true);
  return c;
}

// Runs f on the CPU inputs and on copies on cuda:0, then back-propagates sum(out_i * w_i) with the
// same random weights w_i on both; expects equal outputs and input gradients within tol.
inline void expect_parity(const Fn& f, const Inputs& inputs, double tol) {
  Inputs cpu_inputs, gpu_inputs;
  for (const Tensor& t : inputs) {
    cpu_inputs.push_back(fresh_copy(t, Device::cpu()));
    gpu_inputs.push_back(fresh_copy(t, kCuda));
  }
  const std::vector<Tensor> out_cpu = f(cpu_inputs), out_gpu = f(gpu_inputs);
  ASSERT_EQ(out_cpu.size(), out_gpu.size());
  std::vector<Tensor> loss_cpu, loss_gpu;
  for (size_t i = 0; i < out_cpu.size(); ++i) {
    // Integer outputs may be host bookkeeping by contract (SRU++'s cache cursor, a Transformer's
    // position: nn/srupp.h), read by the host to place the next cache rows; floating outputs never.
    const bool host_bookkeeping = !is_floating(out_gpu[i].dtype()) && out_gpu[i].device().is_cpu();
    ASSERT_TRUE(out_gpu[i].device().is_cuda() || host_bookkeeping) << "output " << i << " left the device";
    EXPECT_TRUE(tensors_near(out_gpu[i], out_cpu[i], tol, tol)) << "output " << i;
    if (!out_cpu[i].requires_grad()) continue;
    Generator gen(100 + i);
    const Tensor w = Tensor::uniform(out_cpu[i].shape(), -1, 1, out_cpu[i].dtype(), gen);
    loss_cpu.push_back(sum(mul(out_cpu[i], w)));
    loss_gpu.push_back(sum(mul(out_gpu[i], w.to(kCuda))));
  }
  if (loss_cpu.empty()) return;
  Tensor total_cpu = loss_cpu[0], total_gpu = loss_gpu[0];
  for (size_t i = 1; i < loss_cpu.size(); ++i) {
    total_cpu = add(total_cpu, loss_cpu[i]);
    total_gpu = add(total_gpu, loss_gpu[i]);
  }
  autograd::backward(total_cpu);
  autograd::backward(total_gpu);
  for (size_t i = 0; i < cpu_inputs.size(); ++i) {
    if (!cpu_inputs[i].defined() || !cpu_inputs[i].requires_grad()) continue;
    const Tensor gc = cpu_inputs[i].grad(), gg = gpu_inputs[i].grad();
    ASSERT_EQ(gc.defined(), gg.defined()) << "gradient of input " << i;
    if (gc.defined()) {
      EXPECT_TRUE(tensors_near(gg, gc, tol, tol)) << "gradient of input " << i;
    }
  }
}

// n float32 values for the 16-bit conversion tests: uniform in (-3e5, 3e5), with the values that
// test a rounding (ties at bf16's and f16's steps, f16's overflow tie, the subnormal ties, the
// largest float, infinities, NaNs, -0, the smallest subnormals) every 7th place from the start, and
// values 20 to 999 scaled by 2^-120 .. 2^79 (~1e-36 to ~1e29: f16's subnormals and far past its range).
inline std::vector<float> rounding_test_values(int64_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> xs = Tensor::uniform({n}, -3e5, 3e5, DType::F32, gen).to_vector<float>();
  const uint32_t specials[] = {0x3F808000u, 0x3F818000u, 0x3F801000u, 0x477FF000u, 0x477FEFFFu, 0x33000000u,
                               0x33C00000u, 0x00018000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F800000u, 0xFF800000u,
                               0x7FC00000u, 0xFF800001u, 0x80000000u, 0x00000001u};
  for (size_t i = 0; i < std::size(specials) && i * 7 < xs.size(); ++i) xs[i * 7] = float_from_bits(specials[i]);
  for (size_t i = 20; i < 1000 && i < xs.size(); ++i)
    if (i % 7 != 0) xs[i] *= std::ldexp(1.0f, static_cast<int>(i % 200) - 120);
  return xs;
}

// A float (L, B) padding mask where sequence b has length L - b (padded at the end).
inline Tensor padding_at_end(int64_t L, int64_t B) {
  std::vector<float> pad(L * B, 0.0f);
  for (int64_t b = 1; b < B; ++b)
    for (int64_t t = L - b; t < L; ++t) pad[t * B + b] = 1.0f;
  return Tensor::from_vector(pad, {L, B});
}

// The optional operands of a recurrence test: an initial state c0 (B, width), a dropout mask (B, width)
// and padding_at_end(L, B); all undefined when `with` is false. Advances `seed` by two.
struct RecurrenceExtras {
  Tensor c0, mask_c, mask_pad;
};
inline RecurrenceExtras recurrence_extras(bool with, int64_t L, int64_t B, int64_t width, DType dtype, uint64_t& seed) {
  if (!with) return {};
  RecurrenceExtras e;
  e.c0 = rand_leaf({B, width}, ++seed, dtype);
  Generator g(++seed);
  e.mask_c = dropout_mask({B, width}, 0.3, dtype, g);
  e.mask_pad = padding_at_end(L, B);
  return e;
}

// The same LSTM (same options and seed) on the CPU and on cuda:0 (`second`: the device of the second
// copy; the CPU for the helper's own test); on(x) is the one on x's device. The pair owns the
// generators: an LSTM draws its between-layer dropout from the generator it was built with, so they
// must outlive the modules (declared first, destroyed last).
struct LstmPair {
  std::unique_ptr<Generator> cpu_gen, gpu_gen;
  std::unique_ptr<nn::LSTM> cpu, gpu;
  const nn::LSTM& on(const Tensor& x) const { return x.device().is_cuda() ? *gpu : *cpu; }
};
inline LstmPair lstm_pair(const nn::LSTMOptions& o, uint64_t seed, Device second = kCuda) {
  LstmPair p{std::make_unique<Generator>(seed), std::make_unique<Generator>(seed), nullptr, nullptr};
  p.cpu = std::make_unique<nn::LSTM>(o, *p.cpu_gen);
  p.gpu = std::make_unique<nn::LSTM>(o, *p.gpu_gen);
  p.gpu->to(second);
  return p;
}
// An LSTM pair's forward as a parity function: inputs x, h0, c0, mask_pad; outputs output, h, c.
inline Fn lstm_forward(const LstmPair& m) {
  return [&m](const Inputs& v) {
    const nn::RecurrentOutput r = m.on(v[0]).forward(v[0], v[1], v[2], v[3]);
    return std::vector<Tensor>{r.output, r.h, r.c};
  };
}

// Weights and gradients of two copies of a module (CPU and CUDA), compared by name.
inline void expect_same_parameters_and_grads(const nn::Module& cpu, const nn::Module& gpu, double tol) {
  const nn::NamedTensors a = cpu.named_parameters(), b = gpu.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].first);
    EXPECT_TRUE(b[i].second.device().is_cuda());
    EXPECT_TRUE(tensors_near(b[i].second, a[i].second, tol, tol));
    ASSERT_EQ(a[i].second.grad().defined(), b[i].second.grad().defined());
    if (a[i].second.grad().defined()) {
      EXPECT_TRUE(tensors_near(b[i].second.grad(), a[i].second.grad(), tol, tol));
    }
  }
}

inline Fn one(std::function<Tensor(const Inputs&)> f) {
  return [f](const Inputs& x) { return std::vector<Tensor>{f(x)}; };
}

}  // namespace sru::testing
