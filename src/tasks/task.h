// What a task supplies to the shared trainer: its model, its training batches (as a forward pass
// returning the loss), its evaluation metrics, and any extra state a resumed run needs.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "config/config.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "nn/module.h"

namespace sru::tasks {

using Metrics = std::map<std::string, double>;

struct StepResult {
  Tensor loss;     // scalar: the mean loss to minimise
  int64_t tokens;  // how many predictions it covers (for tokens/s)
};

class Task {
 public:
  virtual ~Task() = default;
  virtual nn::Module& model() = 0;
  virtual int64_t model_size() const = 0;       // the d of the noam schedule
  virtual int64_t steps_per_epoch() const = 0;
  // Called before step `first_step` of `epoch`: 0 at the start of an epoch, or where a resumed run
  // continues in the middle of one (the task must then recreate the same epoch, e.g. its batch order).
  virtual void start_epoch(int64_t epoch, int64_t first_step) = 0;
  // Forgets state carried between steps (after a skipped non-finite step, which may have poisoned it).
  virtual void reset_carried_state() {}
  // The forward pass of training step `index` (0-based within the epoch).
  virtual StepResult forward_step(int64_t index) = 0;
  // Evaluates a split ("valid" or "test") on at most max_batches batches (0 = all), in eval mode.
  virtual Metrics evaluate(const std::string& split, int64_t max_batches) = 0;
  virtual std::string default_metric() const = 0;
  // What one prediction is called in speed reports ("chars" for a char-LM).
  virtual std::string token_name() const { return "tokens"; }
  // What the checkpoint metadata's "vocabulary" says the model's input ids are.
  virtual std::string vocabulary_name() const = 0;
  virtual bool lower_is_better(const std::string& metric) const = 0;
  // State beyond the model and optimiser that a resumed run needs, saved as "task.*" tensors.
  virtual nn::NamedTensors extra_state() { return {}; }
  virtual void load_extra_state(const safetensors::File&) {}
};

// Builds the task named by cfg.task. With load_data false (evaluating a checkpoint on a user file)
// the data files are not read. `checkpoint` (when the model's weights will come from one) supplies
// what the task would otherwise derive from the data, e.g. a vocabulary.
std::unique_ptr<Task> make_task(const config::Config& cfg, Generator& gen, bool load_data = true,
                                const safetensors::File* checkpoint = nullptr);

}  // namespace sru::tasks
