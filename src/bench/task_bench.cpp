// srubench train-epoch and eval (see bench/task_bench.h): tasks from configs and checkpoints, timed as
// srutrain trains them and as srueval evaluates them.
#include "bench/task_bench.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>

#include <spdlog/spdlog.h>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "config/config.h"
#include "core/host_sync.h"
#include "core/kernel_count.h"
#include "core/cuda/device_busy.h"
#include "core/cuda/runtime.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "dist/communicator.h"
#include "optim/optimizer.h"
#include "tasks/registry.h"
#include "tasks/translate.h"
#include "train/checkpoint.h"
#include "train/step.h"
#include "train/trainer.h"

namespace sru::bench {

namespace {
// The config at `path` with the overrides; fold 0 of a cross-validation config.
sru::config::Config epoch_config(const std::string& path, std::vector<std::string> overrides) {
  sru::config::Config cfg = sru::config::load_config(path, overrides);
  if (const auto plan = sru::tasks::cross_validation_plan(cfg)) {
    overrides.push_back(plan->fold_key + "=0");
    cfg = sru::config::load_config(path, overrides);
  }
  return cfg;
}

// Runs `steps` more steps (which end synchronised) with CUPTI's activity records on and adds the GPU's
// idle share of their wall time and its busy ms per step to the row; without CUPTI a warning says why.
template <typename F>
void add_idle_share(Row& row, const F& run_steps, int64_t steps) {
  std::string why_not;
  const std::optional<sru::cuda::DeviceBusy> busy = sru::cuda::measure_device_busy(run_steps, &why_not);
  if (!busy) {
    spdlog::warn("srubench train-epoch --idle-share: {}", why_not);
    return;
  }
  const double n = static_cast<double>(std::max<int64_t>(steps, 1));
  row.set("idle_share", busy->idle_share());
  row.set("busy_ms_per_step", busy->busy_ms / n);
  // Beside kernels_per_step: far fewer records than dispatches would say CUPTI missed work.
  row.set("cupti_records_per_step", static_cast<double>(busy->records) / n);
}

// Runs `steps` steps under the host profile and prints its table: the host time charged to each op's
// marks (from its mark to the next: allocation, autograd records, argument checks and the launch), per
// step, largest first, then the rest and the total.
template <typename F>
void print_host_profile(const std::string& impl, const F& run_steps, int64_t steps, int top) {
  start_host_profile();
  run_steps();  // on every rank: the steps hold collectives
  const std::vector<HostProfileEntry> entries = stop_host_profile();
  if (!sru::dist::world().is_root()) return;  // rank 0 reports, as the tables
  double total_us = 0;
  for (const HostProfileEntry& e : entries) total_us += e.total_us;
  const double n = static_cast<double>(std::max<int64_t>(steps, 1));
  std::printf("# host profile: %s, %lld steps, %.3f host ms a step between its first and last mark\n", impl.c_str(),
              static_cast<long long>(steps), total_us / n / 1000);
  std::printf("| op | marks/step | us/step | us/mark | share |\n|---|---|---|---|---|\n");
  double rest_us = 0, rest_marks = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const HostProfileEntry& e = entries[i];
    if (static_cast<int>(i) >= top) {
      rest_us += e.total_us;
      rest_marks += static_cast<double>(e.marks);
      continue;
    }
    std::printf("| %s | %.1f | %.1f | %.2f | %.1f%% |\n", e.name.c_str(), static_cast<double>(e.marks) / n,
                e.total_us / n, e.total_us / static_cast<double>(e.marks), 100 * e.total_us / std::max(total_us, 1e-9));
  }
  if (rest_marks > 0)
    std::printf("| (%zu more) | %.1f | %.1f | %.2f | %.1f%% |\n", entries.size() - static_cast<size_t>(top),
                rest_marks / n, rest_us / n, rest_us / rest_marks, 100 * rest_us / std::max(total_us, 1e-9));
  std::fflush(stdout);
}
}  // namespace

namespace {
// As srutrain sets a run up: the ranks checked, the device chosen with the config's precision and
// attention, the model moved there (and with --idle-share, CUPTI hooked in before the run makes its
// CUDA graphs). Returns the device.
sru::Device train_on_device(const sru::config::Config& cfg, sru::tasks::Task& task, sru::dist::Communicator& comm,
                            bool idle_share) {
  sru::train::check_data_parallel(cfg, task, comm);
  comm.set_timeout(cfg.train.dist_timeout_s);
  const sru::Device device = sru::train::resolve_train_device(cfg.train.device, comm);
  sru::train::apply_precision(cfg.train, device);
  sru::train::apply_attention_kernel(cfg.train);
  if (idle_share && device.is_cuda())
    if (const std::string why = sru::cuda::prepare_device_busy(); !why.empty())
      spdlog::warn("srubench train-epoch --idle-share: {}", why);
  task.model().to(device);
  comm.use_device(device);
  return device;
}
}  // namespace

// Training epochs of each config (fold 0 for cross-validation configs), timed one epoch (or
// --steps steps, scaled to an epoch) per repeat after untimed warm-up steps. Each step is srutrain's
// (train::TrainingStep): same clipping, non-finite policy and learning-rate schedule, and the same
// grouping of train.accumulate batches per step (steps count optimiser updates). Under mpirun the
// epochs are data-parallel, as srutrain's (rank 0 reports its clock; tokens/s counts every rank's).
void bench_train_epoch(Report& report, const EpochBenchOptions& o) {
  sru::dist::Communicator& comm = sru::dist::world();
  double first_seconds = 0;
  for (const std::string& path : o.configs) {
    const sru::config::Config cfg = epoch_config(path, o.overrides);
    sru::Generator gen(static_cast<uint64_t>(cfg.train.seed));
    auto task = sru::tasks::make_task(cfg, gen, {true, nullptr, &comm});
    const sru::Device device = train_on_device(cfg, *task, comm, o.idle_share);
    const auto optimizer = sru::train::make_optimizer(cfg.train, task->model());
    const int64_t batches = task->steps_per_epoch(), accumulate = cfg.train.accumulate;
    const int64_t per_epoch = sru::train::steps_per_epoch(batches, accumulate);
    const int64_t steps = o.steps > 0 ? std::min(o.steps, per_epoch) : per_epoch;
    const int64_t total_steps = cfg.train.max_steps > 0 ? cfg.train.max_steps : cfg.train.epochs * per_epoch;
    sru::train::TrainingStep step(*task, *optimizer, cfg.train,
                                  sru::train::schedule_options(cfg.train, task->model_size(), total_steps), &comm);
    int64_t epoch = 0, tokens = 0, taken = 0;
    double last_lr = 0;
    auto run_steps = [&](int64_t n) {
      task->start_epoch(epoch, 0);
      for (int64_t i = 0; i < n; ++i) {  // (launched ahead as srutrain does, train.launch_ahead; the last step read)
        const auto read = step.run_ahead(i * accumulate, sru::train::batches_of_step(i * accumulate, batches, accumulate),
                                         ++taken, epoch, {}, i + 1 < n);
        for (const sru::train::StepOutcome& r : read) {
          SRU_CHECK(r.kind != sru::train::StepOutcome::Kind::NonFinite, "srubench train-epoch: ", path, ": non-finite ",
                    r.nonfinite, " at step ", r.step);
          tokens += r.tokens;
          last_lr = r.lr;
        }
      }
      ++epoch;
      if (device.is_cuda()) sru::cuda::synchronize(device.index);  // the host clock times finished work
    };
    // Peak device memory of training: weights, optimiser state and the largest step's activations.
    if (device.is_cuda()) sru::cuda::reset_peak_stats(device.index);
    run_steps(std::min(o.warmup_steps, per_epoch));
    tokens = 0;
    const uint64_t dispatches_before = sru::kernel_dispatches();
    const int64_t replayed_before = step.replayed_steps(), launched_before = step.steps_left_launched();
    const uint64_t waited_before = sru::host_wait_counts().device_wait_ns;
    const auto wall_start = std::chrono::steady_clock::now();
    const auto t = sru::bench::time_cpu([&] { run_steps(steps); }, {0, o.repeats});
    const double timed_steps = static_cast<double>(steps * o.repeats);
    const double kernels_per_step = static_cast<double>(sru::kernel_dispatches() - dispatches_before) / timed_steps;
    // The host's share: its wall time per step less the time it sat blocked in device waits (the step's
    // loss read, the epoch's final synchronisation). On a GPU, host ms close to the step's ms means the
    // step is bound by issuing work (the GPU idles); on the CPU nothing waits and both are the step.
    const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_start).count();
    const double wait_ms = static_cast<double>(sru::host_wait_counts().device_wait_ns - waited_before) / 1e6;
    const double seconds = t.median_ms / 1000.0 * static_cast<double>(per_epoch) / static_cast<double>(steps);
    if (first_seconds == 0) first_seconds = seconds;
    Row row{std::filesystem::path(path).stem().string(), device.str(), {}};
    row.set("params", static_cast<double>(task->model().num_parameters()));
    row.set("steps", static_cast<double>(steps)).set("steps_per_epoch", static_cast<double>(per_epoch));
    row.set("s_per_epoch", seconds);
    row.set("tokens_per_s", static_cast<double>(tokens) / o.repeats / (t.median_ms / 1000.0));
    row.set("vs_first", seconds / first_seconds);
    row.set("steps_taken", static_cast<double>(taken)).set("lr_last", last_lr).set("ranks", comm.size());
    row.set("kernels_per_step", kernels_per_step);  // dispatches (core/kernel_count.h); on a GPU each is >= 1 launch
    // The timed steps that replayed the captured step as a CUDA graph (train.cuda_graphs), as a share.
    row.set("replayed_share", static_cast<double>(step.replayed_steps() - replayed_before) / timed_steps);
    // ... and those left launched while the step before was read (train.launch_ahead), as a share.
    row.set("launched_ahead_share", static_cast<double>(step.steps_left_launched() - launched_before) / timed_steps);
    row.set("ms_per_step", wall_ms / timed_steps);
    row.set("host_ms_per_step", (wall_ms - wait_ms) / timed_steps).set("wait_ms_per_step", wait_ms / timed_steps);
    if (device.is_cuda()) {
      const double peak = static_cast<double>(sru::cuda::allocator_stats(device.index).peak_allocated);
      row.set("peak_device_mb", peak / (1 << 20));
    }
    if (o.idle_share && device.is_cuda()) add_idle_share(row, [&] { run_steps(steps); }, steps);
    report.add(row);
    if (o.host_profile) print_host_profile(row.impl, [&] { run_steps(steps); }, steps, o.host_profile_top);
  }
}

// For each epoch: the steps' graph keys (train::step_graph_keys) and the plan train.cuda_graphs_max
// gives them; for translation the padding, summed over the epoch's batches.
void bench_batch_shapes(Report& report, const BatchShapesOptions& o) {
  for (const std::string& path : o.configs) {
    const sru::config::Config cfg = epoch_config(path, o.overrides);
    sru::Generator gen(static_cast<uint64_t>(cfg.train.seed));
    auto task = sru::tasks::make_task(cfg, gen);
    sru::tasks::StagesSteps* staged = task->staged_steps();
    SRU_CHECK(staged, "srubench batch-shapes: ", path, ": the ", cfg.task, " task does not stage its steps, so its "
              "steps are never captured (train.cuda_graphs)");
    if (const std::string why = staged->why_not_staged(); !why.empty())
      spdlog::warn("srubench batch-shapes: {}: its steps are not staged: {}", path, why);
    const auto* translate = dynamic_cast<const sru::tasks::TranslateTask*>(task.get());
    const int64_t batches = task->steps_per_epoch(), accumulate = cfg.train.accumulate;
    for (int64_t epoch = 0; epoch < o.epochs; ++epoch) {
      task->start_epoch(epoch, 0);
      std::vector<std::vector<std::string>> steps_keys;
      std::set<std::string> shapes;
      int64_t steps = 0;
      sru::tasks::TranslateTask::BatchPadding padding;
      for (int64_t first = 0; first < batches; first += accumulate, ++steps) {
        const int64_t count = sru::train::batches_of_step(first, batches, accumulate);
        if (auto keys = sru::train::step_graph_keys(*staged, first, count, true)) steps_keys.push_back(std::move(*keys));
        for (int64_t i = first; i < first + count; ++i) {
          if (const std::optional<std::string> shape = staged->planned_shape(i)) shapes.insert(*shape);
          if (!translate) continue;
          const sru::tasks::TranslateTask::BatchPadding b = translate->training_batch_padding(i);
          padding.source_pieces += b.source_pieces;
          padding.source_padded += b.source_padded;
          padding.target_pieces += b.target_pieces;
          padding.target_padded += b.target_padded;
        }
      }
      const auto plan = sru::train::plan_graph_keys(steps_keys, steps, static_cast<size_t>(cfg.train.cuda_graphs_max));
      Row row{std::filesystem::path(path).stem().string() + " epoch " + std::to_string(epoch + 1), "cpu", {}};
      row.set("batches", static_cast<double>(batches)).set("steps", static_cast<double>(steps));
      row.set("batch_shapes", static_cast<double>(shapes.size())).set("graph_keys", static_cast<double>(plan.keys));
      row.set("graphs_max", static_cast<double>(cfg.train.cuda_graphs_max));
      row.set("replayable_share", steps > 0 ? static_cast<double>(plan.covered_steps) / static_cast<double>(steps) : 0.0);
      if (translate) {
        const auto per_piece = [](int64_t padded, int64_t pieces) {
          return static_cast<double>(padded) / static_cast<double>(std::max<int64_t>(pieces, 1));
        };
        row.set("source_padded_per_piece", per_piece(padding.source_padded, padding.source_pieces));
        row.set("target_padded_per_piece", per_piece(padding.target_padded, padding.target_pieces));
      }
      report.add(row);
    }
  }
}

// Inference of each checkpoint, two rows each: the task's evaluation of a split (forward passes without
// gradients; words/s over the split) and the encoder alone (model.type built from the checkpoint's
// config, fresh weights: speed does not depend on their values) on one (--length, --batch) batch of
// random token ids and inputs. Median of the repeats;
// vs_first = the first checkpoint's time over this one's.
void bench_eval(Report& report, const EvalBenchOptions& o) {
  double first_model_ms = 0, first_encoder_ms = 0;
  for (const std::string& path : o.checkpoints) {
    const sru::train::LoadedCheckpoint ckpt = sru::train::read_checkpoint(path, o.overrides);
    const sru::config::Config& cfg = ckpt.config;
    sru::Generator gen(1);
    auto task = sru::tasks::make_task(cfg, gen, {/*load_data=*/true, &ckpt.file});
    sru::train::load_model(task->model(), ckpt.file, path);
    task->model().eval();
    const std::string split = o.split.empty() ? task->validation_split() : o.split;
    sru::tasks::Metrics m;
    const auto t_model = sru::bench::time_cpu([&] { m = task->evaluate(split, o.max_batches); }, o.timing);
    const std::string count = task->token_name();
    const double tokens = m.count(count) ? m.at(count) : 0.0;
    // A row of `n` tokens in `ms` (median), relative to the first checkpoint's time `first_ms`.
    auto row = [&](const std::string& part, const sru::nn::Module& params, double n, double ms, double& first_ms) {
      if (first_ms == 0) first_ms = ms;
      Row r{cfg.model.type + " " + part, "cpu", {}};
      r.set("params", static_cast<double>(params.num_parameters())).set(count, n).set("ms", ms);
      r.set(count + "_per_s", n / (ms / 1000.0)).set("vs_first", first_ms / ms);
      return r;
    };
    const std::string metric = task->metrics().front().name;
    report.add(row("model", task->model(), tokens, t_model.median_ms, first_model_ms).set(metric, m.at(metric)));

    // The encoder alone on one evaluation batch.
    int64_t vocab = 0;
    for (const auto& [name, t] : task->model().state())
      if (name == "embedding.weight") vocab = t.size(0);
    const auto encoder = sru::tasks::make_encoder(cfg, cfg.model.embedding_size, gen, vocab);
    encoder->eval();
    const int64_t L = o.length, B = o.batch;
    const Tensor x = Tensor::uniform({L, B, cfg.model.embedding_size}, -1, 1, sru::DType::F32, gen);
    const Tensor tokens_in = Tensor::uniform({L, B}, 0, static_cast<double>(std::max<int64_t>(vocab, 1)) - 0.5,
                                             sru::DType::F64, gen).to(sru::DType::I64);
    const auto t_encoder = sru::bench::time_cpu(
        [&] {
          sru::autograd::NoGradGuard no_grad;
          sru::nn::EncoderStatePtr state;
          encoder->forward_sequence({x, Tensor(), tokens_in}, state);
        },
        {o.timing.warmup, o.timing.repeats * 10});
    report.add(row("encoder", *encoder, static_cast<double>(L * B), t_encoder.median_ms, first_encoder_ms));
  }
}

}  // namespace sru::bench
