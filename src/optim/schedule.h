// Learning-rate schedules: lr(step, epoch) for step = 1, 2, ... (the step being taken) and the current
// epoch (0-based).
//   constant: lr
//   step:     lr * decay_rate ^ floor((step - 1) / decay_steps)
//   epoch:    lr * decay_rate ^ max(0, epoch + 1 - epochs_before_decay): the first epochs_before_decay
//             epochs at lr, then one decay per epoch (1, the default: lr * decay_rate ^ epoch; Zaremba
//             et al. 2014's medium LSTM: 6 epochs at 1.0, then / 1.2 per epoch)
//   noam:     lr * d^-0.5 * min(step^-0.5, step * warmup^-1.5)   (Vaswani et al.; lr is the factor,
//             d the model's hidden size; as the SRU paper's enwik8 setup)
//   cosine:   linear warm-up to lr over warmup steps, then min_lr + (lr - min_lr)(1 + cos(pi s)) / 2,
//             s = (step - warmup) / (total - warmup) clamped to [0, 1]
#pragma once

#include <cstdint>
#include <string>

namespace sru::optim {

struct ScheduleOptions {
  std::string kind = "constant";
  double lr = 1e-3;
  int64_t warmup_steps = 0;
  int64_t decay_steps = 1;
  double decay_rate = 1.0;
  double min_lr = 0.0;
  int64_t model_size = 1;   // noam's d
  int64_t total_steps = 1;  // cosine's horizon
  int64_t epochs_before_decay = 1;  // epoch
};

double learning_rate(const ScheduleOptions& options, int64_t step, int64_t epoch);

}  // namespace sru::optim
