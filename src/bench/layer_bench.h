// `srubench sru-vs-lstm`: forward + backward of one recurrent layer per implementation — the SRU's
// GEMMs alone, its fused recurrence alone, a copy of as many bytes, the SRU layer fused and composed,
// the LSTM's GEMMs alone, the LSTM fused (cuDNN on a GPU) and composed — on the CPU or a CUDA device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "core/device.h"

namespace sru::bench {

struct LayerBenchOptions {
  std::vector<int64_t> lengths = {32, 128};
  std::vector<int64_t> hidden = {256, 512};
  int64_t batch = 32;
  std::vector<std::string> impls = {"gemm",         "recurrence", "copy", "sru_fused",
                                    "sru_composed", "lstm_gemm",  "lstm", "lstm_composed"};
  TimingOptions timing{2, 7};
  Device device;
};

// Every implementation name `impls` accepts (the defaults and the GPU's name of the fused LSTM).
const std::vector<std::string>& layer_bench_impl_names();

// One row per (L, d, implementation); lengths and hidden sizes must be positive.
void bench_sru_vs_lstm(Report& report, const LayerBenchOptions& options);

}  // namespace sru::bench
