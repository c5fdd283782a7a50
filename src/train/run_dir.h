// The run directory of one training run and resuming it: choosing and checking the directory, the
// resolved config (config.yaml), reading the checkpoint a resumed run continues from, and writing
// checkpoints that never replace good weights with broken ones.
//
// Data parallel: rank 0 alone touches the run directory, and every file access goes through the one
// place below (RunDirectory, open_run, resolve_config with a communicator): rank 0 reads or writes and
// the other ranks get its result — the config, the checkpoint's bytes, an existence check, or its
// error, raised on every rank alike (dist::CollectiveError) — so no rank needs to see rank 0's disk.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "dist/communicator.h"
#include "train/checkpoint.h"
#include "train/tensorboard.h"

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
// saying it is not a run directory. With several ranks, rank 0 reads it and sends it to the others.
config::Config resolve_config(const RunOptions& options, dist::Communicator& comm = dist::single_process());

// A run directory checked for training: new (holding no checkpoint) or resumed (its last.safetensors
// read). Nothing is written yet: the caller creates the directory (RunDirectory::prepare) once the task
// and its data have loaded, so a run that fails on bad input leaves nothing behind.
struct OpenedRun {
  config::Config cfg;
  std::string dir, config_yaml;
  std::optional<LoadedCheckpoint> checkpoint;  // set when resuming
};
OpenedRun open_run(const RunOptions& options, dist::Communicator& comm = dist::single_process());

// A safetensors file of rank 0's disk, on every rank.
safetensors::File load_on_root(dist::Communicator& comm, const std::string& path);

// The run directory as every rank of a run sees it. Collective calls (every rank makes them, in the
// same order): prepare, exists, read_text, write_text, save_checkpoint, load. append_metrics is rank
// 0's alone (the others' calls do nothing).
class RunDirectory {
 public:
  RunDirectory(std::string dir, dist::Communicator& comm);
  const std::string& path() const { return dir_; }
  std::string file(const std::string& name) const;  // DIR/name

  // Creates the directory and checks that it is writable; the metrics log appends to metrics.jsonl.
  void prepare();
  bool exists(const std::string& name);
  std::string read_text(const std::string& name);
  void write_text(const std::string& name, const std::string& text);  // atomically
  void append_metrics(const nlohmann::ordered_json& record);
  // append_metrics also writes the record's numbers to a TensorBoard events file (log.tensorboard);
  // resumed_at_step >= 0 for a resumed run (its checkpoint's step). Rank 0's alone, as append_metrics.
  void log_tensorboard(int64_t resumed_at_step);
  // Writes summary.json (atomically) and its final evaluations to the TensorBoard file, at the run's
  // last step ("steps"). Collective, as write_text.
  void write_summary(const nlohmann::ordered_json& summary);
  // Writes DIR/name atomically; refuses (naming the parameter) when a model tensor or one of `extra`
  // (checkpoint_contents) is not finite, so the previous checkpoint stays. Data parallel: also checks
  // that every rank holds the same weights.
  void save_checkpoint(const std::string& name, tasks::Task& task, const optim::Optimizer* optimizer,
                       const std::string& config_yaml, const Progress& progress, const nn::NamedTensors& extra = {});
  safetensors::File load(const std::string& name);

 private:
  std::string dir_;
  dist::Communicator& comm_;
  std::unique_ptr<TensorBoardLog> tensorboard_;
};

// save_checkpoint of a single process's run directory.
void save_run_checkpoint(const std::string& dir, const std::string& name, tasks::Task& task,
                         const optim::Optimizer* optimizer, const std::string& config_yaml, const Progress& progress);

}  // namespace sru::train
