// The experiment config: sections task, data, model, train, eval, log, with defaults. Loaded from
// YAML (srutrain --config), overridden with --set, validated, saved with every run and inside every
// checkpoint, so a checkpoint alone can rebuild its model (srueval). docs/configs.md lists every key.
//
// Keys every run has live in the structs below. A task (cfg.task) and a sequence encoder
// (model.type) add keys of their own — classify's data.folds, the SRU's model.highway_bias — held in
// task_options / encoder_options and read by the plug-in with as<T>(). The allowed names and each
// plug-in's keys come from the registries (src/tasks/registry.cpp, src/nn/encoder.cpp) through
// catalogue(), so the config, its validation, --list-keys and the docs cannot drift from the code.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "config/options.h"
#include "config/schema.h"

namespace sru::config {

struct DataConfig {
  std::string path;               // the training data (each task says what it reads there)
  int64_t batch_size = 32;        // parallel streams (language models) or examples in training
  int64_t eval_batch_size = 10;   // the same in evaluation
};

struct ModelConfig {
  std::string type = "sru";       // the sequence encoder (registry name)
  int64_t embedding_size = 256;
  int64_t hidden_size = 256;
  int64_t num_layers = 2;
  double dropout = 0.0;           // SRU: inside the recurrence (variational); LSTM: between layers
  double embedding_dropout = 0.0; // on the embeddings
  double output_dropout = 0.0;    // on the top layer's output, before the task's output layer
  bool bidirectional = false;     // tasks that read left to right refuse it
  bool freeze_embedding = false;  // keep the embeddings fixed (the paper's word2vec setting)
};

struct TrainConfig {
  std::string optimizer = "adam";  // sgd | adam | adamw | adamax | radam | radamw
  double lr = 1e-3;
  double momentum = 0.0;           // sgd
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;       // L2 (decoupled for adamw and radamw)
  std::vector<std::string> weight_decay_exclude;  // parameters whose name contains one of these: no weight decay
  std::string schedule = "constant";  // constant | step | epoch | noam | cosine
  int64_t warmup_steps = 0;        // noam, cosine
  int64_t decay_steps = 1000;      // step: multiply by decay_rate every decay_steps steps
  double decay_rate = 1.0;         // step, epoch
  int64_t epochs_before_decay = 1; // epoch: epochs at the initial rate (1 = decay from the second epoch on)
  double min_lr = 0.0;             // cosine floor
  double clip_grad_norm = 0.0;     // 0 = off
  int64_t accumulate = 1;          // training batches per optimiser update (gradients summed over them)
  double label_smoothing = 0.0;    // the training loss's label smoothing, in [0, 1)
  int64_t epochs = 1;
  int64_t max_steps = 0;           // 0 = epochs decide
  double max_seconds = 0.0;        // stop after this much wall time; 0 = no limit
  int64_t seed = 1;
  std::string device = "cpu";      // cpu | cuda | cuda:N | auto
  std::string precision = "fp32";  // fp32 | tf32 | bf16: the matrix products (ops/matmul.h)
  int64_t threads = 0;             // 0 = all cores
  std::string on_nonfinite = "stop";  // stop | skip
  std::string cuda_graphs = "auto";   // auto | on | off: replay the training step as a CUDA graph (train/step.h)
  int64_t cuda_graphs_max = 64;       // most graphs a run keeps (an epoch's most frequent batch shapes)
  std::string launch_ahead = "auto";  // auto | on | off: launch a replayed step before reading the last one's loss
  std::string attention = "auto";     // auto | composed | fused: the multi-head attention's kernels (nn/attention.h)
  int64_t early_stop_patience = 0; // evaluations without improvement before stopping; 0 = off
  double dist_bucket_mb = 25.0;    // data parallel: gradient MiB per all-reduce (0 = one bucket)
  double dist_timeout_s = 600.0;   // data parallel: how long a collective waits for the other ranks
  double ema_decay = 0.0;          // moving average of the weights (train/ema.h); 0 = off
  int64_t ema_start_step = 0;      // the average copies the weights up to this step
  bool ema_warmup = true;          // decay min(ema_decay, (1 + n) / (10 + n)) n updates after the start
  bool ema_keep_raw = false;       // best.safetensors also holds the raw weights (last.safetensors always)
};

struct EvalConfig {
  int64_t every_steps = 0;   // 0 = at the end of every epoch
  std::string metric = "";   // "" = the task's first metric
  int64_t max_batches = 0;   // 0 = the whole split
};

struct LogConfig {
  int64_t every_steps = 50;
  bool progress = true;      // a one-line progress bar when stdout is a terminal
  bool tensorboard = true;   // TensorBoard events file beside metrics.jsonl (train/tensorboard.h)
};

// A registered task or encoder as the config sees it: its name, what it is, and its own keys.
struct PluginInfo {
  std::string name, help;
  std::function<Options()> make_options;  // the plug-in's keys with their defaults
};
struct Catalogue {
  std::vector<PluginInfo> tasks, encoders;
};
// Every registered task and encoder. Defined by src/tasks/registry.cpp, the one place that lists the
// tasks (the encoders come from src/nn/encoder.cpp).
const Catalogue& catalogue();

struct Config {
  std::string task = "charlm";
  DataConfig data;
  ModelConfig model;
  TrainConfig train;
  EvalConfig eval;
  LogConfig log;
  Options task_options;     // the keys of `task`
  Options encoder_options;  // the keys of `model.type`

  // The defaults of a run of `task` with encoder `encoder` (both registered names).
  static Config defaults(const std::string& task = "charlm", const std::string& encoder = "sru");
  template <typename T>
  T& task_as() { return task_options.as<T>(); }
  template <typename T>
  const T& task_as() const { return task_options.as<T>(); }
  template <typename T>
  const T& encoder_as() const { return encoder_options.as<T>(); }

  // Field descriptions bound to this object's members: the common keys, then the task's and the
  // encoder's (owner "task NAME" / "encoder NAME").
  std::vector<Section> schema();
  std::string to_yaml() { return config::to_yaml(schema()); }
};

// User configs are strict: a key of another task or encoder is an error. Stored configs (a run
// directory's config.yaml, a checkpoint's metadata) skip such keys, which older versions wrote
// for every plug-in.
enum class Origin { User, Stored };

// Loads a config file (path in errors), applies `overrides` ("a.b=value"), validates. Throws sru::Error.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {},
                   Origin origin = Origin::User);
// The same from YAML text (e.g. a checkpoint's metadata); `source` names it in errors.
Config parse_config(const std::string& text, const std::string& source, const std::vector<std::string>& overrides = {},
                    Origin origin = Origin::User);

// The Markdown reference of every key of every task and encoder (docs/configs.md, --list-keys).
std::string reference();

}  // namespace sru::config
