// The shared training step (see step.h).
#include "train/step.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/engine.h"
#include "core/host_sync.h"
#include "ops/elementwise.h"

namespace sru::train {

optim::ScheduleOptions schedule_options(const config::TrainConfig& train, int64_t model_size, int64_t total_steps) {
  return {train.schedule,   train.lr,    train.warmup_steps, train.decay_steps, train.decay_rate,
          train.min_lr,     model_size,  total_steps,        train.epochs_before_decay};
}

TrainingStep::TrainingStep(tasks::Task& task, optim::Optimizer& optimizer, const config::TrainConfig& train,
                           optim::ScheduleOptions schedule, dist::Communicator* comm)
    : task_(task),
      optimizer_(optimizer),
      clip_grad_norm_(train.clip_grad_norm),
      skip_nonfinite_(train.on_nonfinite == "skip"),
      schedule_(std::move(schedule)),
      comm_(comm) {
  if (comm_ && comm_->size() > 1)
    sync_ = std::make_unique<dist::GradientSync>(*comm_, optimizer_.parameters(), train.dist_bucket_mb, 2,
                                                 task_.model().flat_parameters());
  if (train.ema_decay > 0)
    ema_ = std::make_unique<WeightEma>(optimizer_.parameters(), train.ema_decay, train.ema_start_step, train.ema_warmup,
                                       task_.model().flat_parameters());
}

int64_t steps_per_epoch(int64_t batches, int64_t accumulate) {
  SRU_CHECK(accumulate >= 1, "train.accumulate must be >= 1, got ", accumulate);
  return (batches + accumulate - 1) / accumulate;
}

int64_t batches_of_step(int64_t first, int64_t batches, int64_t accumulate) {
  SRU_CHECK(accumulate >= 1, "train.accumulate must be >= 1, got ", accumulate);
  return std::min(accumulate, batches - first);
}

TrainingStep::Backward TrainingStep::forward_backward(int64_t first, int64_t count, StepOutcome& out) {
  Tensor loss;  // the step's mean loss (this rank's, scaled as its gradients, in data-parallel training)
  double grad_scale = 1.0;
  if (count == 1) {
    const tasks::StepResult r = task_.forward_step(first);
    out.tokens = r.tokens;
    loss = r.loss;
    const auto overlap = sync_ ? sync_->begin(r.share) : nullptr;  // starts finished buckets during backward
    autograd::backward(r.loss);
  } else {
    // Accumulation: backward of w_i L_i per batch, w_i = this rank's share of batch i's loss terms
    // times their number (its terms, in one process); the summed gradients are then scaled by 1 / T,
    // T = all the step's terms (every rank's): by the ranks' sum, or in one process by the update (the
    // factor it multiplies each gradient by, grad_norm_and_clip_factor: no pass over the gradients here).
    // The loss is sum_i w_i L_i / T.
    int64_t terms = 0;
    for (int64_t i = 0; i < count; ++i) {
      const tasks::StepResult r = task_.forward_step(first + i);
      out.tokens += r.tokens;
      terms += r.loss_terms();
      const double w = r.share * static_cast<double>(r.loss_terms());
      {
        autograd::NoGradGuard no_grad;
        const Tensor weighted = r.loss.detach().to(DType::F64) * w;
        loss = i == 0 ? weighted : loss + weighted;
      }
      const double scale = terms > 0 ? 1.0 / static_cast<double>(terms) : 0.0;  // the mean over no terms is 0
      // The ranks' buckets start from the last batch's backward, when every gradient is summed here.
      std::unique_ptr<autograd::LeafGradientHookScope> overlap;
      if (sync_ && i == count - 1) overlap = sync_->begin(scale);
      autograd::backward(w == 1.0 ? r.loss : r.loss * w);
      if (!sync_ && i == count - 1) {
        autograd::NoGradGuard no_grad;
        loss = loss * scale;
        grad_scale = scale;
      }
    }
  }
  return {loss, grad_scale};
}

StepOutcome TrainingStep::run(int64_t first, int64_t count, int64_t step, int64_t epoch,
                              const std::function<StepVotes()>& votes) {
  SRU_CHECK(count >= 1, "a training step needs at least one batch, got ", count);
  StepOutcome out;
  out.lr = optim::learning_rate(schedule_, step, epoch);
  // Backward, clipping and (in one process) the update run before the loss is looked at, so that the
  // loss and the gradient norm come to the host together: the step's one host wait on a GPU. A
  // non-finite loss or norm makes the clip factor NaN, and the update then changes nothing.
  const Backward backward = forward_backward(first, count, out);
  const Tensor& loss = backward.loss;
  const StepVotes mine = votes ? votes() : StepVotes{};
  // What the step reads back, by name, with one host wait: the loss and the gradient norm, and in
  // data-parallel training the ranks' vote counts and their disagreement.
  double loss_value = 0, norm_value = 0, stop_votes = 0, out_of_time_votes = 0, disagreement = 0;
  std::vector<ScalarRead> reads;
  if (sync_) {
    // The sums over the ranks: gradients (each parameter's .grad now views its sum), loss, votes.
    const dist::GradientSync::Result sums = sync_->finish(loss, {mine.stop ? 1.0 : 0.0, mine.out_of_time ? 1.0 : 0.0});
    reads = {{sums.loss, &loss_value}, {sums.votes[0], &stop_votes}, {sums.votes[1], &out_of_time_votes},
             {sums.disagreement, &disagreement}};
  } else {
    reads = {{loss, &loss_value}};
  }
  // The norm and the clip factor (with accumulation's 1 / terms) stay on the device; the update applies
  // the factor (no scaling pass). One process: the update is issued before the host reads anything and
  // skips itself when the loss or the norm is not finite (the factor is NaN then), so the device never
  // waits for the host inside a step. Data parallel reads first: the ranks' disagreement must stop the
  // update.
  const Tensor norm_and_factor =
      optimizer_.grad_norm_and_clip_factor(clip_grad_norm_, backward.grad_scale, reads.front().value /* the loss */);
  const Tensor norm = norm_and_factor.narrow0(0, 1).view({});
  reads.push_back({norm, &norm_value});
  const bool update_first = !sync_;
  if (update_first) optimizer_.step(out.lr, norm_and_factor);
  if (sync_) comm_->await_device(norm.device());
  read_scalars(reads);
  out.loss = loss_value;
  out.grad_norm = std::isfinite(out.loss) ? norm_value : std::numeric_limits<double>::quiet_NaN();
  out.votes = mine;
  if (sync_) {
    out.votes = {stop_votes > 0, out_of_time_votes > 0};
    dist::check_collective(disagreement == 0, "data parallel: the ranks' backward passes reached different parameters "
                                              "(a parameter got a gradient on some ranks only), so their updates would differ");
  }
  const bool finite = std::isfinite(out.loss) && std::isfinite(out.grad_norm);
  if (!finite) {
    // Never update with a non-finite value (the update skipped itself); a carried state may hold one too.
    if (update_first) optimizer_.forget_step();
    optimizer_.zero_grad();
    out.nonfinite = std::isfinite(out.loss) ? "gradient norm" : "loss";
    out.kind = skip_nonfinite_ ? StepOutcome::Kind::Skipped : StepOutcome::Kind::NonFinite;
    if (skip_nonfinite_) task_.reset_carried_state();
    return out;
  }
  if (!update_first) optimizer_.step(out.lr, norm_and_factor);
  task_.model().after_update();  // e.g. gate clipping: after every update, before anything reads the weights
  if (ema_) ema_->update(step);
  optimizer_.zero_grad();
  return out;
}

}  // namespace sru::train
