// srutrain's entry into training: one run (train/loop.h) or, when the task's config asks for it,
// k-fold cross-validation over runs (train/cross_validation.h); and the pieces every trainer shares:
// the optimiser of train.*, the device of train.device.
#pragma once

#include <memory>
#include <string>

#include "config/config.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "train/loop.h"
#include "train/run_dir.h"

namespace sru::train {

// The optimiser of train.* over the model's trainable parameters (what srutrain and srubench use).
std::unique_ptr<optim::Optimizer> make_optimizer(const config::TrainConfig& train, const nn::Module& model);

// The device train.device names: cpu, cuda, cuda:N, or auto (the first CUDA device when one is
// usable, else the CPU). Throws naming train.device and the reason when a CUDA device is unavailable.
Device resolve_train_device(const std::string& requested);

// Trains to completion; throws sru::Error for bad input (before anything is overwritten).
int train(const RunOptions& options);

}  // namespace sru::train
