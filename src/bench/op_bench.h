// srubench ops: forward + backward time of every op table entry (ops/op_table.h) on one device, the
// bench mode of the op table's harness. Backward seeds every floating output with ones.
#pragma once

#include <string>

#include "bench/bench.h"
#include "core/device.h"

namespace sru::bench {

struct OpBenchOptions {
  Device device = Device::cpu();
  std::string only;    // entries whose name contains this ("" = all)
  bool small = false;  // the entries' small cases (the checks' shapes) instead of their bench case
  // The storage dtype of the inputs ("f32" or "bf16"): bf16 times the entries that list BF16, their
  // storage16 operands in it (the 16-bit kernels against the float32 rows of another run).
  std::string dtype = "f32";
  TimingOptions timing;
};

void bench_ops(Report& report, const OpBenchOptions& options);

}  // namespace sru::bench
