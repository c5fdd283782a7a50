// srutrain's entry into training, the optimiser factory and the training device.
#include "train/trainer.h"

#include "core/cuda/device_info.h"
#include "tasks/registry.h"
#include "train/cross_validation.h"

namespace sru::train {

std::unique_ptr<optim::Optimizer> make_optimizer(const config::TrainConfig& train, const nn::Module& model) {
  nn::NamedTensors trainable;
  for (auto& [name, t] : model.named_parameters())
    if (t.requires_grad()) trainable.emplace_back(name, t);
  optim::OptimizerOptions oo;
  oo.kind = train.optimizer;
  oo.momentum = train.momentum;
  oo.beta1 = train.beta1;
  oo.beta2 = train.beta2;
  oo.eps = train.eps;
  oo.weight_decay = train.weight_decay;
  return std::make_unique<optim::Optimizer>(trainable, oo);
}

Device resolve_train_device(const std::string& requested) {
  if (requested == "auto") return cuda::device_count() > 0 ? Device::cuda(0) : Device::cpu();
  const Device device = Device::parse(requested);  // the config parser has checked the spelling
  if (device.is_cuda()) {
    const std::string why = cuda::unavailable_reason(device.index);
    SRU_CHECK(why.empty(), "train.device: '", requested, "' is not available: ", why, " (use cpu or auto)");
  }
  return device;
}

int train(const RunOptions& options) {
  const config::Config cfg = resolve_config(options);
  if (const auto plan = tasks::cross_validation_plan(cfg)) return cross_validate(options, cfg, *plan);
  return run_training(options);
}

}  // namespace sru::train
