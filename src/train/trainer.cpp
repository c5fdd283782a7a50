// srutrain's entry into training, the optimiser factory and the training device.
#include "train/trainer.h"

#include <algorithm>
#include <thread>

#include <spdlog/spdlog.h>

#include "core/cuda/device_info.h"
#include "nn/attention.h"
#include "ops/cpu/blas.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/matmul.h"
#include "tasks/registry.h"
#include "train/cross_validation.h"

namespace sru::train {

std::unique_ptr<optim::Optimizer> make_optimizer(const config::TrainConfig& train, nn::Module& model) {
  const std::shared_ptr<nn::FlatParameters> flat = model.flatten_parameters();
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
  oo.weight_decay_exclude = train.weight_decay_exclude;
  return std::make_unique<optim::Optimizer>(trainable, oo, flat);
}

Device resolve_train_device(const std::string& requested) {
  if (requested == "auto") {
    if (cuda::device_count() == 0) return Device::cpu();
    const std::string why = cuda::unavailable_reason(0);  // e.g. a card this build holds no code for
    if (why.empty()) return Device::cuda(0);
    spdlog::warn("train.device auto: training on the CPU: {}", why);
    return Device::cpu();
  }
  const Device device = Device::parse(requested);  // the config parser has checked the spelling
  if (device.is_cuda()) {
    const std::string why = cuda::unavailable_reason(device.index);
    SRU_CHECK(why.empty(), "train.device: '", requested, "' is not available: ", why, " (use cpu or auto)");
  }
  return device;
}

Device resolve_train_device(const std::string& requested, const dist::Communicator& comm) {
  if (comm.size() == 1) return resolve_train_device(requested);
  const std::string mine = "cuda:" + std::to_string(comm.local_rank());
  if (requested == "auto") return resolve_train_device(cuda::device_count() > 0 ? mine : "cpu");
  if (requested == "cuda") return resolve_train_device(mine);
  const Device device = resolve_train_device(requested);
  SRU_CHECK(!device.is_cuda() || comm.local_size() == 1, "train.device: '", requested, "' names one GPU, but ",
            comm.local_size(), " processes share this machine and each needs its own: use cuda or auto (rank r "
            "takes cuda:local_rank)");
  return device;
}

void apply_precision(const config::TrainConfig& train, Device device) {
  const MatmulPrecision precision = parse_precision(train.precision, "train.precision");
  set_matmul_precision(precision);
  if (!device.is_cpu()) return;
  const cpu::BlasKernels& blas = cpu::blas_kernels();
  if (!blas.replaced.empty())
    spdlog::info("OpenBLAS chose its {} (SSE3) kernels for this processor, which it does not know; using {} "
                 "(OPENBLAS_CORETYPE chooses otherwise)",
                 blas.replaced, blas.core);
  if (precision == MatmulPrecision::High)
    spdlog::info("train.precision tf32: the CPU has no TF32, its products stay FP32");
  if (precision == MatmulPrecision::Medium) {
    if (cpu::bf16_dot_kernels_available())
      spdlog::info("train.precision bf16 on the CPU: products on AVX512-BF16 (vdpbf16ps) kernels with FP32 sums, "
                   "the GPU's numbers up to summation order");
    else
      spdlog::info("train.precision bf16 on the CPU: product operands rounded to BF16 in software, as the GPU's "
                   "(the same numbers, slower than fp32 here: this processor has no AVX512-BF16)");
  }
}

void apply_attention_kernel(const config::TrainConfig& train) {
  const nn::AttentionKernel kernel = nn::parse_attention_kernel(train.attention, "train.attention");
  if (kernel != nn::AttentionKernel::Auto) nn::set_attention_kernel(kernel);
}

int threads_for(int64_t requested, const dist::Communicator& comm) {
  if (requested > 0 || comm.local_size() == 1) return static_cast<int>(requested);
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / comm.local_size());
}

void check_data_parallel(const config::Config& cfg, const tasks::Task& task, const dist::Communicator& comm) {
  const int n = comm.size();
  if (n == 1) return;
  dist::check_collective(task.data_parallel(), "task " + cfg.task + " cannot train data-parallel (it does not split "
                                                   "its batches across processes): run it as one process");
  if (!task.batch_split().empty()) return;  // batches of another kind (translation: token budgets)
  dist::check_collective(cfg.data.batch_size % n == 0,
                         "data.batch_size " + std::to_string(cfg.data.batch_size) + " is the global batch, and it does "
                         "not divide among the " + std::to_string(n) + " processes: use a multiple of " +
                         std::to_string(n) + " (each process takes data.batch_size / " + std::to_string(n) + ")");
}

std::string describe_ranks(dist::Communicator& comm, const config::Config& cfg, Device device,
                           const std::string& batch_split) {
  const std::vector<std::string> where = comm.all_gather(device.str() + " on " + comm.host(), "the ranks' devices");
  const int n = comm.size();
  std::string out = std::to_string(n) + (n == 1 ? " process" : " processes") + " (" + comm.backend() + "), global batch ";
  if (!batch_split.empty()) out += batch_split;
  else out += std::to_string(cfg.data.batch_size);
  if (n > 1 && batch_split.empty()) out += " = " + std::to_string(cfg.data.batch_size / n) + " per process";
  for (int r = 0; r < n; ++r) out += (r ? ", rank " : "; rank ") + std::to_string(r) + ": " + where[r];
  return out;
}

int train(const RunOptions& options) {
  const config::Config cfg = resolve_config(options, dist::world());
  if (const auto plan = tasks::cross_validation_plan(cfg)) return cross_validate(options, cfg, *plan);
  return run_training(options);
}

}  // namespace sru::train
