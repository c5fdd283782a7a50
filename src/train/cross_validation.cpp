// The k-fold cross-validation driver (see cross_validation.h).
#include "train/cross_validation.h"

#include <cmath>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "train/loop.h"
#include "train/run_files.h"

namespace sru::train {

namespace fs = std::filesystem;

namespace {

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? std::nan("") : s / static_cast<double>(v.size());
}

double sample_std(const std::vector<double>& v) {  // n - 1 in the denominator
  if (v.size() < 2) return 0.0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

double number_at(const nlohmann::json& j, const std::string& a, const std::string& b, const std::string& c = "") {
  const nlohmann::json* at = &j;
  for (const std::string& key : {a, b, c}) {
    if (key.empty()) break;
    if (!at->contains(key)) return std::nan("");
    at = &(*at)[key];
  }
  return at->is_number() ? at->get<double>() : std::nan("");
}

// The run directory of a cross-validation: for a new run made (refused if it holds a run) with the
// config in it; with --resume, the one given.
std::string prepare_cv_directory(const RunOptions& options, const config::Config& cfg, dist::Communicator& comm) {
  std::string run_dir = options.run_dir;
  if (options.resume) {
    SRU_CHECK(!run_dir.empty(), "--resume needs the run directory to continue (--resume DIR)");
    return run_dir;
  }
  if (run_dir.empty()) run_dir = dist::on_root(comm, [&] { return default_run_dir(options.config_path); }, "the run directory");
  RunDirectory dir(run_dir, comm);
  dist::check_collective(!dir.exists("config.yaml"), "run directory '" + run_dir + "' already holds a run: continue "
                                                     "it with --resume " + run_dir + ", or choose another --run-dir");
  dir.prepare();
  config::Config copy = cfg;
  dir.write_text("config.yaml", copy.to_yaml());
  return run_dir;
}

// Trains fold `fold` in run_dir/fold-N (resuming it when it has a checkpoint) unless its summary says it
// finished: 0, or the exit code of its training.
int train_fold(const tasks::CrossValidationPlan& plan, int64_t fold, const std::string& run_dir, RunDirectory& fold_run) {
  if (fold_run.exists("summary.json")) {
    spdlog::info("fold {} of {}: already finished ({}), not rerun", fold + 1, plan.run, fold_run.path());
    return 0;
  }
  RunOptions o;
  o.run_dir = fold_run.path();
  if (fold_run.exists("last.safetensors")) {
    o.resume = true;
  } else {
    o.config_path = (fs::path(run_dir) / "config.yaml").string();
    o.overrides = {plan.fold_key + "=" + std::to_string(fold)};
  }
  spdlog::info("fold {} of {}: {}", fold + 1, plan.run, o.resume ? "resuming" : "training");
  const int rc = run_training(o);
  if (rc != 0)
    spdlog::error("fold {} stopped (exit {}); continue the cross-validation with: srutrain --resume {}", fold + 1, rc,
                  run_dir);
  return rc;
}

// The finished folds' best-checkpoint metrics, as cv_summary.json reports them.
struct FoldResults {
  nlohmann::ordered_json folds = nlohmann::ordered_json::array();
  std::string metric;
  bool higher_is_better = false;
  std::map<std::string, std::vector<double>> per_split;  // split -> the metric of each fold
  std::vector<double> epoch_seconds;

  // Reads fold `fold`'s summary.json.
  void add(int64_t fold, RunDirectory& fold_run) {
    const std::string summary_path = (fs::path(fold_run.path()) / "summary.json").string();
    const nlohmann::json s = nlohmann::json::parse(fold_run.read_text("summary.json"), nullptr, /*allow_exceptions=*/false);
    SRU_CHECK(!s.is_discarded(), summary_path, " is not valid JSON (damaged? delete the fold's directory to rerun it)");
    SRU_CHECK(s.contains("best") && s["best"].contains("metric") && s["best"]["metric"].is_string(), summary_path,
              " has no best checkpoint's metrics");
    metric = s["best"]["metric"].get<std::string>();
    higher_is_better = s["best"].contains("higher_is_better") && s["best"]["higher_is_better"].is_boolean() &&
                       s["best"]["higher_is_better"].get<bool>();
    nlohmann::ordered_json f;
    f["fold"] = fold;
    for (const auto& [split, values] : s["best"].items()) {
      if (!values.is_object()) continue;  // "step", "metric", ...
      const double v = number_at(values, metric, "");
      f[split + "_" + metric] = v;
      per_split[split].push_back(v);
    }
    f["best_step"] = number_at(s, "best", "step");
    f["epochs"] = number_at(s, "epochs", "");
    f["seconds_per_epoch"] = number_at(s, "seconds_per_epoch", "");
    epoch_seconds.push_back(f["seconds_per_epoch"].get<double>());
    folds.push_back(f);
  }
};

// cv_summary.json (mean and sample std per split) and its log line.
void write_cv_summary(const config::Config& cfg, const tasks::CrossValidationPlan& plan, const FoldResults& r,
                      RunDirectory& top) {
  nlohmann::ordered_json summary;
  summary["task"] = cfg.task;
  summary["model"] = cfg.model.type;
  summary["data"] = cfg.data.path;
  summary["folds"] = plan.folds;
  summary["folds_run"] = plan.run;
  summary["metric"] = r.metric;
  summary["higher_is_better"] = r.higher_is_better;
  std::string line;
  for (const auto& [split, values] : r.per_split) {
    summary[split + "_" + r.metric + "_mean"] = mean(values);
    summary[split + "_" + r.metric + "_std"] = sample_std(values);
    line += fmt::format("{}{} {} {:.4f} +- {:.4f}", line.empty() ? "" : ", ", split, r.metric, mean(values),
                        sample_std(values));
  }
  summary["seconds_per_epoch_mean"] = mean(r.epoch_seconds);
  summary["per_fold"] = r.folds;
  summary["commit"] = build_commit();
  top.write_text("cv_summary.json", summary.dump(2) + "\n");
  spdlog::info("cross-validation ({} of {} folds, best checkpoint of each): {} (mean +- sample std), {:.1f} s per epoch; "
               "{}/cv_summary.json", plan.run, plan.folds, line, mean(r.epoch_seconds), top.path());
}

}  // namespace

int cross_validate(const RunOptions& options, const config::Config& cfg, const tasks::CrossValidationPlan& plan) {
  // Data parallel: every rank runs every fold together; rank 0 reads and writes the directories.
  dist::Communicator& comm = dist::world();
  const std::string run_dir = prepare_cv_directory(options, cfg, comm);
  RunDirectory top(run_dir, comm);
  spdlog::info("cross-validation: {} of {} folds in {}", plan.run, plan.folds, run_dir);
  FoldResults results;
  for (int64_t fold = 0; fold < plan.run; ++fold) {
    RunDirectory fold_run((fs::path(run_dir) / ("fold-" + std::to_string(fold))).string(), comm);
    if (const int rc = train_fold(plan, fold, run_dir, fold_run); rc != 0) return rc;
    results.add(fold, fold_run);
  }
  write_cv_summary(cfg, plan, results, top);
  return 0;
}

}  // namespace sru::train
