// srutrain's entry into training: one run (train/loop.h) or, when the task's config asks for it,
// k-fold cross-validation over runs (train/cross_validation.h); and the pieces every trainer shares:
// the optimiser of train.*, the device of train.device.
#pragma once

#include <memory>
#include <string>

#include "config/config.h"
#include "dist/communicator.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "tasks/task.h"
#include "train/loop.h"
#include "train/run_dir.h"

namespace sru::train {

// The optimiser of train.* over the model's trainable parameters (what srutrain and srubench use), after
// laying them out in flat buffers (nn::Module::flatten_parameters): call it once the model is on its
// training device.
std::unique_ptr<optim::Optimizer> make_optimizer(const config::TrainConfig& train, nn::Module& model);

// The device train.device names: cpu, cuda, cuda:N, or auto (the first CUDA device when one is
// usable, else the CPU). Throws naming train.device and the reason when a CUDA device is unavailable.
Device resolve_train_device(const std::string& requested);
// This rank's device in a data-parallel run: one process per GPU, so cuda and auto give cuda:local_rank
// (auto: the CPU on a machine without a GPU); cuda:N is refused when ranks share the machine.
Device resolve_train_device(const std::string& requested, const dist::Communicator& comm);
// Sets the process's matmul precision (ops/matmul.h) to train.precision; says once what tf32 and bf16
// mean when the device is the CPU.
void apply_precision(const config::TrainConfig& train, Device device);
// train.attention other than auto: the process's attention kernel (nn::set_attention_kernel); auto
// leaves the process's choice (srubench --attention, else nn/attention.h's rule).
void apply_attention_kernel(const config::TrainConfig& train);
// This process's CPU threads: train.threads, or for 0 the machine's cores shared by its ranks.
int threads_for(int64_t requested, const dist::Communicator& comm);
// Refuses what data-parallel training cannot do, on every rank alike: several ranks with a task that
// does not split its batches, or a global batch (data.batch_size) that does not divide among the ranks
// (unless the task's batches are of another kind: Task::batch_split()).
void check_data_parallel(const config::Config& cfg, const tasks::Task& task, const dist::Communicator& comm);
// "2 processes (mpi), global batch 32 = 16 per process; rank 0: cpu on vm, rank 1: cpu on vm" (collective):
// the world size, backend, global batch (data.batch_size, or the task's batch_split()) and each rank's device.
std::string describe_ranks(dist::Communicator& comm, const config::Config& cfg, Device device,
                           const std::string& batch_split = "");

// Trains to completion; throws sru::Error for bad input (before anything is overwritten).
int train(const RunOptions& options);

}  // namespace sru::train
