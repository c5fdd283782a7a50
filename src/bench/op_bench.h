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
  TimingOptions timing;
};

void bench_ops(Report& report, const OpBenchOptions& options);

}  // namespace sru::bench
