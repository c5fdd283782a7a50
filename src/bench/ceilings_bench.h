// `srubench ceilings`: this machine's own limits at the SRU's shapes — sgemm GFLOP/s of the layer's
// one big GEMM, the three products of its training step at precision bf16 on each CPU path (rounded
// operands through sgemm, the AVX512-BF16 kernels), elementwise add / memcpy GB/s, Philox draws per second — so that the other
// benchmarks can be read against them. CPU only.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/bench.h"

namespace sru::bench {

struct CeilingOptions {
  std::vector<int64_t> hidden = {256, 512, 1024};
  int64_t length = 128;
  int64_t batch = 32;
  TimingOptions timing;
};

// The sgemm rows, then the add / copy rows, then the dropout_mask / uniform rows, per hidden size.
void bench_ceilings(Report& report, const CeilingOptions& options);

}  // namespace sru::bench
