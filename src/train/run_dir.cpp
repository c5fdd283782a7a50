// Run directories and resuming (see run_dir.h).
#include "train/run_dir.h"

#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include <spdlog/spdlog.h>

#include "core/file_io.h"
#include "train/run_files.h"

namespace sru::train {

namespace fs = std::filesystem;

namespace {

// FNV-1a over a tensor's bytes: equal weights on every rank give equal hashes.
uint64_t hash_bytes(const Tensor& t, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Refuses non-finite weights naming the parameter; returns a hash of every model tensor.
uint64_t check_finite_weights(tasks::Task& task, const nn::NamedTensors& extra, const std::string& where,
                              int64_t step) {
  uint64_t hash = 1469598103934665603ull;
  nn::NamedTensors checked = task.model().state();
  checked.insert(checked.end(), extra.begin(), extra.end());
  for (const auto& [pname, param] : checked) {
    bool finite = true;
    const Tensor t = param.to(Device::cpu());
    SRU_DISPATCH_FLOATING(t.dtype(), "checkpoint check", [&]<typename T>() {
      const T* d = t.data<T>();
      for (int64_t i = 0; i < t.numel() && finite; ++i) finite = std::isfinite(d[i]);
    });
    dist::check_collective(finite, ::sru::detail::concat("not saving ", where, " at step ", step, ": parameter '", pname,
                                                  "' holds NaN or inf values (the previous checkpoint is kept; lower "
                                                  "train.lr or set train.clip_grad_norm)"));
    hash = hash_bytes(t, hash);
  }
  return hash;
}

}  // namespace

std::string default_run_dir(const std::string& config_path) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::ostringstream os;
  os << "runs/" << fs::path(config_path).stem().string() << "-" << std::put_time(&tm, "%Y%m%d-%H%M%S");
  return os.str();
}

config::Config resolve_config(const RunOptions& options, dist::Communicator& comm) {
  if (comm.size() > 1) {
    // Rank 0 reads and checks; every rank parses the same resolved YAML.
    const std::string yaml = dist::on_root(comm, [&] { return resolve_config(options).to_yaml(); }, "the config");
    return config::parse_config(yaml, "the config from rank 0", {}, config::Origin::Stored);
  }
  if (!options.resume) return config::load_config(options.config_path, options.overrides);
  SRU_CHECK(!options.run_dir.empty(), "--resume needs the run directory to continue (--resume DIR)");
  const std::string path = (fs::path(options.run_dir) / "config.yaml").string();
  SRU_CHECK(fs::exists(path), "--resume ", options.run_dir, ": ", path,
            " does not exist, so this is not a srutrain run directory (or its run never started)");
  return config::parse_config(read_text_file(path), path, options.overrides, config::Origin::Stored);
}

safetensors::File load_on_root(dist::Communicator& comm, const std::string& path) {
  if (comm.size() == 1) return safetensors::load(path);
  const std::string bytes = dist::on_root(comm, [&] { return read_text_file(path); }, path);
  try {
    return safetensors::parse(bytes, path);
  } catch (const Error& e) {  // the same bytes on every rank: the same error
    throw dist::CollectiveError(e.what(), e.location());
  }
}

OpenedRun open_run(const RunOptions& options, dist::Communicator& comm) {
  OpenedRun run;
  run.cfg = resolve_config(options, comm);
  if (options.resume) {
    run.dir = options.run_dir;
    const std::string last = (fs::path(run.dir) / "last.safetensors").string();
    dist::on_root(comm, [&] {
      SRU_CHECK(fs::exists(last), "--resume ", run.dir, ": there is no checkpoint to resume from (", last,
                " does not exist)");
      return std::string();
    }, "the checkpoint check");
    run.checkpoint = read_checkpoint(load_on_root(comm, last), last);
  } else {
    run.dir = options.run_dir.empty() ? default_run_dir(options.config_path) : options.run_dir;
    // Rank 0's name (with its clock) for every rank.
    run.dir = dist::on_root(comm, [&] {
      SRU_CHECK(!fs::exists(fs::path(run.dir) / "last.safetensors"), "run directory '", run.dir,
                "' already holds a checkpoint: continue it with --resume ", run.dir, ", or choose another --run-dir");
      return run.dir;
    }, "the run directory");
  }
  run.config_yaml = run.cfg.to_yaml();
  return run;
}

RunDirectory::RunDirectory(std::string dir, dist::Communicator& comm) : dir_(std::move(dir)), comm_(comm) {}

std::string RunDirectory::file(const std::string& name) const { return (fs::path(dir_) / name).string(); }

void RunDirectory::prepare() {
  dist::on_root(comm_, [&] {
    prepare_run_dir(dir_);
    // A run killed while writing leaves NAME.tmp.PID beside the file it was replacing (still intact).
    for (const std::string& name : remove_stale_temporaries(dir_))
      spdlog::info("removed {}, left by a run that was killed while writing it", file(name));
    return std::string();
  }, "the run directory");
}

bool RunDirectory::exists(const std::string& name) {
  return dist::on_root(comm_, [&] { return std::string(fs::exists(file(name)) ? "1" : "0"); }, file(name)) == "1";
}

std::string RunDirectory::read_text(const std::string& name) {
  return dist::on_root(comm_, [&] { return read_text_file(file(name)); }, file(name));
}

void RunDirectory::write_text(const std::string& name, const std::string& text) {
  dist::on_root(comm_, [&] {
    write_file_atomic(file(name), text);
    return std::string();
  }, file(name));
}

void RunDirectory::append_metrics(const nlohmann::ordered_json& record) {
  if (!comm_.is_root()) return;
  MetricsLog(file("metrics.jsonl")).write(record);
  if (tensorboard_) tensorboard_->write(record);
}

void RunDirectory::log_tensorboard(int64_t resumed_at_step) {
  if (comm_.is_root()) tensorboard_ = std::make_unique<TensorBoardLog>(dir_, resumed_at_step);
}

void RunDirectory::write_summary(const nlohmann::ordered_json& summary) {
  write_text("summary.json", summary.dump(2) + "\n");
  if (comm_.is_root() && tensorboard_)
    tensorboard_->write(summary["steps"].get<int64_t>(), tensorboard_summary_scalars(summary));
}

void RunDirectory::save_checkpoint(const std::string& name, tasks::Task& task, const optim::Optimizer* optimizer,
                                   const std::string& config_yaml, const Progress& progress,
                                   const nn::NamedTensors& extra) {
  // Every rank: the checks (on identical weights, so identical outcomes) and the contents, whose task
  // state a data-parallel task gathers from every rank; then rank 0 writes.
  const uint64_t hash = check_finite_weights(task, extra, file(name), progress.step);
  if (comm_.size() > 1) {
    const std::string mine(reinterpret_cast<const char*>(&hash), sizeof(hash));
    const std::vector<std::string> hashes = comm_.all_gather(mine, "the weights' hashes");
    for (size_t r = 1; r < hashes.size(); ++r)
      dist::check_collective(hashes[r] == hashes[0],
                             ::sru::detail::concat("data parallel: at step ", progress.step, " rank ", r,
                                            " holds other weights than rank 0, so the ranks no longer train one model "
                                            "(their summed gradients differed); ", file(name), " was not written"));
  }
  const CheckpointContents contents = checkpoint_contents(task, optimizer, config_yaml, progress, extra);
  dist::on_root(comm_, [&] {
    safetensors::save(file(name), contents.tensors, contents.metadata);
    return std::string();
  }, file(name));
}

safetensors::File RunDirectory::load(const std::string& name) { return load_on_root(comm_, file(name)); }

void save_run_checkpoint(const std::string& dir, const std::string& name, tasks::Task& task,
                         const optim::Optimizer* optimizer, const std::string& config_yaml, const Progress& progress) {
  RunDirectory(dir, dist::single_process()).save_checkpoint(name, task, optimizer, config_yaml, progress);
}

}  // namespace sru::train
