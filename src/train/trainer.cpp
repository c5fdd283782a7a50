// The training loop (see trainer.h and docs/configs.md for the keys it reads).
#include "train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include <spdlog/spdlog.h>

#include "autograd/engine.h"
#include "core/allocator.h"
#include "core/cuda/device_info.h"
#include "core/cuda/runtime.h"
#include "core/host_sync.h"
#include "core/parallel.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"
#include "train/run_files.h"

namespace sru::train {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

std::string default_run_dir(const std::string& config_path) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::ostringstream os;
  os << "runs/" << fs::path(config_path).stem().string() << "-" << std::put_time(&tm, "%Y%m%d-%H%M%S");
  return os.str();
}


nlohmann::ordered_json to_json(const tasks::Metrics& m) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

std::string format_metrics(const tasks::Metrics& m) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(4);
  bool first = true;
  for (const auto& [k, v] : m) {
    if (k == "chars") continue;
    os << (first ? "" : "  ") << k << " " << v;
    first = false;
  }
  return os.str();
}

std::string format_duration(double seconds) {
  const long s = static_cast<long>(seconds);
  std::ostringstream os;
  os << std::setfill('0') << s / 3600 << ":" << std::setw(2) << (s / 60) % 60 << ":" << std::setw(2) << s % 60;
  return os.str();
}

class Trainer {
 public:
  Trainer(const RunOptions& options) : options_(options) {}
  int run();

 private:
  void setup();
  bool train_one_step(int64_t index);  // false: stop requested by a non-finite value
  void evaluate_and_checkpoint();
  void save(const std::string& name);
  void finish(const std::string& reason);
  void progress_line(double loss);

  RunOptions options_;
  config::Config cfg_;
  std::string config_yaml_, run_dir_;
  Device train_device_;
  Generator gen_;
  std::unique_ptr<tasks::Task> task_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  optim::ScheduleOptions schedule_;
  Progress progress_;
  std::unique_ptr<MetricsLog> log_;
  std::string metric_;
  int64_t total_steps_ = 0, steps_per_epoch_ = 0;
  bool lower_better_ = true, tty_ = false, stop_for_patience_ = false, out_of_time_ = false;
  int64_t last_eval_step_ = -1;
  double epochs_done() const {
    return static_cast<double>(progress_.epoch) +
           static_cast<double>(progress_.step_in_epoch) / static_cast<double>(steps_per_epoch_);
  }
  // Throughput since the last log line, and over the whole run.
  Clock::time_point started_, window_start_;
  double window_loss_ = 0, train_seconds_ = 0;
  int64_t window_steps_ = 0, window_tokens_ = 0, tokens_total_ = 0, skipped_ = 0, timed_steps_ = 0;
};

void Trainer::setup() {
  if (options_.resume) {
    SRU_CHECK(!options_.run_dir.empty(), "--resume needs the run directory to continue (--resume DIR)");
    run_dir_ = options_.run_dir;
    const std::string last = (fs::path(run_dir_) / "last.safetensors").string();
    SRU_CHECK(fs::exists(last), "--resume ", run_dir_, ": there is no checkpoint to resume from (", last,
              " does not exist)");
    cfg_ = resolve_config(options_);
  } else {
    cfg_ = resolve_config(options_);
    run_dir_ = options_.run_dir.empty() ? default_run_dir(options_.config_path) : options_.run_dir;
    SRU_CHECK(!fs::exists(fs::path(run_dir_) / "last.safetensors"), "run directory '", run_dir_,
              "' already holds a checkpoint: continue it with --resume ", run_dir_, ", or choose another --run-dir");
  }
  config_yaml_ = cfg_.to_yaml();
  train_device_ = resolve_train_device(cfg_.train.device);
  set_num_threads(static_cast<int>(cfg_.train.threads));

  std::optional<LoadedCheckpoint> ckpt;
  if (options_.resume) ckpt = read_checkpoint((fs::path(run_dir_) / "last.safetensors").string());
  gen_.manual_seed(static_cast<uint64_t>(cfg_.train.seed));
  task_ = tasks::make_task(cfg_, gen_, /*load_data=*/true, ckpt ? &ckpt->file : nullptr);
  steps_per_epoch_ = task_->steps_per_epoch();
  SRU_CHECK(steps_per_epoch_ > 0, "the training data gives no training steps (data.path '", cfg_.data.path,
            "' is too short for data.batch_size and data.bptt)");
  total_steps_ = cfg_.train.max_steps > 0 ? cfg_.train.max_steps : cfg_.train.epochs * steps_per_epoch_;
  metric_ = cfg_.eval.metric.empty() ? task_->default_metric() : cfg_.eval.metric;
  lower_better_ = task_->lower_is_better(metric_);

  task_->model().to(train_device_);  // before the optimiser, whose state follows the parameters' device
  optimizer_ = make_optimizer(cfg_.train, task_->model());
  schedule_ = {cfg_.train.schedule, cfg_.train.lr,         cfg_.train.warmup_steps, cfg_.train.decay_steps,
               cfg_.train.decay_rate, cfg_.train.min_lr, task_->model_size(),     total_steps_};

  prepare_run_dir(run_dir_);
  if (ckpt) {
    load_model(task_->model(), ckpt->file, (fs::path(run_dir_) / "last.safetensors").string());
    optimizer_->load_state(ckpt->file.tensors);
    task_->load_extra_state(ckpt->file);
    progress_ = ckpt->progress;
    gen_.set_state(progress_.rng_seed, progress_.rng_offset);
    spdlog::info("resuming {} at step {} (epoch {}, {} of {} steps done)", run_dir_, progress_.step,
                 progress_.epoch + 1, progress_.step_in_epoch, steps_per_epoch_);
  }
  write_file_atomic((fs::path(run_dir_) / "config.yaml").string(), config_yaml_);
  log_ = std::make_unique<MetricsLog>((fs::path(run_dir_) / "metrics.jsonl").string());
  tty_ = cfg_.log.progress && ::isatty(STDOUT_FILENO);
}

void Trainer::save(const std::string& name) {
  // Never replace a good checkpoint with broken weights.
  for (const auto& [pname, param] : task_->model().state()) {
    bool finite = true;
    const Tensor t = param.to(Device::cpu());
    SRU_DISPATCH_FLOATING(t.dtype(), "checkpoint check", [&]<typename T>() {
      const T* d = t.data<T>();
      for (int64_t i = 0; i < t.numel() && finite; ++i) finite = std::isfinite(d[i]);
    });
    SRU_CHECK(finite, "not saving ", run_dir_, "/", name, " at step ", progress_.step, ": parameter '", pname,
              "' holds NaN or inf values (the previous checkpoint is kept; lower train.lr or set train.clip_grad_norm)");
  }
  progress_.rng_seed = gen_.seed();
  progress_.rng_offset = gen_.offset();
  save_checkpoint((fs::path(run_dir_) / name).string(), *task_, optimizer_.get(), config_yaml_, progress_);
}

bool Trainer::train_one_step(int64_t index) {
  const auto t0 = Clock::now();
  const double lr = optim::learning_rate(schedule_, progress_.step + 1, progress_.epoch);
  tasks::StepResult r = task_->forward_step(index);
  // Backward and clipping run before the loss is looked at, so that the loss and the gradient norm come
  // to the host together: the step's one host wait on a GPU. A non-finite loss gives non-finite
  // gradients, which clipping leaves alone and the update below never uses.
  autograd::backward(r.loss);
  const Tensor norm = optim::clip_grad_norm_tensor(optimizer_->parameters(), cfg_.train.clip_grad_norm);
  const std::vector<double> values = read_scalars({r.loss, norm});
  const double loss = values[0];
  const double grad_norm = std::isfinite(loss) ? values[1] : std::numeric_limits<double>::quiet_NaN();
  const bool finite = std::isfinite(loss) && std::isfinite(grad_norm);
  if (!finite) {
    optimizer_->zero_grad();
    const std::string what = std::isfinite(loss) ? "gradient norm" : "loss";
    if (cfg_.train.on_nonfinite == "stop") {
      spdlog::error("non-finite {} at step {} (loss {}); stopping. The weights were not updated with it, and "
                    "{}/last.safetensors is the last good checkpoint (lower train.lr, or set train.clip_grad_norm)",
                    what, progress_.step + 1, loss, run_dir_);
      log_->write({{"step", progress_.step + 1}, {"event", "nonfinite"}, {"what", what}});
      return false;
    }
    ++skipped_;
    task_->reset_carried_state();
    spdlog::warn("non-finite {} at step {}: update skipped, carried state reset ({} so far)", what, progress_.step + 1,
                 skipped_);
    log_->write({{"step", progress_.step + 1}, {"event", "skipped"}, {"what", what}});
    ++progress_.step;
    ++progress_.step_in_epoch;
    return true;
  }
  optimizer_->step(lr);
  optimizer_->zero_grad();
  ++progress_.step;
  ++progress_.step_in_epoch;

  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  train_seconds_ += seconds;
  ++timed_steps_;
  tokens_total_ += r.tokens;
  window_loss_ += loss;
  window_tokens_ += r.tokens;
  ++window_steps_;
  if (progress_.step % cfg_.log.every_steps == 0 || progress_.step == total_steps_) {
    const double window = std::chrono::duration<double>(Clock::now() - window_start_).count();
    // Memory of the device the model trains on (tensors in use, and their peak).
    const AllocatorStats mem = train_device_.is_cuda() ? cuda::allocator_stats(train_device_.index)
                                                        : CpuAllocator::instance().stats();
    nlohmann::ordered_json rec;
    rec["step"] = progress_.step;
    rec["epoch"] = epochs_done();
    rec["loss"] = window_loss_ / window_steps_;
    rec["lr"] = lr;
    rec["grad_norm"] = grad_norm;
    rec["tokens_per_s"] = window_tokens_ / window;
    rec["ms_per_step"] = 1000.0 * window / window_steps_;
    rec["memory_mb"] = static_cast<double>(mem.allocated) / (1 << 20);
    rec["peak_memory_mb"] = static_cast<double>(mem.peak_allocated) / (1 << 20);
    log_->write(rec);
    if (tty_) {
      progress_line(window_loss_ / window_steps_);
    } else {
      spdlog::info("step {:>7}/{}  epoch {}  loss {:.4f}  lr {:.3g}  |g| {:.3g}  {:.0f} {}/s  {:.1f} ms/step  mem {:.0f} MB",
                   progress_.step, total_steps_, progress_.epoch + 1, window_loss_ / window_steps_, lr, grad_norm,
                   window_tokens_ / window, task_->token_name(), 1000.0 * window / window_steps_,
                   rec["memory_mb"].get<double>());
    }
    window_loss_ = 0;
    window_steps_ = 0;
    window_tokens_ = 0;
    window_start_ = Clock::now();
  }
  return true;
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
  if (tty_) std::cout << "\n";
  const tasks::Metrics m = task_->evaluate("valid", cfg_.eval.max_batches);
  SRU_CHECK(m.count(metric_), "eval.metric: the task reports no metric '", metric_, "'");
  const double value = m.at(metric_);
  const bool improved = std::isfinite(value) && (!progress_.has_best || (lower_better_ ? value < progress_.best_metric
                                                                                       : value > progress_.best_metric));
  if (improved) {
    progress_.best_metric = value;
    progress_.has_best = true;
    progress_.best_step = progress_.step;
    progress_.evals_without_improvement = 0;
  } else {
    ++progress_.evals_without_improvement;
  }
  last_eval_step_ = progress_.step;
  nlohmann::ordered_json rec;
  rec["step"] = progress_.step;
  rec["epoch"] = epochs_done();
  rec["split"] = "valid";
  rec["eval"] = to_json(m);
  log_->write(rec);
  spdlog::info("eval step {} (epoch {:.2f}): valid {}{}", progress_.step, epochs_done(), format_metrics(m),
               improved ? "  (best)" : "");
  save("last.safetensors");
  if (improved) save("best.safetensors");
  if (cfg_.train.early_stop_patience > 0 && progress_.evals_without_improvement >= cfg_.train.early_stop_patience)
    stop_for_patience_ = true;
}

void Trainer::finish(const std::string& reason) {
  save("last.safetensors");
  nlohmann::ordered_json summary;
  summary["task"] = cfg_.task;
  summary["stopped"] = reason;
  summary["steps"] = progress_.step;
  summary["epochs"] = epochs_done();
  nlohmann::ordered_json final_metrics;
  std::string final_line;
  for (const std::string split : {"valid", "test"}) {
    const tasks::Metrics m = task_->evaluate(split, 0);
    final_metrics[split] = to_json(m);
    final_line += (final_line.empty() ? "" : "; ") + split + " " + format_metrics(m);
  }
  summary["final"] = final_metrics;
  const std::string best_path = (fs::path(run_dir_) / "best.safetensors").string();
  if (fs::exists(best_path)) {
    load_model(task_->model(), safetensors::load(best_path), best_path);
    nlohmann::ordered_json best;
    best["step"] = progress_.best_step;
    best["metric"] = metric_;
    for (const std::string split : {"valid", "test"}) best[split] = to_json(task_->evaluate(split, 0));
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
  summary["device"] = train_device_.str();
  summary["threads"] = num_threads();
  summary["commit"] = build_commit();
  write_file_atomic((fs::path(run_dir_) / "summary.json").string(), summary.dump(2) + "\n");
  spdlog::info("final: {}", final_line);
  spdlog::info("run directory {}: config.yaml, metrics.jsonl, last.safetensors{}, summary.json", run_dir_,
               fs::exists(best_path) ? ", best.safetensors" : "");
}

int Trainer::run() {
  setup();
  started_ = window_start_ = Clock::now();
  install_stop_handlers();
  spdlog::info("{} {} model: {} parameters; {} steps per epoch, {} steps in all; device {} ({} threads); run dir {}",
               cfg_.task, cfg_.model.type, task_->model().num_parameters(), steps_per_epoch_, total_steps_, train_device_.str(),
               num_threads(), run_dir_);
  while (progress_.step < total_steps_ && progress_.epoch < cfg_.train.epochs && !stop_for_patience_) {
    task_->start_epoch(progress_.epoch, progress_.step_in_epoch);
    while (progress_.step_in_epoch < steps_per_epoch_ && progress_.step < total_steps_ && !stop_for_patience_) {
      if (stop_requested()) {
        save("last.safetensors");
        if (tty_) std::cout << "\n";
        spdlog::warn("interrupted at step {}: checkpoint saved; continue with: srutrain --resume {}", progress_.step,
                     run_dir_);
        return kExitInterrupted;
      }
      if (!train_one_step(progress_.step_in_epoch)) return 1;
      if (cfg_.eval.every_steps > 0 && progress_.step % cfg_.eval.every_steps == 0) evaluate_and_checkpoint();
      if (cfg_.train.max_seconds > 0 &&
          std::chrono::duration<double>(Clock::now() - started_).count() >= cfg_.train.max_seconds) {
        out_of_time_ = true;
        break;
      }
    }
    if (out_of_time_) break;
    if (progress_.step_in_epoch >= steps_per_epoch_) {
      // Advance first, so a checkpoint written by the evaluation resumes in the next epoch.
      ++progress_.epoch;
      progress_.step_in_epoch = 0;
      if (cfg_.eval.every_steps == 0) evaluate_and_checkpoint();
    }
  }
  if (tty_) std::cout << "\n";
  if (last_eval_step_ != progress_.step) evaluate_and_checkpoint();  // the final weights are always evaluated
  const std::string reason = out_of_time_         ? "time limit"
                             : stop_for_patience_ ? "early stop"
                             : progress_.step >= total_steps_ ? "max steps" : "epochs";
  finish(reason);
  return 0;
}

}  // namespace

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

config::Config resolve_config(const RunOptions& options) {
  if (!options.resume) return config::load_config(options.config_path, options.overrides);
  const std::string path = (fs::path(options.run_dir) / "config.yaml").string();
  return config::parse_config(read_text_file(path), path, options.overrides);
}

namespace {

double json_number(const nlohmann::json& j, std::initializer_list<const char*> path) {
  const nlohmann::json* at = &j;
  for (const char* key : path) {
    if (!at->contains(key)) return std::numeric_limits<double>::quiet_NaN();
    at = &(*at)[key];
  }
  return at->is_number() ? at->get<double>() : std::numeric_limits<double>::quiet_NaN();
}

// k-fold cross-validation: one training run per fold in DIR/fold-<i>/ (each a complete run
// directory), then DIR/cv_summary.json with every fold's numbers (best-on-validation checkpoint)
// and their mean and standard deviation. Resuming skips finished folds and resumes a started one.
int cross_validate(const RunOptions& options, const config::Config& cfg) {
  std::string run_dir = options.run_dir;
  if (options.resume) {
    SRU_CHECK(!run_dir.empty(), "--resume needs the run directory to continue (--resume DIR)");
  } else {
    if (run_dir.empty()) run_dir = default_run_dir(options.config_path);
    SRU_CHECK(!fs::exists(fs::path(run_dir) / "config.yaml"), "run directory '", run_dir,
              "' already holds a run: continue it with --resume ", run_dir, ", or choose another --run-dir");
    prepare_run_dir(run_dir);
    config::Config copy = cfg;
    write_file_atomic((fs::path(run_dir) / "config.yaml").string(), copy.to_yaml());
  }
  const int64_t k = cfg.data.run_folds > 0 ? std::min(cfg.data.run_folds, cfg.data.folds) : cfg.data.folds;
  spdlog::info("cross-validation: {} of {} folds in {}", k, cfg.data.folds, run_dir);
  nlohmann::ordered_json folds = nlohmann::ordered_json::array();
  std::vector<double> test_acc, valid_acc, epoch_seconds;
  for (int64_t fold = 0; fold < k; ++fold) {
    const fs::path fold_dir = fs::path(run_dir) / ("fold-" + std::to_string(fold));
    if (fs::exists(fold_dir / "summary.json")) {
      spdlog::info("fold {} of {}: already finished ({}), not rerun", fold + 1, k, fold_dir.string());
    } else {
      RunOptions o;
      o.run_dir = fold_dir.string();
      if (fs::exists(fold_dir / "last.safetensors")) {
        o.resume = true;
      } else {
        o.config_path = (fs::path(run_dir) / "config.yaml").string();
        o.overrides = {"data.fold=" + std::to_string(fold)};
      }
      spdlog::info("fold {} of {}: {}", fold + 1, k, o.resume ? "resuming" : "training");
      const int rc = Trainer(o).run();
      if (rc != 0) {
        spdlog::error("fold {} stopped (exit {}); continue the cross-validation with: srutrain --resume {}", fold + 1,
                      rc, run_dir);
        return rc;
      }
    }
    const nlohmann::json s = nlohmann::json::parse(read_text_file((fold_dir / "summary.json").string()));
    nlohmann::ordered_json f;
    f["fold"] = fold;
    f["test_accuracy"] = json_number(s, {"best", "test", "accuracy"});
    f["valid_accuracy"] = json_number(s, {"best", "valid", "accuracy"});
    f["best_step"] = json_number(s, {"best", "step"});
    f["epochs"] = json_number(s, {"epochs"});
    f["seconds_per_epoch"] = json_number(s, {"seconds_per_epoch"});
    test_acc.push_back(f["test_accuracy"].get<double>());
    valid_acc.push_back(f["valid_accuracy"].get<double>());
    epoch_seconds.push_back(f["seconds_per_epoch"].get<double>());
    folds.push_back(f);
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / static_cast<double>(v.size());
  };
  auto stdev = [&](const std::vector<double>& v) {  // sample standard deviation (n - 1)
    if (v.size() < 2) return 0.0;
    const double m = mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / static_cast<double>(v.size() - 1));
  };
  nlohmann::ordered_json summary;
  summary["task"] = cfg.task;
  summary["model"] = cfg.model.type;
  summary["data"] = cfg.data.path;
  summary["folds"] = cfg.data.folds;
  summary["folds_run"] = k;
  summary["test_accuracy_mean"] = mean(test_acc);
  summary["test_accuracy_std"] = stdev(test_acc);
  summary["valid_accuracy_mean"] = mean(valid_acc);
  summary["seconds_per_epoch_mean"] = mean(epoch_seconds);
  summary["per_fold"] = folds;
  summary["commit"] = build_commit();
  write_file_atomic((fs::path(run_dir) / "cv_summary.json").string(), summary.dump(2) + "\n");
  spdlog::info("cross-validation ({} of {} folds): test accuracy {:.2f} +- {:.2f} % (mean +- sample std), {:.1f} s per "
               "epoch; {}/cv_summary.json", k, cfg.data.folds, 100 * mean(test_acc), 100 * stdev(test_acc), mean(epoch_seconds),
               run_dir);
  return 0;
}

}  // namespace

int train(const RunOptions& options) {
  if (options.resume) {
    SRU_CHECK(!options.run_dir.empty(), "--resume needs the run directory to continue (--resume DIR)");
    const fs::path dir(options.run_dir);
    SRU_CHECK(fs::exists(dir / "config.yaml"), "--resume ", options.run_dir, ": there is no checkpoint to resume from (",
              (dir / "last.safetensors").string(), " does not exist)");
  }
  const config::Config cfg = resolve_config(options);
  if (cfg.task == "classify" && cfg.data.test_path.empty() && cfg.data.fold < 0) return cross_validate(options, cfg);
  Trainer trainer(options);
  return trainer.run();
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

}  // namespace sru::train
