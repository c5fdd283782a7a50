// An exponential moving average of a model's trainable weights (train.ema_decay), the one fairseq
// (--ema-decay), OpenNMT-py (-average_decay) and Marian (--exponential-smoothing) keep: after every
// optimiser update number t,
//   t <= start_step:  a = w                      (train.ema_start_step: the average starts from there)
//   t >  start_step:  a = d_t a + (1 - d_t) w,   d_t = min(decay, (1 + n) / (10 + n)), n = t - start_step
// (train.ema_warmup, on by default: TensorFlow's ExponentialMovingAverage with num_updates, OpenNMT-py's
// average_decay; without it d_t = decay, as fairseq's --ema-decay), so the first updates' weights,
// the random initial ones above all, do not linger in the average for ~1 / (1 - decay) updates;
// one tensor a per trainable parameter w, on w's device and of its dtype (Tensor::mul_ and add_, so the
// CPU and CUDA update are the tensor methods' kernels). Data parallel: every rank updates from the same
// weights, so every rank holds the same average.
// Evaluation and checkpoints use the average (train/loop.cpp): InModel puts it into the model's
// parameters for as long as it lives, exchanging the two tensors' contents, so the raw weights wait in
// the average's tensors meanwhile and no model-sized copy is made; a checkpoint's model tensors are
// then the average (what srueval, averaging and the PyTorch export read), and the raw weights go beside
// them as "raw.{name}" (kRawPrefix) for a run to continue from (docs/checkpoint-format.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "nn/module.h"

namespace sru::train {

inline constexpr const char* kRawPrefix = "raw.";

class WeightEma {
 public:
  // params: the trainable parameters (optim::Optimizer::parameters()); 0 < decay < 1. The average
  // starts as a copy of the weights.
  // flat: the model's flat layout (Module::flat_parameters), null for none: when one of its groups is
  // exactly params, the average is laid out as that group's values, updated in two dispatches over the
  // whole buffers and exchanged with them without a copy (FlatParameters::exchange_values).
  WeightEma(const nn::NamedTensors& params, double decay, int64_t start_step, bool warmup = true,
            std::shared_ptr<nn::FlatParameters> flat = nullptr);
  // The decay the update after step `step` uses (above start_step).
  double decay_at(int64_t step) const;

  // After optimiser update number `step` (1-based).
  void update(int64_t step);

  // While alive, the model's parameters hold the average and raw_weights() the raw weights (nested
  // guards do nothing more). The exchange swaps whole tensors' storage (Tensor::swap_data_: no copy);
  // a parameter in flat storage (a view, nn/flat_parameters.h) exchanges values through a scratch
  // buffer made with the average: three copies, and no allocation that could fail.
  class InModel {
   public:
    explicit InModel(WeightEma* ema);  // null: nothing
    ~InModel();
    InModel(const InModel&) = delete;
    InModel& operator=(const InModel&) = delete;

   private:
    WeightEma* ema_;
  };
  bool in_model() const { return in_model_; }
  // Inside InModel: the raw weights as "raw.{name}" tensors, for a checkpoint.
  nn::NamedTensors raw_weights() const;

  // From a checkpoint whose model tensors were just loaded into the parameters: with "raw.*" tensors
  // (written with the average on), the parameters become the raw weights and the average what was
  // loaded; without (a run that had it off), the average starts from the loaded weights. Returns a
  // line saying which, for the log.
  std::string load(const safetensors::File& file, const std::string& path);

 private:
  void exchange();
  nn::NamedTensors params_, average_;
  std::vector<Tensor> scratch_;  // per dtype and device of a view parameter: as large as the largest
  // The flat case: the group, and the average as one buffer laid out as its values (average_ views it).
  std::shared_ptr<nn::FlatParameters> flat_;
  int flat_group_ = -1;
  Tensor average_buffer_;
  double decay_;
  int64_t start_step_;
  bool warmup_;
  bool in_model_ = false;
};

// A checkpoint written with the average on, resumed with it off (or srueval --raw-weights): the trainable
// parameters among `params` get the raw weights back (the average is dropped). Returns whether the file
// had them; raw weights for some trainable parameters only are refused.
bool restore_raw_weights(const nn::NamedTensors& params, const safetensors::File& file, const std::string& path);

}  // namespace sru::train
