// `srubench under-load`: how much slower training steps and evaluation run when other processes keep
// cores busy, for each thread count, with the load-aware thread count (core/parallel.h) and without it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/bench.h"

namespace sru::bench {

struct LoadBenchOptions {
  std::vector<std::string> configs;      // training steps of these experiment configs (as train-epoch)
  std::vector<std::string> checkpoints;  // evaluation of these checkpoints' validation split (as eval)
  std::vector<std::string> overrides;    // --set for every config and checkpoint
  std::vector<int> threads{1, 2};
  int busy_cores = 1;       // competing processes, each a busy loop on one core
  int64_t steps = 30;       // timed training steps per repeat
  int64_t max_batches = 0;  // evaluation batches (0 = the whole split)
  int repeats = 3;
  bool compare_fixed = true;  // also run every case with the thread count fixed (SRU_ADAPTIVE_THREADS=0)
};

// One row per (workload "CONFIG:train" / "RUN:eval", thread count, adaptive or fixed): alone_ms alone,
// ms beside `busy_cores` busy processes (a training step, or the whole evaluation), their ratio
// (slowdown), the loaded time over the loaded time of 1 thread in the same mode (vs_1_thread: at most
// 1.2 for 2 threads beside one busy core is the goal), the thread-count changes during the loaded run
// and the cores the other processes were measured to use (others_cores).
void bench_under_load(Report& report, const LoadBenchOptions& options);

}  // namespace sru::bench
