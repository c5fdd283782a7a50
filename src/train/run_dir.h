// The run directory of one training run and resuming it: choosing and checking the directory, the
// resolved config (config.yaml), reading the checkpoint a resumed run continues from, and writing
// checkpoints that never replace good weights with broken ones.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "train/checkpoint.h"

namespace sru::train {

struct RunOptions {
  std::string config_path;             // new run: the YAML config
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string run_dir;                 // "" = runs/<config name>-<time> (new) ; required for resume
  bool resume = false;                 // continue the run in run_dir from last.safetensors
};

// runs/<config file's stem>-<date>-<time>
std::string default_run_dir(const std::string& config_path);

// The config a run uses: for --resume the run directory's config.yaml, else the config file; both
// with the --set overrides applied and validated. A resumed directory without config.yaml is an error
// saying it is not a run directory.
config::Config resolve_config(const RunOptions& options);

// A run directory checked for training: new (holding no checkpoint) or resumed (its last.safetensors
// read). Nothing is written yet: the caller creates the directory (prepare_run_dir) once the task and
// its data have loaded, so a run that fails on bad input leaves nothing behind.
struct OpenedRun {
  config::Config cfg;
  std::string dir, config_yaml;
  std::optional<LoadedCheckpoint> checkpoint;  // set when resuming
};
OpenedRun open_run(const RunOptions& options);

// Writes DIR/name atomically; refuses (naming the parameter) when a model tensor is not finite, so the
// previous checkpoint stays.
void save_run_checkpoint(const std::string& dir, const std::string& name, tasks::Task& task,
                         const optim::Optimizer* optimizer, const std::string& config_yaml, const Progress& progress);

}  // namespace sru::train
