// One training step — forward, loss, backward, the non-finite policy, gradient clipping, the
// optimiser update at the scheduled learning rate, the model's after-update hooks (nn::Module::
// after_update) — shared by srutrain's loop, srubench train-epoch and the tests, so that all three
// train the same way.
#pragma once

#include <string>

#include "config/config.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tasks/task.h"

namespace sru::train {

struct StepOutcome {
  enum class Kind {
    Updated,    // the optimiser took the step
    Skipped,    // non-finite loss or gradient with train.on_nonfinite skip: no update, carried state reset
    NonFinite,  // non-finite with train.on_nonfinite stop: no update; the caller stops
  };
  Kind kind = Kind::Updated;
  double loss = 0, grad_norm = 0, lr = 0;
  int64_t tokens = 0;
  std::string nonfinite;  // "loss" or "gradient norm" when not Updated
};

// The schedule train.* describes for a model of size model_size trained for total_steps steps.
optim::ScheduleOptions schedule_options(const config::TrainConfig& train, int64_t model_size, int64_t total_steps);

class TrainingStep {
 public:
  TrainingStep(tasks::Task& task, optim::Optimizer& optimizer, const config::TrainConfig& train,
               optim::ScheduleOptions schedule);
  // Takes optimiser step number `step` (1-based: the step being taken, which the schedule reads) in
  // epoch `epoch` (0-based) on the task's training batch `index` of that epoch.
  StepOutcome run(int64_t index, int64_t step, int64_t epoch);

 private:
  tasks::Task& task_;
  optim::Optimizer& optimizer_;
  double clip_grad_norm_;
  bool skip_nonfinite_;
  optim::ScheduleOptions schedule_;
};

}  // namespace sru::train
