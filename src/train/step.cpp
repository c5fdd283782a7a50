// The shared training step (see step.h).
#include "train/step.h"

#include <cmath>
#include <limits>

#include "autograd/engine.h"
#include "core/host_sync.h"

namespace sru::train {

optim::ScheduleOptions schedule_options(const config::TrainConfig& train, int64_t model_size, int64_t total_steps) {
  return {train.schedule,   train.lr,    train.warmup_steps, train.decay_steps, train.decay_rate,
          train.min_lr,     model_size,  total_steps,        train.epochs_before_decay};
}

TrainingStep::TrainingStep(tasks::Task& task, optim::Optimizer& optimizer, const config::TrainConfig& train,
                           optim::ScheduleOptions schedule)
    : task_(task),
      optimizer_(optimizer),
      clip_grad_norm_(train.clip_grad_norm),
      skip_nonfinite_(train.on_nonfinite == "skip"),
      schedule_(std::move(schedule)) {}

StepOutcome TrainingStep::run(int64_t index, int64_t step, int64_t epoch) {
  StepOutcome out;
  out.lr = optim::learning_rate(schedule_, step, epoch);
  const tasks::StepResult r = task_.forward_step(index);
  out.tokens = r.tokens;
  // Backward and clipping run before the loss is looked at, so that the loss and the gradient norm come
  // to the host together: the step's one host wait on a GPU. A non-finite loss gives non-finite
  // gradients, which clipping leaves alone and the update below never uses.
  autograd::backward(r.loss);
  const Tensor norm = optim::clip_grad_norm_tensor(optimizer_.parameters(), clip_grad_norm_);
  const std::vector<double> values = read_scalars({r.loss, norm});
  out.loss = values[0];
  out.grad_norm = std::isfinite(out.loss) ? values[1] : std::numeric_limits<double>::quiet_NaN();
  const bool finite = std::isfinite(out.loss) && std::isfinite(out.grad_norm);
  if (!finite) {
    // Never update with a non-finite value; a carried state may hold one too.
    optimizer_.zero_grad();
    out.nonfinite = std::isfinite(out.loss) ? "gradient norm" : "loss";
    out.kind = skip_nonfinite_ ? StepOutcome::Kind::Skipped : StepOutcome::Kind::NonFinite;
    if (skip_nonfinite_) task_.reset_carried_state();
    return out;
  }
  optimizer_.step(out.lr);
  task_.model().after_update();  // e.g. gate clipping: after every update, before anything reads the weights
  optimizer_.zero_grad();
  return out;
}

}  // namespace sru::train
