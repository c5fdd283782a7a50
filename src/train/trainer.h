// The shared training loop behind `srutrain`: builds the task from the config, trains with the
// configured optimiser and schedule, evaluates, keeps last/best checkpoints, logs, and resumes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace sru::train {

struct RunOptions {
  std::string config_path;             // new run: the YAML config
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string run_dir;                 // "" = runs/<config name>-<time> (new) ; required for resume
  bool resume = false;                 // continue the run in run_dir from last.safetensors
};

// Exit codes: 0 done, 1 error (message printed), 130 interrupted (checkpoint saved).
constexpr int kExitInterrupted = 130;

// The config a run uses: for --resume the run directory's config.yaml, else the config file; both
// with the --set overrides applied and validated.
config::Config resolve_config(const RunOptions& options);

// The optimiser of train.* over the model's trainable parameters (what srutrain and srubench use).
std::unique_ptr<optim::Optimizer> make_optimizer(const config::TrainConfig& train, const nn::Module& model);

// The device train.device names: cpu, cuda, cuda:N, or auto (the first CUDA device when one is
// usable, else the CPU). Throws naming train.device and the reason when a CUDA device is unavailable.
Device resolve_train_device(const std::string& requested);

// Runs training to completion; throws sru::Error for bad input (before anything is overwritten).
int train(const RunOptions& options);

}  // namespace sru::train
