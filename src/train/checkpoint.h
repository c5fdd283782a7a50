// Training checkpoints: one safetensors file holding the model's tensors (their contract names),
// the optimiser state ("optim.*"), task state ("task.*", e.g. carried recurrent state), and metadata:
// format version, the resolved config (YAML), step, epoch, position in the epoch, RNG state, best
// metric so far, the vocabulary. Everything a run needs to continue exactly where it stopped.
#pragma once

#include <optional>
#include <string>

#include "config/config.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "tasks/task.h"

namespace sru::train {

constexpr const char* kFormatVersion = "1";

// Names of a checkpoint's tensors that are not model weights: the optimiser's ("optim.*"), the task's
// ("task.*", e.g. carried recurrent state or a vocabulary) and, with a weight average on, the raw weights
// the run continues from ("raw.*", train/ema.h).
bool is_training_state(const std::string& name);

struct Progress {
  int64_t step = 0;           // optimiser steps taken
  int64_t epoch = 0;          // current epoch (0-based)
  int64_t step_in_epoch = 0;  // training batches of the current epoch already used (= steps with
                              // train.accumulate 1; checkpoints fall between steps)
  uint64_t rng_seed = 0, rng_offset = 0;
  double best_metric = 0.0;
  bool has_best = false;
  int64_t best_step = 0;
  int64_t evals_without_improvement = 0;
  int64_t last_eval_step = -1;  // the step whose evaluation the fields above count (-1: none yet), so a
                                // run resumed from that evaluation's checkpoint does not evaluate it again
};

// What a checkpoint file holds: the tensors (model, "optim.*", "task.*") and the metadata. Calls
// task.extra_state(), which a data-parallel task makes a collective call.
struct CheckpointContents {
  nn::NamedTensors tensors;
  safetensors::Metadata metadata;
};
// `extra`: more training-state tensors (named with one of the prefixes above), e.g. the raw weights.
CheckpointContents checkpoint_contents(tasks::Task& task, const optim::Optimizer* optimizer,
                                       const std::string& config_yaml, const Progress& progress,
                                       const nn::NamedTensors& extra = {});
void save_checkpoint(const std::string& path, tasks::Task& task, const optim::Optimizer* optimizer,
                     const std::string& config_yaml, const Progress& progress);

struct LoadedCheckpoint {
  safetensors::File file;
  config::Config config;
  Progress progress;
};

// Reads a checkpoint's file and metadata (config parsed with `overrides`), checking the format.
LoadedCheckpoint read_checkpoint(const std::string& path, const std::vector<std::string>& overrides = {});
// The same for a file already read (`path` names it in errors).
LoadedCheckpoint read_checkpoint(safetensors::File file, const std::string& path,
                                 const std::vector<std::string>& overrides = {});
// Copies the model tensors of `file` into the module (exact names/shapes/dtypes, all mismatches listed);
// the training state beside them is not read.
void load_model(nn::Module& model, const safetensors::File& file, const std::string& path);

}  // namespace sru::train
