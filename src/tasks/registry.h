// The task registry: every task srutrain and srueval can run, each as one entry {name, help, its
// config keys, a factory, an optional cross-validation plan, its srueval scoring subcommands}. A new
// task is a source file pair that defines its Task and a TaskSpec, plus one line in
// src/tasks/registry.cpp; the trainer and srueval never name a task.
#pragma once

#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "dist/communicator.h"
#include "nn/encoder.h"
#include "tasks/task.h"

namespace sru::tasks {

struct TaskContext {
  // false when evaluating a checkpoint on a user's file: the config's data files are not read.
  bool load_data = true;
  // When the weights will come from a checkpoint: what the task would otherwise derive from the data
  // (a vocabulary, the number of classes).
  const safetensors::File* checkpoint = nullptr;
  // The ranks a data-parallel task splits its batches across (null = a single process).
  dist::Communicator* comm = nullptr;
};

// A k-fold cross-validation a config asks for: `run` runs, fold i setting `fold_key` to i.
struct CrossValidationPlan {
  int64_t folds = 0;
  int64_t run = 0;
  std::string fold_key;
};

// A scoring subcommand a task declares (`srueval NAME --OPTION FILE ...`): scores files in the task's
// formats (e.g. predictions against reference data) without a model or config. srueval adds one
// subcommand per scorer of every registered task, so scorer names must be unique across tasks.
struct ScorerOption {
  std::string name;  // the option without its dashes: "data" is --data
  std::string help;
  bool required = true;
};
// The scorer's option values by name (a missing optional option is absent).
using ScorerArgs = std::map<std::string, std::string>;
struct Scorer {
  std::string name, help;
  std::vector<ScorerOption> options;
  // Scores, printing the result to `out` and any notes to `err`; returns the exit status. Errors in
  // the files are thrown as sru::Error (srueval prints them and exits 1).
  std::function<int(const ScorerArgs& args, std::ostream& out, std::ostream& err)> run;
};

struct TaskSpec {
  std::string name, help;
  std::function<config::Options()> make_options;  // the task's own config keys with their defaults
  std::function<std::unique_ptr<Task>(const config::Config&, Generator&, const TaskContext&)> create;
  // Set for tasks that can cross-validate: the plan when this config asks for it, else nullopt.
  std::function<std::optional<CrossValidationPlan>(const config::Config&)> cross_validation;
  // The task's scoring subcommands of srueval (none for most tasks).
  std::vector<Scorer> scorers = {};
};

// Every registered task, in the order the docs list them.
const std::vector<TaskSpec>& task_specs();
// The task named `name`; an unknown name is an error listing the choices and the nearest one.
const TaskSpec& find_task(const std::string& name);
// Every registered task's scorers, in registry order; an error naming both tasks when two declare
// the same scorer name.
std::vector<const Scorer*> scorers();
// Builds the task cfg.task names.
std::unique_ptr<Task> make_task(const config::Config& cfg, Generator& gen, const TaskContext& context = {});
// The cross-validation cfg asks for, if any (only tasks with a plan can).
std::optional<CrossValidationPlan> cross_validation_plan(const config::Config& cfg);

// The sequence encoder model.type names, built from the model section (input_size: what the task feeds
// it; vocab_size: the task's token vocabulary, for encoders with per-token parameters).
std::shared_ptr<nn::SequenceEncoder> make_encoder(const config::Config& cfg, int64_t input_size, Generator& gen,
                                                  int64_t vocab_size = 0);

}  // namespace sru::tasks
