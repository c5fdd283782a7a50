// The experiment config: sections task, data, model, train, eval, log, with defaults. Loaded from
// YAML (srutrain --config), overridden with --set, validated, saved with every run and inside every
// checkpoint, so a checkpoint alone can rebuild its model (srueval). docs/configs.md lists every key.
#pragma once

#include <string>
#include <vector>

#include "config/schema.h"

namespace sru::config {

struct DataConfig {
  std::string path;               // the byte file (charlm); the labelled file (classify)
  double valid_fraction = 0.05;   // charlm: of the file; classify: of the training examples
  double test_fraction = 0.05;    // the last part of the file
  int64_t batch_size = 32;        // parallel streams (charlm) or sentences (classify) in training
  int64_t bptt = 100;             // truncated back-propagation length (unroll)
  int64_t eval_batch_size = 10;   // parallel streams / sentences in evaluation
  // classify
  std::string valid_path;         // "" = hold out valid_fraction of the training examples
  std::string test_path;          // "" = k-fold cross-validation on `path`
  int64_t folds = 10;             // cross-validation folds
  int64_t fold = -1;              // the test fold of this run; -1 = run every fold and report mean/std
  int64_t run_folds = 0;          // with fold -1: run only the first N folds (0 = all); for quick estimates
  bool lowercase = false;
  std::string tokenizer = "whitespace";  // whitespace | sentencepiece
  std::string sentencepiece_model;       // "" = train one on the training split
  int64_t sentencepiece_vocab_size = 8000;
  int64_t min_count = 1;          // words seen fewer times in training are <unk>
  std::string vectors;            // pretrained word vectors ("" = random trainable embeddings)
  std::string vectors_format = "auto";  // auto | text | word2vec
  bool normalize_vectors = true;  // scale each pretrained vector to unit L2 norm
};

struct ModelConfig {
  std::string type = "sru";       // sru | lstm
  int64_t embedding_size = 256;
  int64_t hidden_size = 256;
  int64_t num_layers = 2;
  double dropout = 0.0;           // SRU: inside the recurrence (variational); LSTM: between layers
  double rnn_dropout = 0.0;       // SRU: variational dropout on each layer's input
  double embedding_dropout = 0.0; // on the embeddings
  double output_dropout = 0.0;    // on the top layer's output, before the softmax layer
  int64_t projection_size = 0;
  double highway_bias = 0.0;
  bool rescale = false;
  bool layer_norm = false;
  bool normalize_after = false;
  bool use_tanh = false;
  bool v1 = false;
  bool has_skip_term = true;
  bool bidirectional = false;     // classify only
  bool freeze_embedding = false;  // keep the embeddings fixed (the paper's word2vec setting)
};

struct TrainConfig {
  std::string optimizer = "adam";  // sgd | adam | adamw | adamax | radam
  double lr = 1e-3;
  double momentum = 0.0;           // sgd
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;       // L2 (decoupled for adamw)
  std::string schedule = "constant";  // constant | step | epoch | noam | cosine
  int64_t warmup_steps = 0;        // noam, cosine
  int64_t decay_steps = 1000;      // step: multiply by decay_rate every decay_steps steps
  double decay_rate = 1.0;         // step, epoch
  double min_lr = 0.0;             // cosine floor
  double clip_grad_norm = 0.0;     // 0 = off
  int64_t epochs = 1;
  int64_t max_steps = 0;           // 0 = epochs decide
  double max_seconds = 0.0;        // stop after this much wall time; 0 = no limit
  int64_t seed = 1;
  std::string device = "cpu";      // cpu | cuda | cuda:N | auto
  int64_t threads = 0;             // 0 = all cores
  std::string on_nonfinite = "stop";  // stop | skip
  int64_t early_stop_patience = 0; // evaluations without improvement before stopping; 0 = off
};

struct EvalConfig {
  int64_t every_steps = 0;   // 0 = at the end of every epoch
  std::string metric = "";   // "" = the task's default (charlm: bpc)
  int64_t max_batches = 0;   // 0 = the whole split
};

struct LogConfig {
  int64_t every_steps = 50;
  bool progress = true;      // a one-line progress bar when stdout is a terminal
};

struct Config {
  std::string task = "charlm";
  DataConfig data;
  ModelConfig model;
  TrainConfig train;
  EvalConfig eval;
  LogConfig log;

  // Field descriptions bound to this object's members.
  std::vector<Section> schema();
  std::string to_yaml() { return config::to_yaml(schema()); }
};

// Loads a config file (path in errors), applies `overrides` ("a.b=value"), validates. Throws sru::Error.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The same from YAML text (e.g. a checkpoint's metadata); `source` names it in errors.
Config parse_config(const std::string& text, const std::string& source, const std::vector<std::string>& overrides = {});

}  // namespace sru::config
