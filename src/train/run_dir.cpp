// Run directories and resuming (see run_dir.h).
#include "train/run_dir.h"

#include <cmath>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "train/run_files.h"

namespace sru::train {

namespace fs = std::filesystem;

std::string default_run_dir(const std::string& config_path) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::ostringstream os;
  os << "runs/" << fs::path(config_path).stem().string() << "-" << std::put_time(&tm, "%Y%m%d-%H%M%S");
  return os.str();
}

config::Config resolve_config(const RunOptions& options) {
  if (!options.resume) return config::load_config(options.config_path, options.overrides);
  SRU_CHECK(!options.run_dir.empty(), "--resume needs the run directory to continue (--resume DIR)");
  const std::string path = (fs::path(options.run_dir) / "config.yaml").string();
  SRU_CHECK(fs::exists(path), "--resume ", options.run_dir, ": ", path,
            " does not exist, so this is not a srutrain run directory (or its run never started)");
  return config::parse_config(read_text_file(path), path, options.overrides, config::Origin::Stored);
}

OpenedRun open_run(const RunOptions& options) {
  OpenedRun run;
  run.cfg = resolve_config(options);
  if (options.resume) {
    run.dir = options.run_dir;
    const std::string last = (fs::path(run.dir) / "last.safetensors").string();
    SRU_CHECK(fs::exists(last), "--resume ", run.dir, ": there is no checkpoint to resume from (", last,
              " does not exist)");
    run.checkpoint = read_checkpoint(last);
  } else {
    run.dir = options.run_dir.empty() ? default_run_dir(options.config_path) : options.run_dir;
    SRU_CHECK(!fs::exists(fs::path(run.dir) / "last.safetensors"), "run directory '", run.dir,
              "' already holds a checkpoint: continue it with --resume ", run.dir, ", or choose another --run-dir");
  }
  run.config_yaml = run.cfg.to_yaml();
  return run;
}

void save_run_checkpoint(const std::string& dir, const std::string& name, tasks::Task& task,
                         const optim::Optimizer* optimizer, const std::string& config_yaml, const Progress& progress) {
  for (const auto& [pname, param] : task.model().state()) {
    bool finite = true;
    const Tensor t = param.to(Device::cpu());
    SRU_DISPATCH_FLOATING(t.dtype(), "checkpoint check", [&]<typename T>() {
      const T* d = t.data<T>();
      for (int64_t i = 0; i < t.numel() && finite; ++i) finite = std::isfinite(d[i]);
    });
    SRU_CHECK(finite, "not saving ", dir, "/", name, " at step ", progress.step, ": parameter '", pname,
              "' holds NaN or inf values (the previous checkpoint is kept; lower train.lr or set train.clip_grad_norm)");
  }
  save_checkpoint((fs::path(dir) / name).string(), task, optimizer, config_yaml, progress);
}

}  // namespace sru::train
