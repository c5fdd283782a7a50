// The experiment config's schema (keys, defaults, limits, help) and loading.
#include "config/config.h"

#include <fstream>
#include <sstream>

#include "core/device.h"
#include "core/error.h"

namespace sru::config {

std::vector<Section> Config::schema() {
  const double inf = std::numeric_limits<double>::infinity();
  return {
      {"", "", {string_field("task", &task, "Which task to run", {"charlm", "classify"})}},
      {"data", "Where the data comes from and how it is batched.",
       {string_field("path", &data.path, "Data file (charlm: any byte file, e.g. enwik8; classify: \"LABEL text\" lines, "
                     "the training set or the whole set for cross-validation)", {}, true),
        real_field("valid_fraction", &data.valid_fraction, "Share held out for validation (charlm: of the file; classify: "
                   "of the training examples, when data.valid_path is empty)", 0, 0.5),
        real_field("test_fraction", &data.test_fraction, "Share of the file (its end) used for testing", 0, 0.5),
        int_field("batch_size", &data.batch_size, "Training batch size (parallel streams for charlm)", 1),
        int_field("bptt", &data.bptt, "Unroll length for truncated back-propagation", 1),
        int_field("eval_batch_size", &data.eval_batch_size, "Evaluation batch size (parallel streams / sentences)", 1),
        string_field("valid_path", &data.valid_path, "classify: validation file (empty = hold out data.valid_fraction)"),
        string_field("test_path", &data.test_path, "classify: test file (empty = cross-validation on data.path)"),
        int_field("folds", &data.folds, "classify: cross-validation folds when there is no test file", 2),
        int_field("fold", &data.fold, "classify: this run's test fold (-1 = run every fold, report mean and std)", -1),
        int_field("run_folds", &data.run_folds, "classify: with data.fold -1, run only the first N folds (0 = all)", 0),
        bool_field("lowercase", &data.lowercase, "classify: lower-case ASCII letters before building the vocabulary"),
        string_field("tokenizer", &data.tokenizer, "classify: whitespace (the files are tokenised) or sentencepiece",
                     {"whitespace", "sentencepiece"}),
        string_field("sentencepiece_model", &data.sentencepiece_model,
                     "classify: SentencePiece .model to use (empty = train one on the training split)"),
        int_field("sentencepiece_vocab_size", &data.sentencepiece_vocab_size,
                  "classify: pieces of a SentencePiece model trained here", 16),
        int_field("min_count", &data.min_count, "classify: words seen fewer times in training become <unk>", 1),
        string_field("vectors", &data.vectors, "classify: pretrained word vectors (word2vec .bin, GloVe/fastText text, "
                     ".gz or .zip); empty = random trainable embeddings"),
        string_field("vectors_format", &data.vectors_format, "classify: format of data.vectors (auto: .bin = word2vec)",
                     {"auto", "text", "word2vec"}),
        bool_field("normalize_vectors", &data.normalize_vectors, "classify: scale pretrained vectors to unit L2 norm")}},
      {"model", "The network.",
       {string_field("type", &model.type, "Recurrent layer type", {"sru", "lstm"}),
        int_field("embedding_size", &model.embedding_size, "Embedding size", 1),
        int_field("hidden_size", &model.hidden_size, "Hidden size per direction", 1),
        int_field("num_layers", &model.num_layers, "Stacked recurrent layers", 1),
        real_field("dropout", &model.dropout, "SRU: variational dropout inside the recurrence (not the last layer); "
                   "LSTM: dropout between layers", 0, 0.99),
        real_field("rnn_dropout", &model.rnn_dropout, "SRU: variational dropout on each layer's input", 0, 0.99),
        real_field("embedding_dropout", &model.embedding_dropout, "Dropout on the embeddings", 0, 0.99),
        real_field("output_dropout", &model.output_dropout, "Dropout on the top layer's output", 0, 0.99),
        int_field("projection_size", &model.projection_size, "SRU: low-rank projection size p (0 = none)", 0),
        real_field("highway_bias", &model.highway_bias, "SRU: initial reset-gate bias", -inf),
        bool_field("rescale", &model.rescale, "SRU: scale the skip term by sqrt(1 + 2 exp(highway_bias))"),
        bool_field("layer_norm", &model.layer_norm, "SRU: layer normalisation"),
        bool_field("normalize_after", &model.normalize_after, "SRU: layer norm on the output instead of the input"),
        bool_field("use_tanh", &model.use_tanh, "SRU: tanh on the cell state"),
        bool_field("v1", &model.v1, "SRU: no c_{t-1} terms in the gates"),
        bool_field("has_skip_term", &model.has_skip_term, "SRU: highway skip connection"),
        bool_field("bidirectional", &model.bidirectional, "classify: bidirectional recurrent layers"),
        bool_field("freeze_embedding", &model.freeze_embedding, "Keep the embeddings fixed during training")}},
      {"train", "Optimisation.",
       {string_field("optimizer", &train.optimizer, "Optimiser", {"sgd", "adam", "adamw", "adamax", "radam"}),
        real_field("lr", &train.lr, "Learning rate (for noam: the factor)", 0, inf, true),
        real_field("momentum", &train.momentum, "SGD momentum", 0, 1),
        real_field("beta1", &train.beta1, "Adam-family beta1", 0, 1),
        real_field("beta2", &train.beta2, "Adam-family beta2", 0, 1),
        real_field("eps", &train.eps, "Adam-family epsilon", 0, inf, true),
        real_field("weight_decay", &train.weight_decay, "Weight decay (L2; decoupled for adamw)", 0),
        string_field("schedule", &train.schedule, "Learning-rate schedule",
                     {"constant", "step", "epoch", "noam", "cosine"}),
        int_field("warmup_steps", &train.warmup_steps, "Warm-up steps (noam, cosine)", 0),
        int_field("decay_steps", &train.decay_steps, "step schedule: steps between decays", 1),
        real_field("decay_rate", &train.decay_rate, "step/epoch schedules: factor per decay", 0, 1),
        real_field("min_lr", &train.min_lr, "cosine schedule: final learning rate", 0),
        real_field("clip_grad_norm", &train.clip_grad_norm, "Clip the global gradient norm to this (0 = off)", 0),
        int_field("epochs", &train.epochs, "Passes over the training data", 1),
        int_field("max_steps", &train.max_steps, "Stop after this many steps (0 = epochs decide)", 0),
        real_field("max_seconds", &train.max_seconds, "Stop after this much wall time in seconds (0 = no limit)", 0),
        int_field("seed", &train.seed, "Random seed (same seed, same losses on the CPU)", 0),
        string_field("device", &train.device, "cpu, cuda, cuda:N or auto"),
        int_field("threads", &train.threads, "CPU threads (0 = all cores)", 0),
        string_field("on_nonfinite", &train.on_nonfinite, "What a NaN/inf loss or gradient does", {"stop", "skip"}),
        int_field("early_stop_patience", &train.early_stop_patience,
                  "Stop after this many evaluations without improvement (0 = off)", 0)}},
      {"eval", "Evaluation during training.",
       {int_field("every_steps", &eval.every_steps, "Evaluate every N steps (0 = at the end of each epoch)", 0),
        string_field("metric", &eval.metric, "Metric that picks the best checkpoint (empty = task default)"),
        int_field("max_batches", &eval.max_batches, "Evaluate on at most this many batches (0 = all)", 0)}},
      {"log", "Logging.",
       {int_field("every_steps", &log.every_steps, "Log training loss every N steps", 1),
        bool_field("progress", &log.progress, "Progress bar when stdout is a terminal")}},
  };
}

Config parse_config(const std::string& text, const std::string& source, const std::vector<std::string>& overrides) {
  Config c;
  const auto schema = c.schema();
  Origins origins;
  parse_yaml(schema, text, source, &origins);
  for (const std::string& o : overrides) apply_override(schema, o, &origins);
  // Keys the file does not set (e.g. a missing required one) are reported against the file itself.
  for (const Section& s : schema)
    for (const Field& f : s.fields) origins.try_emplace(s.name.empty() ? f.key : s.name + "." + f.key, source);
  validate(schema, &origins);
  if (c.train.device != "auto") Device::parse(c.train.device);  // a clear error for bad names
  return c;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  SRU_CHECK(in.good(), "cannot read config file '", path, "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path, overrides);
}

}  // namespace sru::config
