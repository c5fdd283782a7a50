// The training loop of one run (see loop.h and docs/configs.md for the keys it reads). A step is one
// optimiser update over train.accumulate training batches (train/step.h); steps, max_steps, the
// schedule, evaluation and logging intervals count steps, and Progress::step_in_epoch counts batches
// (checkpoints are written between steps only, so a resumed run regroups the same batches). Data parallel:
// every rank runs this loop in lockstep — the same steps, evaluations and checkpoints, each a
// collective call — and rank 0 alone writes the run directory (RunDirectory) and logs. With a moving
// average of the weights (train.ema_decay), evaluations and checkpoints see the average (WeightEma::
// InModel) and training the raw weights.
#include "train/loop.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include <spdlog/spdlog.h>

#include "core/allocator.h"
#include "core/cuda/runtime.h"
#include "core/kernel_count.h"
#include "core/parallel.h"
#include "tasks/registry.h"
#include "train/run_files.h"
#include "train/step.h"
#include "train/trainer.h"

namespace sru::train {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

nlohmann::ordered_json to_json(const tasks::Metrics& m) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

std::string format_duration(double seconds) {
  const long s = static_cast<long>(seconds);
  std::ostringstream os;
  os << std::setfill('0') << s / 3600 << ":" << std::setw(2) << (s / 60) % 60 << ":" << std::setw(2) << s % 60;
  return os.str();
}

class Trainer {
 public:
  explicit Trainer(const RunOptions& options) : options_(options), comm_(dist::world()) {}
  int run();

 private:
  void setup();
  // Launches the next step (first, count) and takes in the outcomes read meanwhile: false when the run
  // must stop for a non-finite step (train.on_nonfinite stop); `votes`: the step's, once it is read.
  bool train_one_step(int64_t first, int64_t count, StepVotes& votes);
  // Whether step `step`, ending before batch `next_batch`, may stay launched and unread
  // (train.launch_ahead): not when it logs, evaluates, or ends the epoch or the run.
  bool may_stay_launched(int64_t step, int64_t next_batch) const;
  // What a step cost: the time and kernel dispatches of the call that launched it (which also read the
  // step launched before it), counted when the step is read, for an updated step only.
  struct StepCost {
    double seconds = 0;
    uint64_t dispatches = 0;
  };
  // Counts, logs and records a step's outcome; false for a non-finite step under on_nonfinite stop.
  bool take_in(const StepOutcome& r, const StepCost& cost);
  void log_window(const StepOutcome& outcome);
  void evaluate_and_checkpoint();
  void save(const std::string& name);
  void finish(const std::string& reason);
  void progress_line(double loss);
  std::vector<std::string> final_splits() const;

  RunOptions options_;
  dist::Communicator& comm_;
  OpenedRun run_;
  std::unique_ptr<RunDirectory> dir_;
  std::string ranks_;  // describe_ranks
  const config::Config& cfg() const { return run_.cfg; }
  Device train_device_;
  Generator gen_;
  std::unique_ptr<tasks::Task> task_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<TrainingStep> step_;
  Progress progress_;
  tasks::MetricSpec metric_;
  int64_t total_steps_ = 0, steps_per_epoch_ = 0, batches_per_epoch_ = 0;  // steps = optimiser updates
  bool tty_ = false, stop_for_patience_ = false, out_of_time_ = false;
  double epochs_done() const {
    return static_cast<double>(progress_.epoch) +
           static_cast<double>(progress_.step_in_epoch) / static_cast<double>(batches_per_epoch_);
  }
  // Throughput since the last log line, and over the whole run.
  Clock::time_point started_, window_start_;
  double window_loss_ = 0, train_seconds_ = 0;
  int64_t window_steps_ = 0, window_tokens_ = 0, tokens_total_ = 0, skipped_ = 0, timed_steps_ = 0;
  uint64_t window_dispatches_ = 0;  // kernel dispatches of the window's steps
  std::map<int64_t, StepCost> unread_costs_;  // by step: launched, not read yet
};

void Trainer::setup() {
  run_ = open_run(options_, comm_);
  const config::Config& c = cfg();
  comm_.set_timeout(c.train.dist_timeout_s);
  train_device_ = resolve_train_device(c.train.device, comm_);
  apply_precision(c.train, train_device_);
  apply_attention_kernel(c.train);
  set_num_threads(threads_for(c.train.threads, comm_));

  gen_.manual_seed(static_cast<uint64_t>(c.train.seed));
  task_ = tasks::make_task(c, gen_, {true, run_.checkpoint ? &run_.checkpoint->file : nullptr, &comm_});
  check_data_parallel(c, *task_, comm_);
  batches_per_epoch_ = task_->steps_per_epoch();
  SRU_CHECK(batches_per_epoch_ > 0, "task ", c.task, " gives no training steps: its training data (data.path '",
            c.data.path, "') is too small for data.batch_size ", c.data.batch_size);
  steps_per_epoch_ = train::steps_per_epoch(batches_per_epoch_, c.train.accumulate);
  total_steps_ = c.train.max_steps > 0 ? c.train.max_steps : c.train.epochs * steps_per_epoch_;
  metric_ = task_->metric(c.eval.metric.empty() ? task_->metrics().front().name : c.eval.metric);

  task_->model().to(train_device_);  // before the optimiser, whose state follows the parameters' device
  ranks_ = describe_ranks(comm_, c, train_device_, task_->batch_split());
  if (comm_.size() > 1) {
    std::vector<double> on_gpu = {train_device_.is_cuda() ? 1.0 : 0.0};
    comm_.all_reduce_sum(on_gpu, "the ranks' device kinds");
    dist::check_collective(on_gpu[0] == 0 || on_gpu[0] == comm_.size(),
                           "data parallel: some ranks train on a GPU and others on the CPU (" + ranks_ +
                           "); give every machine GPUs or set train.device=cpu");
    comm_.use_device(train_device_);  // NCCL for CUDA gradients
  }
  optimizer_ = make_optimizer(c.train, task_->model());
  step_ = std::make_unique<TrainingStep>(*task_, *optimizer_, c.train,
                                         schedule_options(c.train, task_->model_size(), total_steps_), &comm_);
  // Tests: the captured steps replayed through the CPU twin of a CUDA graph (train/step_graph.h), so that
  // the loop's replays and launching ahead run on a machine without a GPU.
  if (const char* twin = std::getenv("SRU_REPLAY_ON_HOST"); twin && std::string(twin) == "1") {
    step_->replay_on_the_host();
    spdlog::info("SRU_REPLAY_ON_HOST=1: the captured steps replay through the CPU twin (launched ahead: {})",
                 step_->launches_ahead() ? "yes" : "no");
  }

  dir_ = std::make_unique<RunDirectory>(run_.dir, comm_);
  dir_->prepare();
  if (run_.checkpoint) {
    const LoadedCheckpoint& ckpt = *run_.checkpoint;
    const std::string last = dir_->file("last.safetensors");
    load_model(task_->model(), ckpt.file, last);
    optimizer_->load_state(ckpt.file.tensors);
    if (WeightEma* ema = step_->ema()) {
      spdlog::info("{}", ema->load(ckpt.file, last));
    } else if (restore_raw_weights(optimizer_->parameters(), ckpt.file, last)) {
      spdlog::info("train.ema_decay is 0: training continues from the checkpoint's raw weights (raw.*); its weight "
                   "average is dropped");
    }
    task_->load_extra_state(ckpt.file);
    progress_ = ckpt.progress;
    gen_.set_state(progress_.rng_seed, progress_.rng_offset);
    spdlog::info("resuming {} at step {} (epoch {}, {} of {} batches done)", run_.dir, progress_.step,
                 progress_.epoch + 1, progress_.step_in_epoch, batches_per_epoch_);
  }
  dir_->write_text("config.yaml", run_.config_yaml);
  if (c.log.tensorboard) dir_->log_tensorboard(run_.checkpoint ? progress_.step : -1);
  tty_ = c.log.progress && comm_.is_root() && ::isatty(STDOUT_FILENO);
}

void Trainer::save(const std::string& name) {
  SRU_CHECK(!step_->has_launched_step(), "internal: a checkpoint while a step is launched and unread");
  progress_.rng_seed = gen_.seed();
  progress_.rng_offset = gen_.offset();
  WeightEma* ema = step_->ema();
  const WeightEma::InModel average(ema);
  const bool raw = ema && (name != "best.safetensors" || cfg().train.ema_keep_raw);
  dir_->save_checkpoint(name, *task_, optimizer_.get(), run_.config_yaml, progress_,
                        raw ? ema->raw_weights() : nn::NamedTensors{});
}

bool Trainer::may_stay_launched(int64_t step, int64_t next_batch) const {
  const config::Config& c = cfg();
  const bool logs = step % c.log.every_steps == 0, evaluates = c.eval.every_steps > 0 && step % c.eval.every_steps == 0;
  return !logs && !evaluates && step < total_steps_ && next_batch < batches_per_epoch_;
}

bool Trainer::train_one_step(int64_t first, int64_t count, StepVotes& votes) {
  const auto t0 = Clock::now();
  const uint64_t dispatches_before = kernel_dispatches();
  // Asked after backward (or when a replayed step is launched), and summed over the ranks: any rank's
  // Ctrl-C or time limit stops them all after this step.
  const auto ask = [&] {
    const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
    return StepVotes{stop_requested(), cfg().train.max_seconds > 0 && elapsed >= cfg().train.max_seconds};
  };
  const int64_t step = progress_.step + 1;
  const std::vector<StepOutcome> outcomes = step_->run_ahead(first, count, step, progress_.epoch, ask,
                                                             may_stay_launched(step, first + count));
  unread_costs_[step] = {std::chrono::duration<double>(Clock::now() - t0).count(), kernel_dispatches() - dispatches_before};
  ++progress_.step;
  progress_.step_in_epoch += count;
  votes = {};
  for (const StepOutcome& r : outcomes) {
    const auto cost = unread_costs_.extract(r.step);
    if (!take_in(r, cost.empty() ? StepCost{} : cost.mapped())) return false;
    if (r.step == step) votes = r.votes;
  }
  return true;
}

bool Trainer::take_in(const StepOutcome& r, const StepCost& cost) {
  if (r.kind == StepOutcome::Kind::NonFinite) {
    if (comm_.is_root())
      spdlog::error("non-finite {} at step {} (loss {}); stopping. The weights were not updated with it, and "
                    "{}/last.safetensors is the last good checkpoint (lower train.lr, or set train.clip_grad_norm)",
                    r.nonfinite, r.step, r.loss, run_.dir);
    dir_->append_metrics({{"step", r.step}, {"event", "nonfinite"}, {"what", r.nonfinite}});
    return false;
  }
  if (r.kind == StepOutcome::Kind::Skipped) {
    ++skipped_;
    if (comm_.is_root())
      spdlog::warn("non-finite {} at step {}: update skipped, carried state reset ({} so far)", r.nonfinite, r.step,
                   skipped_);
    dir_->append_metrics({{"step", r.step}, {"event", "skipped"}, {"what", r.nonfinite}});
    return true;
  }
  train_seconds_ += cost.seconds;
  window_dispatches_ += cost.dispatches;
  ++timed_steps_;
  tokens_total_ += r.tokens;
  window_loss_ += r.loss;
  window_tokens_ += r.tokens;
  ++window_steps_;
  // (A step that logs is never left launched: it is read in its own call, progress_.step == r.step.)
  if (r.step % cfg().log.every_steps == 0 || r.step == total_steps_) log_window(r);
  return true;
}

void Trainer::log_window(const StepOutcome& r) {
  const double window = std::chrono::duration<double>(Clock::now() - window_start_).count();
  // Memory of the device the model trains on (tensors in use, and their peak).
  const AllocatorStats mem = train_device_.is_cuda() ? cuda::allocator_stats(train_device_.index)
                                                     : CpuAllocator::instance().stats();
  nlohmann::ordered_json rec;
  rec["step"] = progress_.step;
  rec["epoch"] = epochs_done();
  rec["loss"] = window_loss_ / window_steps_;
  rec["lr"] = r.lr;
  rec["grad_norm"] = r.grad_norm;
  rec["tokens_per_s"] = window_tokens_ / window;
  rec["ms_per_step"] = 1000.0 * window / window_steps_;
  // Kernels dispatched by the steps themselves (core/kernel_count.h), not by evaluations between them.
  rec["kernels_per_step"] = static_cast<double>(window_dispatches_) / static_cast<double>(window_steps_);
  rec["memory_mb"] = static_cast<double>(mem.allocated) / (1 << 20);
  rec["peak_memory_mb"] = static_cast<double>(mem.peak_allocated) / (1 << 20);
  dir_->append_metrics(rec);
  if (tty_) {
    progress_line(window_loss_ / window_steps_);
  } else {
    spdlog::info("step {:>7}/{}  epoch {}  loss {:.4f}  lr {:.3g}  |g| {:.3g}  {:.0f} {}/s  {:.1f} ms/step  mem {:.0f} MB",
                 progress_.step, total_steps_, progress_.epoch + 1, window_loss_ / window_steps_, r.lr, r.grad_norm,
                 window_tokens_ / window, task_->token_name(), 1000.0 * window / window_steps_,
                 rec["memory_mb"].get<double>());
  }
  window_loss_ = 0;
  window_steps_ = 0;
  window_tokens_ = 0;
  window_dispatches_ = 0;
  window_start_ = Clock::now();
}

void Trainer::progress_line(double loss) {
  const double done = static_cast<double>(progress_.step) / static_cast<double>(total_steps_);
  const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
  const int width = 30, filled = static_cast<int>(done * width);
  std::cout << "\r[" << std::string(filled, '=') << std::string(width - filled, ' ') << "] " << progress_.step << "/"
            << total_steps_ << "  loss " << std::fixed << std::setprecision(4) << loss << "  ETA "
            << format_duration(done > 0 ? elapsed / done * (1 - done) : 0) << "   " << std::flush;
}

void Trainer::evaluate_and_checkpoint() {
  SRU_CHECK(!step_->has_launched_step(), "internal: an evaluation while a step is launched and unread");
  if (tty_) std::cout << "\n";
  const WeightEma::InModel average(step_->ema());  // evaluated and saved: the average, when on
  const std::string split = task_->validation_split();
  const tasks::Metrics m = task_->evaluate(split, cfg().eval.max_batches);
  const double value = m.at(metric_.name);
  const bool improved = std::isfinite(value) &&
                        (!progress_.has_best || (metric_.higher_is_better ? value > progress_.best_metric
                                                                          : value < progress_.best_metric));
  if (improved) {
    progress_.best_metric = value;
    progress_.has_best = true;
    progress_.best_step = progress_.step;
    progress_.evals_without_improvement = 0;
  } else {
    ++progress_.evals_without_improvement;
  }
  progress_.last_eval_step = progress_.step;
  nlohmann::ordered_json rec;
  rec["step"] = progress_.step;
  rec["epoch"] = epochs_done();
  rec["split"] = split;
  rec["eval"] = to_json(m);
  dir_->append_metrics(rec);
  spdlog::info("eval step {} (epoch {:.2f}): {} {}{}{}", progress_.step, epochs_done(), split,
               tasks::format_metrics(*task_, m), step_->ema() ? " (weight average)" : "", improved ? "  (best)" : "");
  // best before last: last records the best step, so a kill between the two saves must not leave a
  // last that names a best.safetensors which was never written (resuming redoes this evaluation).
  if (improved) save("best.safetensors");
  save("last.safetensors");
  if (cfg().train.early_stop_patience > 0 && progress_.evals_without_improvement >= cfg().train.early_stop_patience)
    stop_for_patience_ = true;
}

std::vector<std::string> Trainer::final_splits() const {
  std::vector<std::string> out;
  for (const std::string& s : task_->splits())
    if (s != "train") out.push_back(s);
  return out;
}

void Trainer::finish(const std::string& reason) {
  const WeightEma::InModel average(step_->ema());  // the final evaluation: of the model last.safetensors holds
  save("last.safetensors");
  nlohmann::ordered_json summary;
  summary["task"] = cfg().task;
  summary["stopped"] = reason;
  summary["steps"] = progress_.step;
  summary["epochs"] = epochs_done();
  nlohmann::ordered_json final_metrics;
  std::string final_line;
  for (const std::string& split : final_splits()) {
    const tasks::Metrics m = task_->evaluate(split, 0);
    final_metrics[split] = to_json(m);
    final_line += (final_line.empty() ? "" : "; ") + split + " " + tasks::format_metrics(*task_, m);
  }
  summary["final"] = final_metrics;
  const bool has_best = dir_->exists("best.safetensors");
  if (has_best) {
    load_model(task_->model(), dir_->load("best.safetensors"), dir_->file("best.safetensors"));
    nlohmann::ordered_json best;
    best["step"] = progress_.best_step;
    best["metric"] = metric_.name;
    best["higher_is_better"] = metric_.higher_is_better;
    for (const std::string& split : final_splits()) best[split] = to_json(task_->evaluate(split, 0));
    summary["best"] = best;
  }
  summary["parameters"] = task_->model().num_parameters();
  summary["wall_time_s"] = std::chrono::duration<double>(Clock::now() - started_).count();
  summary["train_tokens_per_s"] = train_seconds_ > 0 ? tokens_total_ / train_seconds_ : 0.0;
  // Time in training steps (forward, backward, update), without evaluation; this process only.
  summary["train_seconds"] = train_seconds_;
  summary["train_steps_timed"] = timed_steps_;
  summary["seconds_per_epoch"] = timed_steps_ > 0 ? train_seconds_ / timed_steps_ * steps_per_epoch_ : 0.0;
  summary["token"] = task_->token_name();
  summary["skipped_steps"] = skipped_;
  // Replayed steps left launched while the step before was read (train.launch_ahead).
  summary["steps_launched_ahead"] = step_->steps_left_launched();
  summary["device"] = train_device_.str();
  summary["threads"] = requested_threads();           // the most; fewer while other processes kept cores busy
  summary["thread_adaptations"] = thread_adaptations();  // how often the load changed the thread count
  summary["world_size"] = comm_.size();  // data-parallel processes (tokens/s counts all of them)
  summary["backend"] = comm_.backend();
  summary["ranks"] = ranks_;
  summary["commit"] = build_commit();
  dir_->write_summary(summary);
  spdlog::info("final: {}", final_line);
  spdlog::info("run directory {}: config.yaml, metrics.jsonl, last.safetensors{}, summary.json", run_.dir,
               has_best ? ", best.safetensors" : "");
}

int Trainer::run() {
  setup();
  started_ = window_start_ = Clock::now();
  install_stop_handlers();
  const config::Config& c = cfg();
  const std::string accumulating =
      c.train.accumulate > 1 ? fmt::format(" ({} batches, {} per step)", batches_per_epoch_, c.train.accumulate) : "";
  spdlog::info("{} {} model: {} parameters; {} steps per epoch{}, {} steps in all; device {} ({} threads{}); run dir {}",
               c.task, c.model.type, task_->model().num_parameters(), steps_per_epoch_, accumulating, total_steps_,
               train_device_.str(), requested_threads(),
               requested_threads() > 1 && adaptive_threads() ? ", fewer while other processes keep cores busy" : "",
               run_.dir);
  if (comm_.size() > 1) spdlog::info("data parallel: {}", ranks_);
  while (progress_.step < total_steps_ && progress_.epoch < c.train.epochs && !stop_for_patience_) {
    task_->start_epoch(progress_.epoch, progress_.step_in_epoch);
    while (progress_.step_in_epoch < batches_per_epoch_ && progress_.step < total_steps_ && !stop_for_patience_) {
      StepVotes votes;
      if (!train_one_step(progress_.step_in_epoch,
                          batches_of_step(progress_.step_in_epoch, batches_per_epoch_, c.train.accumulate), votes))
        return 1;
      if (c.eval.every_steps > 0 && progress_.step % c.eval.every_steps == 0) evaluate_and_checkpoint();
      if (votes.stop) {
        save("last.safetensors");
        if (tty_) std::cout << "\n";
        if (comm_.is_root())
          spdlog::warn("interrupted at step {}: checkpoint saved; continue with: srutrain --resume {}", progress_.step,
                       run_.dir);
        return kExitInterrupted;
      }
      if (votes.out_of_time) {
        out_of_time_ = true;
        break;
      }
    }
    if (out_of_time_) break;
    if (progress_.step_in_epoch >= batches_per_epoch_) {
      // Advance first, so a checkpoint written by the evaluation resumes in the next epoch.
      ++progress_.epoch;
      progress_.step_in_epoch = 0;
      if (c.eval.every_steps == 0) evaluate_and_checkpoint();
    }
  }
  if (tty_) std::cout << "\n";
  if (progress_.last_eval_step != progress_.step) evaluate_and_checkpoint();  // the final weights are always evaluated
  const std::string reason = out_of_time_         ? "time limit"
                             : stop_for_patience_ ? "early stop"
                             : progress_.step >= total_steps_ ? "max steps" : "epochs";
  finish(reason);
  return 0;
}

}  // namespace

int run_training(const RunOptions& options) { return Trainer(options).run(); }

}  // namespace sru::train
