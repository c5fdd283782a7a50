// The training loop of one run: builds the task, trains epoch by epoch with the shared step,
// evaluates on the task's validation split, keeps last/best checkpoints, stops early or on Ctrl-C,
// logs (spdlog lines or a progress bar; metrics.jsonl), and ends with summary.json.
#pragma once

#include "train/run_dir.h"

namespace sru::train {

// Exit codes: 0 done, 1 error (message printed), 130 interrupted (checkpoint saved).
constexpr int kExitInterrupted = 130;

// Runs one training run to its end; throws sru::Error for bad input (before anything is overwritten).
int run_training(const RunOptions& options);

}  // namespace sru::train
