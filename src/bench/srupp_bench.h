// `srubench srupp-layer`: one SRU++ layer against one SRU layer and one Transformer-style block
// (causal multi-head attention + feed-forward, pre-layer-norm) of (nearly) equal parameter counts:
// forward + backward time and the peak memory above what was allocated before the call, on the CPU
// or a CUDA device.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/bench.h"
#include "core/device.h"

namespace sru::bench {

struct SruppLayerBenchOptions {
  std::vector<int64_t> lengths = {128, 512};  // L: also the attention context (no memory)
  std::vector<int64_t> hidden = {256, 512};   // d of the SRU++ layer (input and output width)
  int64_t proj_ratio = 4;                     // d' = d / proj_ratio (the reference's base model: 4)
  int64_t heads = 1;                          // attention heads (SRU++ and Transformer)
  int64_t batch = 16;
  TimingOptions timing{2, 7};
  Device device;
};

// Widths of the SRU layer and of the Transformer block (FFN 4x, heads dividing it) whose parameter
// counts come nearest to an SRU++ layer of width d and attention size d'.
struct EqualParameterWidths {
  int64_t srupp_params, sru_width, sru_params, transformer_width, transformer_params;
};
EqualParameterWidths equal_parameter_widths(int64_t d, int64_t proj, int64_t heads);

void bench_srupp_layer(Report& report, const SruppLayerBenchOptions& options);

}  // namespace sru::bench
