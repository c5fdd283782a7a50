// One training step — forward, loss, backward, the non-finite policy, gradient clipping, the
// optimiser update at the scheduled learning rate, the model's after-update hooks (nn::Module::
// after_update) — shared by srutrain's loop, srubench train-epoch and the tests, so that all three
// train the same way.
// Data parallel (a communicator of more than one rank): each rank runs forward and backward on its rows
// of the global batch, and the gradients, the loss and the step's votes are summed over the ranks
// (dist::GradientSync) before clipping, so every rank takes the same update.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "config/config.h"
#include "dist/grad_sync.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tasks/task.h"

namespace sru::train {

// What a rank asks of a step's end: stop (Ctrl-C, SIGTERM) or out of time (train.max_seconds). Read
// after backward; in data-parallel training a vote of any rank holds for all, so they stop together.
struct StepVotes {
  bool stop = false;
  bool out_of_time = false;
};

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
  StepVotes votes;        // any rank's
};

// The schedule train.* describes for a model of size model_size trained for total_steps steps.
optim::ScheduleOptions schedule_options(const config::TrainConfig& train, int64_t model_size, int64_t total_steps);

class TrainingStep {
 public:
  // comm: the ranks of a data-parallel run (null or one rank: a single process).
  TrainingStep(tasks::Task& task, optim::Optimizer& optimizer, const config::TrainConfig& train,
               optim::ScheduleOptions schedule, dist::Communicator* comm = nullptr);
  // Takes optimiser step number `step` (1-based: the step being taken, which the schedule reads) in
  // epoch `epoch` (0-based) on the task's training batch `index` of that epoch. `votes` is asked after
  // backward.
  StepOutcome run(int64_t index, int64_t step, int64_t epoch, const std::function<StepVotes()>& votes = {});

 private:
  tasks::Task& task_;
  optim::Optimizer& optimizer_;
  double clip_grad_norm_;
  bool skip_nonfinite_;
  optim::ScheduleOptions schedule_;
  dist::Communicator* comm_;
  std::unique_ptr<dist::GradientSync> sync_;  // data parallel only
};

}  // namespace sru::train
