// `srubench train-epoch` and `srubench eval`: whole tasks built from experiment configs or checkpoints
// through the task registry — training epochs (srutrain's steps), and inference (a split's evaluation,
// and the checkpoint's encoder alone on one batch).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/bench.h"

namespace sru::bench {

struct EpochBenchOptions {
  std::vector<std::string> configs;
  std::vector<std::string> overrides;
  int64_t steps = 0;  // 0 = whole epochs
  int64_t warmup_steps = 10;
  int repeats = 3;
  // After the timed repeats, `steps` more steps under the host profile (core/kernel_count.h): a table
  // of host time per op, the `host_profile_top` largest.
  bool host_profile = false;
  int host_profile_top = 30;
  // On a GPU, after the timed repeats, `steps` more steps with CUPTI's activity records on
  // (core/cuda/device_busy.h): the row's idle_share, the share of those steps' wall time in which no
  // kernel, copy or memset ran.
  bool idle_share = false;
};

// Training epochs of each config (fold 0 for cross-validation configs), timed one epoch (or
// `steps` steps, scaled to an epoch) per repeat after untimed warm-up steps. Each step is srutrain's
// (train::TrainingStep): same clipping, non-finite policy and learning-rate schedule. Under mpirun the
// epochs are data-parallel, as srutrain's (rank 0 reports its clock; tokens/s counts every rank's).
void bench_train_epoch(Report& report, const EpochBenchOptions& options);

struct EvalBenchOptions {
  std::vector<std::string> checkpoints;
  std::vector<std::string> overrides;
  std::string split;  // "" = the task's validation split
  int64_t max_batches = 0;
  int64_t length = 35, batch = 10;  // the encoder row's input shape
  TimingOptions timing{1, 5};
};

// Inference of each checkpoint, two rows each: the task's evaluation of a split and the encoder alone
// (model.type built from the checkpoint's config, fresh weights) on one (length, batch) batch.
void bench_eval(Report& report, const EvalBenchOptions& options);

struct BatchShapesOptions {
  std::vector<std::string> configs;
  std::vector<std::string> overrides;
  int64_t epochs = 1;
};

// The training batch shapes of each config (fold 0 for cross-validation configs) and what CUDA graphs
// make of them, without training: per epoch (each epoch's order, for steps of train.accumulate batches)
// the batches, the distinct batch shapes, the graph keys of its steps and the share of steps whose every
// key train.cuda_graphs_max admits (train::plan_graph_keys, as TrainingStep plans an epoch); for
// translation also the positions the batches are padded to per piece, per side (data.pad_to_multiple,
// data.length_buckets). For choosing the padding of a corpus before a GPU run.
void bench_batch_shapes(Report& report, const BatchShapesOptions& options);

}  // namespace sru::bench
