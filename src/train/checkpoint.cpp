// Training checkpoints (see checkpoint.h).
#include "train/checkpoint.h"

#include "nn/checkpoint.h"
#include "train/ema.h"

#include <sstream>

namespace sru::train {

bool is_training_state(const std::string& name) {
  return name.rfind("optim.", 0) == 0 || name.rfind("task.", 0) == 0 || name.rfind(kRawPrefix, 0) == 0;
}

namespace {

std::string str(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace

CheckpointContents checkpoint_contents(tasks::Task& task, const optim::Optimizer* optimizer,
                                       const std::string& config_yaml, const Progress& p,
                                       const nn::NamedTensors& extra) {
  nn::NamedTensors tensors = task.model().state();
  for (const auto& [name, t] : tensors)
    SRU_CHECK(!is_training_state(name), "model tensor '", name, "' uses a prefix reserved for training state");
  if (optimizer)
    for (auto& entry : optimizer->state()) tensors.push_back(entry);
  for (auto& entry : task.extra_state()) tensors.push_back(entry);
  for (const auto& entry : extra) {
    SRU_CHECK(is_training_state(entry.first), "internal: checkpoint tensor '", entry.first,
              "' is neither a model tensor nor named as training state");
    tensors.push_back(entry);
  }
  const safetensors::Metadata meta = {
      {"format", "srutrain"},
      {"format_version", kFormatVersion},
      {"config", config_yaml},
      {"step", std::to_string(p.step)},
      {"epoch", std::to_string(p.epoch)},
      {"step_in_epoch", std::to_string(p.step_in_epoch)},
      {"rng_seed", std::to_string(p.rng_seed)},
      {"rng_offset", std::to_string(p.rng_offset)},
      {"best_metric", p.has_best ? str(p.best_metric) : ""},
      {"best_step", std::to_string(p.best_step)},
      {"evals_without_improvement", std::to_string(p.evals_without_improvement)},
      {"last_eval_step", std::to_string(p.last_eval_step)},
      {"vocabulary", task.vocabulary_name()},
  };
  return {std::move(tensors), meta};
}

void save_checkpoint(const std::string& path, tasks::Task& task, const optim::Optimizer* optimizer,
                     const std::string& config_yaml, const Progress& p) {
  const CheckpointContents c = checkpoint_contents(task, optimizer, config_yaml, p);
  safetensors::save(path, c.tensors, c.metadata);
}

LoadedCheckpoint read_checkpoint(const std::string& path, const std::vector<std::string>& overrides) {
  return read_checkpoint(safetensors::load(path), path, overrides);
}

LoadedCheckpoint read_checkpoint(safetensors::File file, const std::string& path,
                                 const std::vector<std::string>& overrides) {
  LoadedCheckpoint c{std::move(file), {}, {}};
  const auto& m = c.file.metadata;
  auto get = [&](const std::string& key) -> const std::string& {
    auto it = m.find(key);
    SRU_CHECK(it != m.end(), "'", path, "' is not a srutrain checkpoint: its metadata has no '", key, "'");
    return it->second;
  };
  SRU_CHECK(get("format") == "srutrain", "'", path, "' is not a srutrain checkpoint");
  SRU_CHECK(get("format_version") == kFormatVersion, "'", path, "' has checkpoint format version ",
            get("format_version"), "; this srutrain reads version ", kFormatVersion);
  c.config = config::parse_config(get("config"), path + " (embedded config)", overrides, config::Origin::Stored);
  try {
    c.progress.step = std::stoll(get("step"));
    c.progress.epoch = std::stoll(get("epoch"));
    c.progress.step_in_epoch = std::stoll(get("step_in_epoch"));
    c.progress.rng_seed = std::stoull(get("rng_seed"));
    c.progress.rng_offset = std::stoull(get("rng_offset"));
    c.progress.has_best = !get("best_metric").empty();
    if (c.progress.has_best) c.progress.best_metric = std::stod(get("best_metric"));
    c.progress.best_step = std::stoll(get("best_step"));
    c.progress.evals_without_improvement = std::stoll(get("evals_without_improvement"));
    // Absent from checkpoints written before 2026-11-25: their resume evaluates the resumed step again.
    if (const auto it = m.find("last_eval_step"); it != m.end()) c.progress.last_eval_step = std::stoll(it->second);
  } catch (const std::logic_error&) {
    SRU_FAIL("'", path, "': malformed training metadata (step, epoch or RNG state)");
  }
  return c;
}

void load_model(nn::Module& model, const safetensors::File& file, const std::string& path) {
  nn::load_state_from(model, file, path, {"optim.", "task.", kRawPrefix});
}

}  // namespace sru::train
