// Learning-rate schedules (formulas in schedule.h).
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace sru::optim {

double learning_rate(const ScheduleOptions& o, int64_t step, int64_t epoch) {
  SRU_CHECK(step >= 1, "learning_rate: steps count from 1, got ", step);
  const double s = static_cast<double>(step);
  if (o.kind == "constant") return o.lr;
  if (o.kind == "step") return o.lr * std::pow(o.decay_rate, static_cast<double>((step - 1) / std::max<int64_t>(o.decay_steps, 1)));
  if (o.kind == "epoch")
    return o.lr * std::pow(o.decay_rate, static_cast<double>(std::max<int64_t>(0, epoch + 1 - o.epochs_before_decay)));
  if (o.kind == "noam") {
    const double warmup = static_cast<double>(std::max<int64_t>(o.warmup_steps, 1));
    return o.lr / std::sqrt(static_cast<double>(o.model_size)) * std::min(1.0 / std::sqrt(s), s * std::pow(warmup, -1.5));
  }
  if (o.kind == "cosine") {
    if (step <= o.warmup_steps) return o.lr * s / static_cast<double>(o.warmup_steps);
    const double span = static_cast<double>(std::max<int64_t>(o.total_steps - o.warmup_steps, 1));
    const double progress = std::clamp((s - static_cast<double>(o.warmup_steps)) / span, 0.0, 1.0);
    return o.min_lr + (o.lr - o.min_lr) * 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  SRU_FAIL("unknown learning-rate schedule '", o.kind, "'");
}

}  // namespace sru::optim
