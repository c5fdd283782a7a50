// srueval: evaluates a srutrain checkpoint on a split of its data or on any file, and uses what the
// task can do beyond that (predict, generate, translate), asking the task for each capability; its
// subcommands are the scorers the registered tasks declare (TaskSpec::scorers), so no task is named here.
// The model is rebuilt from the config stored in the checkpoint: no config file is needed.
// main parses the options into EvalArgs and hands them to one function per mode.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/common.h"
#include "core/error.h"
#include "core/parallel.h"
#include "data/line_reader.h"
#include "ops/matmul.h"
#include "tasks/registry.h"
#include "train/average.h"
#include "train/checkpoint.h"
#include "train/convert.h"
#include "train/ema.h"
#include "train/run_files.h"
#include "train/trainer.h"

namespace {

// The capability `option` needs, or an error naming the task that lacks it.
template <typename Capability>
Capability& require(Capability* capability, const sru::tasks::Task& task, const std::string& option,
                    const std::string& what) {
  SRU_CHECK(capability, option, ": task ", task.name(), " cannot ", what);
  return *capability;
}

// Everything the command line says (the option objects for the "was it given" questions).
struct EvalArgs {
  std::string checkpoint, split, text_file, json_path, prompt, predict_file, predictions_path, translate_input;
  std::vector<std::string> overrides;
  int64_t generate = 0, max_batches = 0, chunk = 0;
  double temperature = 1.0;
  uint64_t seed = 1;
  int threads = 0;
  bool device_info = false, raw_weights = false, greedy = false;
  std::string precision = "fp32";
  std::string convert_form, out_path;
  std::vector<std::string> average_inputs;
  sru::tasks::GenerationOptions generation;
  CLI::Option* beam_option = nullptr;
  CLI::Option* length_penalty_option = nullptr;
  bool beam_given() const { return beam_option->count() > 0; }
};

// A scoring subcommand of a registered task (TaskSpec::scorers) and the values of its options.
struct ScorerCommand {
  const sru::tasks::Scorer* scorer;
  CLI::App* command;
  std::map<std::string, std::string> values;  // by option name; std::map keeps the bound strings in place
};

// The options of evaluation, prediction, translation, conversion and averaging (a declarative table).
void add_checkpoint_options(CLI::App& cli, EvalArgs& a) {
  cli.add_option("--checkpoint", a.checkpoint, "Checkpoint file (last.safetensors or best.safetensors of a run)");
  cli.add_flag("--raw-weights", a.raw_weights, "Use the raw weights (raw.*) of a checkpoint written with a moving "
               "average of the weights (train.ema_decay), instead of the average its model tensors hold");
  cli.add_option("--split", a.split, "Split to evaluate (default: the task's validation split; e.g. train, valid, test)");
  cli.add_option("--text", a.text_file, "Evaluate on this file instead, in the format of the checkpoint's task (a language "
                 "model reads it as one stream from a zero state; README.md's srueval section lists each task's)");
  cli.add_option("--predict", a.predict_file, "Answer the inputs of this file (the task's input format, without answers) "
                 "and print the answers in the task's output format");
  cli.add_option("--translate", a.translate_input, "Translate the sentences of this file (one a line, plain or .gz; - reads "
                 "standard input) to standard output, detokenised: beam search with the checkpoint's eval.beam_size "
                 "and eval.length_penalty unless --beam/--greedy/--length-penalty say otherwise, --n-best K lines per "
                 "sentence; the speed goes to standard error");
  cli.add_option("--predictions", a.predictions_path, "Also write the answers behind the evaluation to this file, in the "
                 "task's output format (the one its scoring subcommand, if any, reads)");
  cli.add_option("--chunk", a.chunk, "Tokens per forward pass with --text (default data.bptt); the result does not depend on it")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--max-batches", a.max_batches, "Evaluate at most this many batches (0 = all)")->check(CLI::NonNegativeNumber);
  cli.add_option("--json", a.json_path, "Also write the metrics as JSON to this file");
  cli.add_option("--set", a.overrides, "Override a key of the stored config, e.g. --set data.path=/data/enwik8");
  cli.add_option("--threads", a.threads, "CPU threads (0 = all cores)")->check(CLI::NonNegativeNumber);
  cli.add_option("--precision", a.precision, "Float32 matrix products of the evaluation, generation or translation: "
                 "fp32, tf32 (FP32 on the CPU) or bf16 (operands rounded to BF16, FP32 sums), as train.precision; "
                 "not the stored config's, so that evaluations compare")
      ->capture_default_str()->check(CLI::IsMember(sru::precision_names()));
  cli.add_flag("--device-info", a.device_info, "Print the CPU thread count and the CUDA devices, then exit");
  cli.add_option("--convert", a.convert_form, "Write the checkpoint's model in another form that computes the same "
                 "outputs to --out: super-embed (a v1 SRU's first layer as Super-Embed-SRU per-word tables)");
  cli.add_option("--average", a.average_inputs, "Average these checkpoints' weights (two or more of one model, e.g. "
                 "the last few of a run) into --out; evaluate the result with --checkpoint")
      ->expected(2, -1)->check(CLI::ExistingFile);
  cli.add_option("--out", a.out_path, "The converted (--convert) or averaged (--average) checkpoint");
}

// The options of generation and of translation's search (a declarative table).
void add_generation_options(CLI::App& cli, EvalArgs& a) {
  sru::tasks::GenerationOptions& g = a.generation;
  cli.add_option("--generate", a.generate, "Generate this many tokens from a language model after the evaluation "
                 "(sampling by default; --greedy or --beam K to search instead)")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--temperature", a.temperature, "Sampling temperature")->check(CLI::PositiveNumber)->capture_default_str();
  cli.add_option("--prompt", a.prompt, "Text the sample continues");
  cli.add_option("--seed", a.seed, "Sampling seed")->capture_default_str();
  cli.add_option("--top-k", g.sampling.top_k, "Sample from the k most probable tokens only (0 = all)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cli.add_option("--top-p", g.sampling.top_p, "Sample from the smallest set of most probable tokens whose "
                 "probability reaches p (nucleus sampling; 1 = all)")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cli.add_flag("--greedy", a.greedy, "Generate (or translate) with the most probable token each step instead of "
               "sampling (or beam search)");
  a.beam_option = cli.add_option("--beam", g.beam.beam_size, "Beam search with this many beams instead "
                                 "of sampling (--translate: instead of the checkpoint's eval.beam_size)")
                      ->check(CLI::PositiveNumber);
  a.length_penalty_option =
      cli.add_option("--length-penalty", g.beam.length_penalty, "Beam search: GNMT length penalty alpha "
                     "((5 + |Y|) / 6)^alpha (0 = none; --translate: the checkpoint's eval.length_penalty unless given)")
          ->check(CLI::NonNegativeNumber)->capture_default_str();
  cli.add_option("--n-best", g.beam.n_best, "Beam search: print this many best continuations (<= --beam; "
                 "--translate: this many lines per sentence, best first)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cli.add_option("--samples", g.batch, "Continuations to generate together (sampling draws each apart)")
      ->check(CLI::PositiveNumber)->capture_default_str();
}

// One subcommand per scorer the registered tasks declare.
std::vector<ScorerCommand> add_scorer_commands(CLI::App& cli, const std::vector<const sru::tasks::Scorer*>& scorers) {
  std::vector<ScorerCommand> commands(scorers.size());
  for (size_t i = 0; i < scorers.size(); ++i) {
    ScorerCommand& c = commands[i];
    c.scorer = scorers[i];
    c.command = cli.add_subcommand(c.scorer->name, c.scorer->help);
    for (const sru::tasks::ScorerOption& o : c.scorer->options) {
      CLI::Option* option = c.command->add_option("--" + o.name, c.values[o.name], o.help);
      if (o.required) option->required();
    }
  }
  return commands;
}

int run_scorer(const ScorerCommand& c) {
  sru::tasks::ScorerArgs args;  // the options given
  for (const sru::tasks::ScorerOption& o : c.scorer->options)
    if (c.command->count("--" + o.name) > 0) args[o.name] = c.values.at(o.name);
  return c.scorer->run(args, std::cout, std::cerr);
}

// --translate: the file's (or standard input's) sentences to standard output, the speed to standard error.
int run_translate(sru::tasks::Task& task, const EvalArgs& a) {
  auto& translator = require(task.translation(), task, "--translate", "translate");
  SRU_CHECK(!(a.greedy && a.beam_given()), "--greedy and --beam: choose one way to translate");
  sru::tasks::TranslationOptions options;
  options.beam = !a.greedy;
  if (a.beam_given()) options.beam_size = a.generation.beam.beam_size;
  if (a.length_penalty_option->count() > 0) options.length_penalty = a.generation.beam.length_penalty;
  options.n_best = a.generation.beam.n_best;
  sru::tasks::TranslationStats stats;
  if (a.translate_input == "-") {
    // A person typing gets each sentence back at once; a pipe is translated in batches.
    if (::isatty(STDIN_FILENO)) options.buffer_lines = 1;
    const auto next_line = [](std::string& line) {
      if (!std::getline(std::cin, line)) return false;
      if (line.ends_with('\r')) line.pop_back();
      return true;
    };
    stats = translator.translate_lines(next_line, "standard input", std::cout, options);
  } else {
    sru::data::LineReader reader(a.translate_input);
    stats = translator.translate_lines([&](std::string& line) { return reader.next(line); }, a.translate_input,
                                       std::cout, options);
  }
  std::cerr << sru::tasks::translation_speed(stats) << "\n";
  return 0;
}

// The metrics of a split, of --text, or behind --predictions; printed, and into `out`.
void evaluate(sru::tasks::Task& task, EvalArgs& a, nlohmann::ordered_json& out) {
  const bool on_file = !a.text_file.empty();
  sru::tasks::Metrics metrics;
  if (a.split.empty()) a.split = task.validation_split();
  if (!a.predictions_path.empty()) {
    SRU_CHECK(a.max_batches == 0, "--predictions answers every question: drop --max-batches");
    std::ostringstream answers;
    metrics = require(task.prediction(), task, "--predictions", "write predictions")
                  .evaluate_with_predictions(a.split, a.text_file, answers);
    sru::train::write_file_atomic(a.predictions_path, answers.str());
    out["predictions"] = a.predictions_path;
  } else if (on_file) {
    metrics = require(task.file_evaluation(), task, "--text", "evaluate a file")
                  .evaluate_file(a.text_file, a.max_batches, a.chunk);
  } else {
    metrics = task.evaluate(a.split, a.max_batches);
  }
  out[on_file ? "text" : "split"] = on_file ? a.text_file : a.split;
  nlohmann::ordered_json m;
  for (const auto& [k, v] : metrics) m[k] = v;
  out["metrics"] = m;
  std::cout << (on_file ? a.text_file : a.split) << ":";
  for (const auto& [k, v] : metrics) std::cout << "  " << k << " " << v;
  std::cout << "\n";
}

// How the samples were drawn, for their heading: "sample (temperature 1, top-k 5)", "greedy", "beam 4".
std::string generation_heading(const sru::tasks::GenerationOptions& g) {
  using Strategy = sru::tasks::GenerationOptions::Strategy;
  if (g.strategy == Strategy::Greedy) return "greedy";
  if (g.strategy == Strategy::Beam) return "beam " + std::to_string(g.beam.beam_size);
  std::ostringstream t;
  t << "sample (temperature " << g.sampling.temperature;
  if (g.sampling.top_k > 0) t << ", top-k " << g.sampling.top_k;
  if (g.sampling.top_p < 1) t << ", top-p " << g.sampling.top_p;
  return t.str() + ")";
}

// --generate: continuations of --prompt, printed, and into `out` ("sample").
void generate(sru::tasks::Task& task, EvalArgs& a, nlohmann::ordered_json& out) {
  using Strategy = sru::tasks::GenerationOptions::Strategy;
  SRU_CHECK(!(a.greedy && a.beam_given()), "--greedy and --beam: choose one way to generate");
  sru::tasks::GenerationOptions& g = a.generation;
  g.tokens = a.generate;
  g.sampling.temperature = a.temperature;
  g.sampling.seed = a.seed;
  g.strategy = a.greedy ? Strategy::Greedy : a.beam_given() ? Strategy::Beam : Strategy::Sample;
  if (g.strategy != Strategy::Beam) g.beam.n_best = 1;
  const auto texts = require(task.generation(), task, "--generate", "generate text").generate(a.prompt, g);
  const std::string how = generation_heading(g);
  nlohmann::ordered_json samples = nlohmann::ordered_json::array();
  for (size_t row = 0; row < texts.size(); ++row)
    for (size_t k = 0; k < texts[row].size(); ++k) {
      std::cout << how;
      if (texts.size() > 1) std::cout << " " << row + 1;
      if (texts[row].size() > 1) std::cout << " (" << k + 1 << " of " << texts[row].size() << ")";
      std::cout << ":\n" << a.prompt << texts[row][k] << "\n";
      samples.push_back(a.prompt + texts[row][k]);
    }
  out["sample"] = samples.size() == 1 ? samples[0] : samples;
}

// The modes that read a checkpoint's model: --predict, --translate, or evaluation (then --generate).
int run_checkpoint(EvalArgs& a) {
  const sru::train::LoadedCheckpoint ckpt = sru::train::read_checkpoint(a.checkpoint, a.overrides);
  sru::set_matmul_precision(sru::parse_precision(a.precision, "--precision"));
  sru::train::apply_attention_kernel(ckpt.config.train);  // as trained, or --set train.attention=...
  sru::Generator gen(a.seed);
  const bool on_file = !a.text_file.empty() || !a.predict_file.empty() || !a.translate_input.empty();
  auto task = sru::tasks::make_task(ckpt.config, gen, {/*load_data=*/!on_file, &ckpt.file});
  sru::train::load_model(task->model(), ckpt.file, a.checkpoint);
  SRU_CHECK(!a.raw_weights || sru::train::restore_raw_weights(task->model().named_parameters(), ckpt.file, a.checkpoint),
            "--raw-weights: ", a.checkpoint, " holds no raw weights (raw.*): it was written with train.ema_decay 0, "
            "or is a best.safetensors written without train.ema_keep_raw");
  task->model().eval();
  // What the options ask of the task is checked before any work.
  if (a.generate > 0) require(task->generation(), *task, "--generate", "generate text");
  if (!a.text_file.empty()) require(task->file_evaluation(), *task, "--text", "evaluate a file");
  if (!a.predict_file.empty()) {
    require(task->prediction(), *task, "--predict", "predict").predict_file(a.predict_file, std::cout);
    return 0;
  }
  if (!a.translate_input.empty()) return run_translate(*task, a);
  nlohmann::ordered_json out;
  out["checkpoint"] = a.checkpoint;
  out["step"] = ckpt.progress.step;
  if (a.precision != "fp32") out["precision"] = a.precision;
  evaluate(*task, a, out);
  if (a.generate > 0) generate(*task, a, out);
  if (!a.json_path.empty()) sru::train::write_file_atomic(a.json_path, out.dump(2) + "\n");
  return 0;
}

// Dispatch by mode, after the checks that span modes.
int run(EvalArgs& a, const std::vector<ScorerCommand>& scorer_commands) {
  if (a.device_info) {
    std::cout << sru::apps::device_summary();
    return 0;
  }
  const bool scoring = std::any_of(scorer_commands.begin(), scorer_commands.end(),
                                   [](const ScorerCommand& c) { return c.command->parsed(); });
  SRU_CHECK(!a.raw_weights || (a.average_inputs.empty() && a.convert_form.empty() && !scoring),
            "--raw-weights picks the weights a checkpoint is evaluated with: it does not apply to --average, "
            "--convert or a scoring subcommand");
  for (const ScorerCommand& c : scorer_commands)
    if (c.command->parsed()) return run_scorer(c);
  if (!a.average_inputs.empty()) {
    SRU_CHECK(a.checkpoint.empty() && a.convert_form.empty(), "--average writes --out: evaluate the result with a "
              "second call, srueval --checkpoint ", a.out_path.empty() ? "FILE" : a.out_path);
    std::cout << sru::train::average_checkpoints(a.average_inputs, a.out_path) << "\n";
    return 0;
  }
  SRU_CHECK(!a.checkpoint.empty(), "no checkpoint given: srueval --checkpoint FILE (see srueval --help)");
  sru::set_num_threads(a.threads);
  if (!a.convert_form.empty()) {
    sru::train::convert_checkpoint(a.checkpoint, a.convert_form, a.out_path);
    std::cout << "converted " << a.checkpoint << " (" << a.convert_form << ") -> " << a.out_path << "\n";
    return 0;
  }
  return run_checkpoint(a);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"srueval: evaluate a srutrain checkpoint (its config comes from the checkpoint)"};
  cli.set_version_flag("--version", sru::apps::version_line("srueval"));
  sru::apps::add_debug_flag(cli);
  EvalArgs args;
  add_checkpoint_options(cli, args);
  add_generation_options(cli, args);
  std::vector<ScorerCommand> scorer_commands;
  try {
    scorer_commands = add_scorer_commands(cli, sru::tasks::scorers());
  } catch (const sru::Error& e) {
    sru::apps::print_error("srueval", e);
    return 1;
  }
  CLI11_PARSE(cli, argc, argv);
  return sru::apps::run_main("srueval", [&] { return run(args, scorer_commands); });
}
