// srubench sru-vs-lstm (see bench/layer_bench.h): the layer implementations and their timing rows.
#include "bench/layer_bench.h"

#include <algorithm>
#include <functional>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "nn/lstm.h"
#include "nn/sru.h"
#include "ops/matmul.h"
#include "ops/sru_recurrence.h"

namespace sru::bench {

namespace nn = sru::nn;

const std::vector<std::string>& layer_bench_impl_names() {
  static const std::vector<std::string> names = {"gemm",         "recurrence", "recurrence_bf16", "copy",
                                                 "sru_fused",    "sru_composed", "lstm_gemm",     "lstm",
                                                 "lstm_composed", "lstm_cudnn"};
  return names;
}

namespace {

// The timed rows of one (L, B, d) case: which implementations were asked for, and their times.
struct CaseRows {
  struct Measured {
    std::string impl;
    double ms, bytes;  // bytes moved, 0 when not a bandwidth row
  };
  const LayerBenchOptions& o;
  std::vector<Measured> times;
  bool wants(const std::string& impl) const {
    auto listed = [&](const std::string& name) { return std::find(o.impls.begin(), o.impls.end(), name) != o.impls.end(); };
    return listed(impl) || (impl == "lstm_cudnn" && listed("lstm")) || (impl == "lstm" && listed("lstm_cudnn"));
  }
  void record(const std::string& impl, const std::function<void()>& fn, double bytes = 0) {
    if (!wants(impl)) return;
    times.push_back({impl, sru::bench::time_on(o.device, fn, o.timing).median_ms, bytes});
  }
  double time_of(const std::string& impl) const {
    for (const Measured& m : times)
      if (m.impl == impl) return m.ms;
    return 0.0;
  }
};

// One case's input, shared by every row: x (L, B, d), the gradient of h, and the generator.
struct LayerCase {
  int64_t L, B, d;
  Tensor x, grad_h;
  sru::Generator gen{1};
};

// The SRU rows: its GEMMs alone, the recurrence alone (float32 and bf16 I/O), a copy of as many bytes,
// and the whole layer fused and composed.
void time_sru_rows(LayerCase& c, CaseRows& rows) {
  const sru::Device dev = rows.o.device;
  const int64_t L = c.L, B = c.B, d = c.d, M = L * B;
  // The SRU layer's three GEMMs: U = x W, dW = x^T dU, dx = dU W^T.
  Tensor w = Tensor::uniform({d, 3 * d}, -0.1, 0.1, sru::DType::F32, c.gen).to(dev);
  Tensor gU = Tensor::uniform({M, 3 * d}, -1, 1, sru::DType::F32, c.gen).to(dev);
  rows.record("gemm", [&] {
    sru::autograd::NoGradGuard no_grad;
    sru::matmul(c.x, w);
    sru::matmul(c.x.view({M, d}), gU, true, false);
    sru::matmul(gU, w, false, true);
  });
  // The fused elementwise recurrence alone (forward + backward), on a precomputed U.
  sru::SruRecurrenceOptions ro;
  ro.hidden_size = d;
  Tensor U = Tensor::uniform({L, B, 3 * d}, -1, 1, sru::DType::F32, c.gen).to(dev).set_requires_grad(true);
  Tensor vc = Tensor::uniform({2 * d}, -1, 1, sru::DType::F32, c.gen).to(dev).set_requires_grad(true);
  Tensor bias = Tensor::zeros({2 * d}, sru::DType::F32, dev).set_requires_grad(true);
  // Minimum traffic per (t, b, unit), in floats: forward reads U (3) and x, writes h and c;
  // backward reads U (3), x, c and grad h, writes grad U (3) and grad x. 16 floats in all.
  const double recurrence_bytes = 16.0 * sizeof(float) * L * B * d;
  Tensor x_leaf = c.x.clone().set_requires_grad(true);  // so that grad x is written, as counted
  rows.record("recurrence", [&] {
    // Gradients stored, not added to the last run's: the row times the recurrence, not an add.
    for (Tensor* t : {&U, &x_leaf, &vc, &bias}) t->set_grad(Tensor());
    auto [h, cell] = sru::sru_recurrence(U, x_leaf, vc, bias, Tensor(), Tensor(), Tensor(), ro);
    sru::autograd::backward(h, c.grad_h);
  }, recurrence_bytes);
  // The same with bf16 I/O (ops/sru_recurrence.h): U, x, h and their gradients in bf16, c in float32.
  // Minimum traffic in bytes: forward U 3 x 2, x 2, h 2, c 4; backward U 3 x 2, x 2, c 4, grad h 2,
  // grad U 3 x 2, grad x 2: 36 in all (64 at float32).
  if (rows.wants("recurrence_bf16")) {
    Tensor U16 = U.detach().to(sru::DType::BF16).set_requires_grad(true);
    Tensor x16 = c.x.to(sru::DType::BF16).set_requires_grad(true);
    const Tensor grad_h16 = c.grad_h.to(sru::DType::BF16);
    rows.record("recurrence_bf16", [&] {
      for (Tensor* t : {&U16, &x16, &vc, &bias}) t->set_grad(Tensor());
      auto [h, cell] = sru::sru_recurrence(U16, x16, vc, bias, Tensor(), Tensor(), Tensor(), ro);
      sru::autograd::backward(h, grad_h16);
    }, 36.0 * L * B * d);
  }
  // A plain copy moving as many bytes (half read, half written): the bandwidth ceiling.
  Tensor copy_src = Tensor::zeros({static_cast<int64_t>(recurrence_bytes / 8)}, sru::DType::F32, dev);
  Tensor copy_dst = Tensor::empty(copy_src.shape(), sru::DType::F32, dev);
  rows.record("copy", [&] { copy_dst.copy_(copy_src); }, recurrence_bytes);
  nn::SRUOptions so;
  so.input_size = d;
  so.hidden_size = d;
  so.num_layers = 1;
  nn::SRU layer(so, c.gen);
  layer.to(dev);
  Tensor xin = c.x.clone().set_requires_grad(true);
  auto run_sru = [&](nn::SRUImplementation impl) {
    layer.set_implementation(impl);
    return [&, impl] {
      layer.zero_grad();
      sru::autograd::backward(layer.forward(xin).first, c.grad_h);
    };
  };
  rows.record("sru_fused", run_sru(nn::SRUImplementation::Fused));
  rows.record("sru_composed", run_sru(nn::SRUImplementation::Composed));
}

// The LSTM rows: its GEMMs alone, and the layer fused (cuDNN on a GPU) and composed; returns the name of
// the LSTM row the others are compared with.
std::string time_lstm_rows(LayerCase& c, CaseRows& rows) {
  const sru::Device dev = rows.o.device;
  const int64_t L = c.L, B = c.B, d = c.d, M = L * B;
  // The LSTM layer's GEMMs alone: x W_ih^T, per step h W_hh^T and dG_t W_hh, then dx, dW_ih, dW_hh.
  Tensor w_ih = Tensor::uniform({4 * d, d}, -0.1, 0.1, sru::DType::F32, c.gen).to(dev), w_hh = w_ih.clone();
  Tensor gG = Tensor::uniform({M, 4 * d}, -1, 1, sru::DType::F32, c.gen).to(dev);
  rows.record("lstm_gemm", [&] {
    sru::autograd::NoGradGuard no_grad;
    sru::matmul(c.x, w_ih, false, true);
    for (int64_t t = 0; t < L; ++t) {
      sru::matmul(c.x.narrow0(t, 1).view({B, d}), w_hh, false, true);
      sru::matmul(gG.narrow0(t * B, B), w_hh);
    }
    sru::matmul(gG, w_ih);
    sru::matmul(gG, c.x.view({M, d}), true, false);
    sru::matmul(gG, c.x.view({M, d}), true, false);
  });
  nn::LSTMOptions lo;
  lo.input_size = d;
  lo.hidden_size = d;
  nn::LSTM lstm(lo, c.gen);
  lstm.to(dev);
  Tensor xin = c.x.clone().set_requires_grad(true);
  auto run_lstm = [&](nn::LSTMImplementation impl) {
    return [&, impl] {
      lstm.set_implementation(impl);
      lstm.zero_grad();
      sru::autograd::backward(lstm.forward(xin).output, c.grad_h);
    };
  };
  // On a GPU nn::LSTM runs through cuDNN: its row is called lstm_cudnn there (and has no composed twin).
  const std::string lstm_name = dev.is_cuda() ? "lstm_cudnn" : "lstm";
  rows.record(lstm_name, run_lstm(nn::LSTMImplementation::Fused));
  if (!dev.is_cuda()) rows.record("lstm_composed", run_lstm(nn::LSTMImplementation::Composed));
  return lstm_name;
}

}  // namespace

// Forward + backward of one layer (n_in = d) per implementation; every row also reports its time
// relative to the GEMMs alone and to the LSTM at the same size. `recurrence` and `copy` rows also
// report bandwidth: bytes read + written over time (the recurrence's minimum traffic, above).
void bench_sru_vs_lstm(Report& report, const LayerBenchOptions& o) {
  for (int64_t v : o.lengths) SRU_CHECK(v > 0, "srubench sru-vs-lstm: --lengths must be positive, got ", v);
  for (int64_t v : o.hidden) SRU_CHECK(v > 0, "srubench sru-vs-lstm: --hidden sizes must be positive, got ", v);
  for (int64_t L : o.lengths)
    for (int64_t d : o.hidden) {
      LayerCase c{L, o.batch, d, Tensor(), Tensor()};
      c.x = Tensor::uniform({L, o.batch, d}, -1, 1, sru::DType::F32, c.gen).to(o.device);
      c.grad_h = Tensor::ones({L, o.batch, d}, sru::DType::F32, o.device);
      CaseRows rows{o, {}};
      time_sru_rows(c, rows);
      const std::string lstm_name = time_lstm_rows(c, rows);
      for (const CaseRows::Measured& m : rows.times) {
        Row row{m.impl, o.device.str(), {}};
        row.set("L", L).set("B", o.batch).set("d", d).set("ms", m.ms);
        if (m.bytes > 0) row.set("gbps", m.bytes / (m.ms * 1e6));
        if (rows.time_of("gemm") > 0 && m.bytes == 0) row.set("x_gemm", m.ms / rows.time_of("gemm"));
        if (rows.time_of(lstm_name) > 0 && m.bytes == 0) row.set("lstm_over_this", rows.time_of(lstm_name) / m.ms);
        if (o.timing.cpu_time) row.set("cpu_clock", 1);
        report.add(row);
      }
    }
}

}  // namespace sru::bench
