// Benchmark support shared by srubench's subcommands: timing with warm-up and the median of repeats,
// result rows, a plain-text table and the JSON file format
//   {"bench": NAME, "rows": [{"impl": ..., "device": ..., "L": ..., "B": ..., "d": ..., "ms": median, ...}]}.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/device.h"

namespace sru::bench {

struct TimingOptions {
  int warmup = 2;
  int repeats = 10;
  // CPU only: time each repeat with the process's CPU time (all its threads) instead of the wall
  // clock. On a shared machine whose other processes take turns on the cores, the wall clock measures
  // the queue; CPU time measures the work (with one thread: the work of that thread).
  bool cpu_time = false;
};

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
};

// Runs fn warmup times untimed, then `repeats` times timed with a steady clock (or CPU time).
Timing time_cpu(const std::function<void()>& fn, const TimingOptions& options);
// As time_cpu on the CPU; on a CUDA device each repeat is timed with CUDA events around the work fn
// queues (after the warm-up has finished on the device).
Timing time_on(Device device, const std::function<void()>& fn, const TimingOptions& options);

// Keeps all CPU threads busy with GEMMs for `seconds` before the first measurement. On the shared
// VMs this project runs on, the first ~1.5 s of work run up to 3x slower (clock ramp-up / thread
// pool wake-up), which would otherwise penalise whichever row is measured first.
void warm_up_cpu(double seconds);

// One result row: fixed identity fields plus named numeric measurements, printed in insertion order.
struct Row {
  std::string impl;
  std::string device;
  std::vector<std::pair<std::string, double>> fields;  // e.g. {"L", 128}, {"ms", 1.5}, {"gflops", 90}
  Row& set(const std::string& key, double value);
};

class Report {
 public:
  explicit Report(std::string bench) : bench_(std::move(bench)) {}
  void add(Row row) { rows_.push_back(std::move(row)); }
  // Aligned text table, one column per field name in first-seen order.
  std::string table() const;
  // Writes the JSON document to `path` (throws sru::Error naming the path when it cannot).
  void write_json(const std::string& path) const;
  const std::vector<Row>& rows() const { return rows_; }

 private:
  std::string bench_;
  std::vector<Row> rows_;
};

}  // namespace sru::bench
