// srubench srupp-layer (see bench/srupp_bench.h): the three layers, their equal-parameter widths, and
// the timing and peak-memory rows.
#include "bench/srupp_bench.h"

#include <cmath>
#include <functional>
#include <memory>
#include <string>

#include "autograd/engine.h"
#include "core/allocator.h"
#include "core/cuda/runtime.h"
#include "nn/attention.h"
#include "nn/layers.h"
#include "nn/sru.h"
#include "nn/srupp.h"
#include "nn/transformer.h"
#include "ops/ops.h"

namespace sru::bench {

namespace {

int64_t srupp_parameters(int64_t d, int64_t p) { return 4 * d * p + 2 * p * p + 2 * p + 1 + 4 * d; }
int64_t sru_parameters(int64_t w) { return 3 * w * w + 4 * w; }
int64_t transformer_parameters(int64_t w) { return 12 * w * w + 13 * w; }

// The width (a multiple of `step`) whose count is nearest to `target`.
int64_t nearest_width(int64_t target, int64_t step, const std::function<int64_t(int64_t)>& count) {
  int64_t best = step;
  for (int64_t w = step; count(w) <= 2 * target; w += step)
    if (std::llabs(count(w) - target) < std::llabs(count(best) - target)) best = w;
  return best;
}

struct Measured {
  double ms = 0, peak_bytes = 0;
};

// Median forward + backward time of fn, and the peak bytes one call allocates above what was live before.
Measured measure(Device device, const std::function<void()>& fn, const TimingOptions& timing) {
  Measured m;
  m.ms = time_on(device, fn, timing).median_ms;
  auto stats = [&] {
    if (device.is_cuda()) {
      cuda::synchronize(device.index);
      return cuda::allocator_stats(device.index);
    }
    return CpuAllocator::instance().stats();
  };
  const size_t before = stats().allocated;
  if (device.is_cuda()) cuda::reset_peak_stats(device.index);
  else CpuAllocator::instance().reset_peak_stats();
  fn();
  m.peak_bytes = static_cast<double>(stats().peak_allocated - before);
  return m;
}

}  // namespace

EqualParameterWidths equal_parameter_widths(int64_t d, int64_t proj, int64_t heads) {
  EqualParameterWidths w;
  w.srupp_params = srupp_parameters(d, proj);
  w.sru_width = nearest_width(w.srupp_params, 1, sru_parameters);
  w.sru_params = sru_parameters(w.sru_width);
  w.transformer_width = nearest_width(w.srupp_params, heads, transformer_parameters);
  w.transformer_params = transformer_parameters(w.transformer_width);
  return w;
}

void bench_srupp_layer(Report& report, const SruppLayerBenchOptions& o) {
  SRU_CHECK(o.proj_ratio > 0 && o.heads > 0 && o.batch > 0, "srubench srupp-layer: --proj-ratio, --heads and --batch "
            "must be positive");
  const Device dev = o.device;
  for (int64_t L : o.lengths)
    for (int64_t d : o.hidden) {
      SRU_CHECK(L > 0 && d > 0, "srubench srupp-layer: --lengths and --hidden must be positive, got ", L, " and ", d);
      const int64_t proj = std::max<int64_t>(1, d / o.proj_ratio);
      SRU_CHECK(proj % o.heads == 0, "srubench srupp-layer: d' = d / proj_ratio = ", proj, " is not divisible by ",
                o.heads, " heads");
      const EqualParameterWidths widths = equal_parameter_widths(d, proj, o.heads);
      Generator gen(1);

      nn::SRUppOptions so;
      so.input_size = so.hidden_size = d;
      so.proj_size = proj;
      so.num_heads = o.heads;
      so.num_layers = 1;
      nn::SRUpp srupp(so, gen);
      nn::SRUOptions ro;
      ro.input_size = ro.hidden_size = widths.sru_width;
      ro.num_layers = 1;
      nn::SRU sru_layer(ro, gen);
      // A pre-norm causal Transformer layer (as most language models now use), FFN inner size 4w.
      nn::TransformerLayerOptions to;
      to.width = widths.transformer_width;
      to.heads = o.heads;
      nn::TransformerLayer block(to, gen);

      struct Entry {
        std::string impl;
        int64_t width;
        nn::Module* module;
        std::function<Tensor(const Tensor&)> forward;
      };
      const std::vector<Entry> entries = {
          {"srupp", d, &srupp,
           [&](const Tensor& x) {
             sru::nn::EncoderStatePtr state;
             return srupp.forward_sequence({x, Tensor(), Tensor()}, state);
           }},
          {"sru", widths.sru_width, &sru_layer, [&](const Tensor& x) { return sru_layer.forward(x).first; }},
          {"transformer", widths.transformer_width, &block, [&](const Tensor& x) { return block.forward(x); }}};
      double sru_ms = 0;
      std::vector<std::pair<const Entry*, Measured>> results;
      for (const Entry& e : entries) {
        e.module->to(dev);
        Tensor x = Tensor::uniform({L, o.batch, e.width}, -1, 1, DType::F32, gen).to(dev).set_requires_grad(true);
        const Tensor grad = Tensor::ones({L, o.batch, e.width}, DType::F32, dev);
        const Measured m = measure(dev, [&] {
          e.module->zero_grad();
          x.set_grad(Tensor());
          autograd::backward(e.forward(x), grad);
        }, o.timing);
        if (e.impl == "sru") sru_ms = m.ms;
        results.emplace_back(&e, m);
      }
      for (const auto& [e, m] : results) {
        Row row{e->impl, dev.str(), {}};
        row.set("L", L).set("B", o.batch).set("d", e->width);
        row.set("params", static_cast<double>(e->module->num_parameters()));
        row.set("ms", m.ms).set("tokens_per_s", static_cast<double>(L * o.batch) / (m.ms / 1000.0));
        row.set("peak_mb", m.peak_bytes / (1 << 20)).set("x_sru", m.ms / sru_ms);
        report.add(row);
      }
    }
}

}  // namespace sru::bench
