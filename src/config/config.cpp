// The experiment config's schema (keys, defaults, limits, help) and loading.
#include "config/config.h"

#include <fstream>
#include <tuple>
#include <sstream>

#include "core/device.h"
#include "core/error.h"
#include "ops/matmul.h"

namespace sru::config {

namespace {

std::vector<std::string> names_of(const std::vector<PluginInfo>& plugins) {
  std::vector<std::string> names;
  for (const PluginInfo& p : plugins) names.push_back(p.name);
  return names;
}

}  // namespace

Config Config::defaults(const std::string& task, const std::string& encoder) {
  Config c;
  c.task = task;
  c.model.type = encoder;
  c.task_options = find_named(catalogue().tasks, task, "task").make_options();
  c.encoder_options = find_named(catalogue().encoders, encoder, "model.type").make_options();
  return c;
}

std::vector<Section> Config::schema() {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<Section> sections = {
      {"", "", {string_field("task", &task, "Which task to run", names_of(catalogue().tasks))}},
      {"data", "Where the data comes from and how it is batched.",
       {string_field("path", &data.path, "Training data file (what it holds depends on the task: see its keys below)", {},
                     true),
        int_field("batch_size", &data.batch_size, "Training batch size (parallel streams for language models)", 1),
        int_field("eval_batch_size", &data.eval_batch_size, "Evaluation batch size (parallel streams / examples)", 1)}},
      {"model", "The network.",
       {string_field("type", &model.type, "Sequence encoder", names_of(catalogue().encoders)),
        int_field("embedding_size", &model.embedding_size, "Embedding size", 1),
        int_field("hidden_size", &model.hidden_size, "Hidden size per direction", 1),
        int_field("num_layers", &model.num_layers, "Stacked recurrent layers", 1),
        real_field("dropout", &model.dropout, "SRU: variational dropout inside the recurrence (not the last layer); "
                   "LSTM: dropout between layers", 0, 0.99),
        real_field("embedding_dropout", &model.embedding_dropout, "Dropout on the embeddings", 0, 0.99),
        real_field("output_dropout", &model.output_dropout, "Dropout on the top layer's output", 0, 0.99),
        bool_field("bidirectional", &model.bidirectional,
                   "Bidirectional recurrent layers (tasks that read left to right refuse it)"),
        bool_field("freeze_embedding", &model.freeze_embedding, "Keep the embeddings fixed during training")}},
      {"train", "Optimisation.",
       {string_field("optimizer", &train.optimizer, "Optimiser", {"sgd", "adam", "adamw", "adamax", "radam", "radamw"}),
        real_field("lr", &train.lr, "Learning rate (for noam: the factor)", 0, inf, true),
        real_field("momentum", &train.momentum, "SGD momentum", 0, 1),
        real_field("beta1", &train.beta1, "Adam-family beta1", 0, 1),
        real_field("beta2", &train.beta2, "Adam-family beta2", 0, 1),
        real_field("eps", &train.eps, "Adam-family epsilon", 0, inf, true),
        real_field("weight_decay", &train.weight_decay, "Weight decay (L2; decoupled for adamw and radamw)", 0),
        string_list_field("weight_decay_exclude", &train.weight_decay_exclude, "Parameters without weight decay: "
                          "those whose name (as in checkpoints) contains one of these strings, e.g. [bias, layer_norm] "
                          "(the usual exclusion of biases and layer norms); each must match a trainable parameter"),
        string_field("schedule", &train.schedule, "Learning-rate schedule",
                     {"constant", "step", "epoch", "noam", "cosine"}),
        int_field("warmup_steps", &train.warmup_steps, "Warm-up steps (noam, cosine)", 0),
        int_field("decay_steps", &train.decay_steps, "step schedule: steps between decays", 1),
        real_field("decay_rate", &train.decay_rate, "step/epoch schedules: factor per decay", 0, 1),
        int_field("epochs_before_decay", &train.epochs_before_decay,
                  "epoch schedule: epochs at the initial rate before the per-epoch decay (Zaremba et al. 2014: 6)", 0),
        real_field("min_lr", &train.min_lr, "cosine schedule: final learning rate", 0),
        real_field("clip_grad_norm", &train.clip_grad_norm, "Clip the global gradient norm to this (0 = off)", 0),
        int_field("accumulate", &train.accumulate,
                  "Training batches per optimiser update: their gradients are summed, weighted so that the update "
                  "is one step on the union of their loss terms (an epoch's last update takes the batches left). "
                  "Steps (max_steps, warm-up and decay, eval.every_steps, log.every_steps) count updates", 1),
        real_field("label_smoothing", &train.label_smoothing,
                   "Label smoothing of the training loss (PyTorch's CrossEntropyLoss(label_smoothing)); evaluation "
                   "metrics stay the plain log-likelihood", 0, 1, false, true),
        int_field("epochs", &train.epochs, "Passes over the training data", 1),
        int_field("max_steps", &train.max_steps, "Stop after this many steps (0 = epochs decide)", 0),
        real_field("max_seconds", &train.max_seconds, "Stop after this much wall time in seconds (0 = no limit)", 0),
        int_field("seed", &train.seed, "Random seed (same seed, same losses on the CPU)", 0),
        string_field("device", &train.device, "cpu, cuda, cuda:N or auto (data parallel: cuda and auto give each "
                     "process cuda:local_rank)"),
        string_field("precision", &train.precision, "Arithmetic of the matrix products (PyTorch's autocast choice "
                     "for them): fp32; tf32 = TF32 tensor cores on a GPU (10-bit mantissas; the CPU has none and "
                     "computes FP32); bf16 = both operands of every float32 product (Linear, bmm, attention, the "
                     "SRU's W x, their backward products) rounded to BF16 (7-bit mantissas, round to nearest even), "
                     "BF16 tensor cores on a GPU; on the CPU AVX512-BF16 kernels (vdpbf16ps, FP32 sums) where the "
                     "processor has them, else the same rounding before sgemm (no faster than fp32); activations that feed "
                     "products are BF16 as under PyTorch's autocast (Linear, attention and feed-forward outputs, "
                     "the SRU and SRU++ layers' U, recurrence I/O and h between layers; residual streams and "
                     "encoder outputs FP32). Sums, normalisation statistics, softmax, losses, the recurrences' state, "
                     "parameters, gradients and optimiser state stay FP32; "
                     "no loss scaling. Replaces train.matmul_precision (highest/high/medium read as fp32/tf32/bf16)",
                     precision_names()),
        int_field("threads", &train.threads, "Most CPU threads (0 = all cores; data parallel: the cores shared by "
                  "the processes on a machine); fewer while other processes keep cores busy", 0),
        string_field("on_nonfinite", &train.on_nonfinite, "What a NaN/inf loss or gradient does", {"stop", "skip"}),
        string_field("cuda_graphs", &train.cuda_graphs, "Replay the training step (forward, backward, clipping, "
                     "update) as one CUDA graph per batch shape where shapes repeat (char and word LM; classify, "
                     "translate and squad with data.pad_to_multiple set, which bounds their shapes; the LSTM on a GPU "
                     "without padding only): a "
                     "shape's first step runs eagerly, its later steps replay its graph (the epoch's most frequent "
                     "shapes, at most train.cuda_graphs_max; others eager), with the same results; with "
                     "train.accumulate > 1 a graph per batch (by shape, and whether it is its step's first) and one "
                     "for the update. auto: on a CUDA device in one process, "
                     "eager when the step cannot be captured (a warning says why); on: the same, but an error naming "
                     "the reason where auto would train eagerly; off: every step eager", {"auto", "on", "off"}),
        int_field("cuda_graphs_max", &train.cuda_graphs_max, "Most CUDA graphs a run keeps (train.cuda_graphs): "
                  "each epoch's batch shapes are counted and the most frequent get graphs while there is room (graphs "
                  "are kept for the run; the log says what share of the epoch's steps they cover); graphs share "
                  "one memory pool, so each costs a capture and its nodes, not a step's activations", 1),
        string_field("launch_ahead", &train.launch_ahead, "With replayed steps (train.cuda_graphs), launch each "
                     "step before reading the loss and gradient norm of the step before it, so that the GPU does not "
                     "wait for the host between steps. The same results: a step launched behind a non-finite one "
                     "holds its update on the device, is taken back and runs again after train.on_nonfinite has "
                     "acted (with stop, it is not run). Steps that log (log.every_steps), evaluate, end an epoch or "
                     "the run are read at once. auto: where one-batch steps replay, without train.ema_decay (the "
                     "average must follow updates only); on: an error where auto would not; off: each step's values "
                     "read before the next step is launched",
                     {"auto", "on", "off"}),
        string_field("attention", &train.attention, "How multi-head attention is computed (Transformer, SRU++, "
                     "the SQuAD reader's question attention): composed = the head products and the softmax kernels "
                     "(the (Lq, Lk) weights in memory); fused = one fused op each way (no (Lq, Lk) matrix kept: for "
                     "long sequences short of memory; slower on an H200 at the measured sizes, docs/results.md), where "
                     "a head has at most 128 features (wider heads, e.g. configs/squad.yaml's 300-d question "
                     "attention, stay composed); auto = composed, or srubench's --attention", {"auto", "composed", "fused"}),
        int_field("early_stop_patience", &train.early_stop_patience,
                  "Stop after this many evaluations without improvement (0 = off)", 0),
        real_field("dist_bucket_mb", &train.dist_bucket_mb, "Data parallel: MiB of gradients per all-reduce; the "
                   "buckets but the last start during backward (0 = one bucket after backward)", 0),
        real_field("dist_timeout_s", &train.dist_timeout_s, "Data parallel: seconds a collective call waits for the "
                   "other processes before the job ends naming the missing ones", 1),
        real_field("ema_decay", &train.ema_decay, "Keep an exponential moving average of the weights, a = decay a + "
                   "(1 - decay) w after every update (fairseq --ema-decay), and evaluate and save it: checkpoints' "
                   "model tensors are the average, the raw weights ride along as raw.* to resume from (0 = off)",
                   0, 1, false, true),
        int_field("ema_start_step", &train.ema_start_step, "With train.ema_decay: the average equals the weights "
                  "up to this step and averages from the next", 0),
        bool_field("ema_warmup", &train.ema_warmup, "With train.ema_decay: n updates after the start the decay is "
                   "min(ema_decay, (1 + n) / (10 + n)) (TensorFlow's num_updates, OpenNMT-py), so the first "
                   "weights fade fast; false: ema_decay from the first update (fairseq)"),
        bool_field("ema_keep_raw", &train.ema_keep_raw, "With train.ema_decay: best.safetensors holds the raw "
                   "weights too (last.safetensors always does, to resume)")}},
      {"eval", "Evaluation during training.",
       {int_field("every_steps", &eval.every_steps, "Evaluate every N steps (0 = at the end of each epoch)", 0),
        string_field("metric", &eval.metric, "Metric that picks the best checkpoint (empty = task default)"),
        int_field("max_batches", &eval.max_batches, "Evaluate on at most this many batches (0 = all)", 0)}},
      {"log", "Logging.",
       {int_field("every_steps", &log.every_steps, "Log training loss every N steps", 1),
        bool_field("progress", &log.progress, "Progress bar when stdout is a terminal"),
        bool_field("tensorboard", &log.tensorboard, "Also write every metrics.jsonl number to a TensorBoard events "
                   "file in the run directory (events.out.tfevents.*): train/{key}, {split}/{metric}; at the end, "
                   "summary.json's final/{split}/{metric}, best/{split}/{metric}")}},
  };
  for (auto* extra : {&task_options, &encoder_options})
    for (Section& s : owned_by(extra->sections(), (extra == &task_options ? "task " + task : "encoder " + model.type)))
      sections.push_back(std::move(s));
  return merge_sections(std::move(sections));
}

namespace {

// Which other task(s) or encoder(s) own a key path the chosen ones lack ("" when none does).
std::string owner_elsewhere(const std::string& path, const std::string& task, const std::string& encoder) {
  std::string owners;
  for (const auto& [kind, plugins, chosen] : {std::tuple{"task", &catalogue().tasks, task},
                                              std::tuple{"encoder", &catalogue().encoders, encoder}}) {
    std::string names;
    for (const PluginInfo& p : *plugins) {
      if (p.name == chosen) continue;
      Options o = p.make_options();
      for (const Section& s : o.sections())
        for (const Field& f : s.fields)
          if ((s.name.empty() ? f.key : s.name + "." + f.key) == path && names.find(p.name) == std::string::npos)
            names += (names.empty() ? "" : " / ") + p.name;
    }
    if (!names.empty() && owners.empty()) owners = std::string(kind) + " " + names;
  }
  return owners;
}

}  // namespace

Config parse_config(const std::string& text, const std::string& source, const std::vector<std::string>& overrides,
                    Origin origin) {
  // The task and the encoder decide which keys exist, so they are read first.
  std::string names[2];
  for (int i = 0; i < 2; ++i) {
    const std::string path = i == 0 ? "task" : "model.type";
    const auto& plugins = i == 0 ? catalogue().tasks : catalogue().encoders;
    const auto peeked = peek_key(text, source, path, overrides);
    names[i] = peeked ? peeked->value : (i == 0 ? Config().task : Config().model.type);
    if (peeked) find_named(plugins, names[i], peeked->origin + ": " + path);
  }
  Config c = Config::defaults(names[0], names[1]);
  const auto schema = c.schema();
  Origins origins;
  KeyPolicy policy{[&](const std::string& path) { return owner_elsewhere(path, names[0], names[1]); },
                   origin == Origin::Stored};
  // train.matmul_precision (until 2026-11-27) took PyTorch's names for the same three settings.
  RenamedKey matmul_precision{"train.matmul_precision", "train.precision", {}};
  for (size_t i = 0; i < precision_names().size(); ++i)
    matmul_precision.values.emplace_back(matmul_precision_names()[i], precision_names()[i]);
  policy.renamed.push_back(std::move(matmul_precision));
  parse_yaml(schema, text, source, &origins, policy);
  for (const std::string& o : overrides) apply_override(schema, o, &origins, policy);
  // Keys the file does not set (e.g. a missing required one) are reported against the file itself.
  for (const Section& s : schema)
    for (const Field& f : s.fields) origins.try_emplace(s.name.empty() ? f.key : s.name + "." + f.key, source);
  validate(schema, &origins);
  if (c.train.device != "auto") Device::parse(c.train.device);  // a clear error for bad names
  return c;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides, Origin origin) {
  std::ifstream in(path);
  SRU_CHECK(in.good(), "cannot read config file '", path, "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path, overrides, origin);
}

std::string reference() {
  // The common keys once, then every task's and every encoder's own keys.
  Config c = Config::defaults(catalogue().tasks.front().name, catalogue().encoders.front().name);
  std::vector<Section> all = c.schema();
  for (Section& s : all) std::erase_if(s.fields, [](const Field& f) { return !f.owner.empty(); });
  std::vector<Options> keep;  // the fields below point into these
  keep.reserve(catalogue().tasks.size() + catalogue().encoders.size());
  std::vector<std::pair<std::string, std::string>> owners;
  for (const auto& [kind, plugins] : {std::pair{"task", &catalogue().tasks}, std::pair{"encoder", &catalogue().encoders}})
    for (const PluginInfo& p : *plugins) {
      keep.push_back(p.make_options());
      owners.emplace_back(std::string(kind) + " " + p.name, p.help);
      for (Section& s : owned_by(keep.back().sections(), owners.back().first)) all.push_back(std::move(s));
    }
  return markdown_reference(merge_sections(std::move(all)), owners);
}

}  // namespace sru::config
