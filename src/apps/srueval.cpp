// srueval: evaluates a srutrain checkpoint on a split of its data or on any file, and uses what the
// task can do beyond that (predict, generate), asking the task for each capability; its subcommands are
// the scorers the registered tasks declare (TaskSpec::scorers), so no task is named here.
// The model is rebuilt from the config stored in the checkpoint: no config file is needed.
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

namespace {

// The capability `option` needs, or an error naming the task that lacks it.
template <typename Capability>
Capability& require(Capability* capability, const sru::tasks::Task& task, const std::string& option,
                    const std::string& what) {
  SRU_CHECK(capability, option, ": task ", task.name(), " cannot ", what);
  return *capability;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"srueval: evaluate a srutrain checkpoint (its config comes from the checkpoint)"};
  cli.set_version_flag("--version", sru::apps::version_line("srueval"));
  sru::apps::add_debug_flag(cli);
  std::string checkpoint, split, text_file, json_path, prompt, predict_file, predictions_path, translate_input;
  std::vector<std::string> overrides;
  int64_t generate = 0, max_batches = 0, chunk = 0;
  double temperature = 1.0;
  uint64_t seed = 1;
  int threads = 0;
  bool device_info = false, raw_weights = false;
  std::string precision = "fp32";
  cli.add_option("--checkpoint", checkpoint, "Checkpoint file (last.safetensors or best.safetensors of a run)");
  cli.add_flag("--raw-weights", raw_weights, "Use the raw weights (raw.*) of a checkpoint written with a moving "
               "average of the weights (train.ema_decay), instead of the average its model tensors hold");
  cli.add_option("--split", split, "Split to evaluate (default: the task's validation split; e.g. train, valid, test)");
  cli.add_option("--text", text_file, "Evaluate on this file instead, in the format of the checkpoint's task (a language "
                 "model reads it as one stream from a zero state; README.md's srueval section lists each task's)");
  cli.add_option("--predict", predict_file, "Answer the inputs of this file (the task's input format, without answers) "
                 "and print the answers in the task's output format");
  cli.add_option("--translate", translate_input, "Translate the sentences of this file (one a line, plain or .gz; - reads "
                 "standard input) to standard output, detokenised: beam search with the checkpoint's eval.beam_size "
                 "and eval.length_penalty unless --beam/--greedy/--length-penalty say otherwise, --n-best K lines per "
                 "sentence; the speed goes to standard error");
  cli.add_option("--predictions", predictions_path, "Also write the answers behind the evaluation to this file, in the "
                 "task's output format (the one its scoring subcommand, if any, reads)");
  cli.add_option("--chunk", chunk, "Tokens per forward pass with --text (default data.bptt); the result does not depend on it")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--max-batches", max_batches, "Evaluate at most this many batches (0 = all)")->check(CLI::NonNegativeNumber);
  cli.add_option("--json", json_path, "Also write the metrics as JSON to this file");
  cli.add_option("--set", overrides, "Override a key of the stored config, e.g. --set data.path=/data/enwik8");
  sru::tasks::GenerationOptions generation;
  bool greedy = false;
  cli.add_option("--generate", generate, "Generate this many tokens from a language model after the evaluation "
                 "(sampling by default; --greedy or --beam K to search instead)")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--temperature", temperature, "Sampling temperature")->check(CLI::PositiveNumber)->capture_default_str();
  cli.add_option("--prompt", prompt, "Text the sample continues");
  cli.add_option("--seed", seed, "Sampling seed")->capture_default_str();
  cli.add_option("--top-k", generation.sampling.top_k, "Sample from the k most probable tokens only (0 = all)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cli.add_option("--top-p", generation.sampling.top_p, "Sample from the smallest set of most probable tokens whose "
                 "probability reaches p (nucleus sampling; 1 = all)")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cli.add_flag("--greedy", greedy, "Generate (or translate) with the most probable token each step instead of "
               "sampling (or beam search)");
  auto* beam_option = cli.add_option("--beam", generation.beam.beam_size, "Beam search with this many beams instead "
                                     "of sampling (--translate: instead of the checkpoint's eval.beam_size)")
                          ->check(CLI::PositiveNumber);
  auto* length_penalty_option =
      cli.add_option("--length-penalty", generation.beam.length_penalty, "Beam search: GNMT length penalty alpha "
                     "((5 + |Y|) / 6)^alpha (0 = none; --translate: the checkpoint's eval.length_penalty unless given)")
          ->check(CLI::NonNegativeNumber)->capture_default_str();
  cli.add_option("--n-best", generation.beam.n_best, "Beam search: print this many best continuations (<= --beam; "
                 "--translate: this many lines per sentence, best first)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cli.add_option("--samples", generation.batch, "Continuations to generate together (sampling draws each apart)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cli.add_option("--threads", threads, "CPU threads (0 = all cores)")->check(CLI::NonNegativeNumber);
  cli.add_option("--precision", precision, "Float32 matrix products of the evaluation, generation or translation: "
                 "fp32, tf32 (FP32 on the CPU) or bf16 (operands rounded to BF16, FP32 sums), as train.precision; "
                 "not the stored config's, so that evaluations compare")
      ->capture_default_str()->check(CLI::IsMember(sru::precision_names()));
  cli.add_flag("--device-info", device_info, "Print the CPU thread count and the CUDA devices, then exit");
  std::string convert_form, out_path;
  cli.add_option("--convert", convert_form, "Write the checkpoint's model in another form that computes the same "
                 "outputs to --out: super-embed (a v1 SRU's first layer as Super-Embed-SRU per-word tables)");
  std::vector<std::string> average_inputs;
  cli.add_option("--average", average_inputs, "Average these checkpoints' weights (two or more of one model, e.g. "
                 "the last few of a run) into --out; evaluate the result with --checkpoint")
      ->expected(2, -1)->check(CLI::ExistingFile);
  cli.add_option("--out", out_path, "The converted (--convert) or averaged (--average) checkpoint");
  // The scoring subcommands the registered tasks declare (TaskSpec::scorers), one each.
  struct ScorerCommand {
    const sru::tasks::Scorer* scorer;
    CLI::App* command;
    std::map<std::string, std::string> values;  // by option name; std::map keeps the bound strings in place
  };
  std::vector<const sru::tasks::Scorer*> scorers;
  try {
    scorers = sru::tasks::scorers();
  } catch (const sru::Error& e) {
    sru::apps::print_error("srueval", e);
    return 1;
  }
  std::vector<ScorerCommand> scorer_commands(scorers.size());
  for (size_t i = 0; i < scorers.size(); ++i) {
    ScorerCommand& c = scorer_commands[i];
    c.scorer = scorers[i];
    c.command = cli.add_subcommand(c.scorer->name, c.scorer->help);
    for (const sru::tasks::ScorerOption& o : c.scorer->options) {
      CLI::Option* option = c.command->add_option("--" + o.name, c.values[o.name], o.help);
      if (o.required) option->required();
    }
  }
  CLI11_PARSE(cli, argc, argv);

  return sru::apps::run_main("srueval", [&] {
    if (device_info) {
      std::cout << sru::apps::device_summary();
      return 0;
    }
    SRU_CHECK(!raw_weights || (average_inputs.empty() && convert_form.empty() &&
                                std::none_of(scorer_commands.begin(), scorer_commands.end(),
                                             [](const ScorerCommand& c) { return c.command->parsed(); })),
              "--raw-weights picks the weights a checkpoint is evaluated with: it does not apply to --average, "
              "--convert or a scoring subcommand");
    for (const ScorerCommand& c : scorer_commands) {
      if (!c.command->parsed()) continue;
      sru::tasks::ScorerArgs args;  // the options given
      for (const sru::tasks::ScorerOption& o : c.scorer->options)
        if (c.command->count("--" + o.name) > 0) args[o.name] = c.values.at(o.name);
      return c.scorer->run(args, std::cout, std::cerr);
    }
    if (!average_inputs.empty()) {
      SRU_CHECK(checkpoint.empty() && convert_form.empty(), "--average writes --out: evaluate the result with a "
                "second call, srueval --checkpoint ", out_path.empty() ? "FILE" : out_path);
      std::cout << sru::train::average_checkpoints(average_inputs, out_path) << "\n";
      return 0;
    }
    SRU_CHECK(!checkpoint.empty(), "no checkpoint given: srueval --checkpoint FILE (see srueval --help)");
    sru::set_num_threads(threads);
    if (!convert_form.empty()) {
      sru::train::convert_checkpoint(checkpoint, convert_form, out_path);
      std::cout << "converted " << checkpoint << " (" << convert_form << ") -> " << out_path << "\n";
      return 0;
    }
    const sru::train::LoadedCheckpoint ckpt = sru::train::read_checkpoint(checkpoint, overrides);
    sru::set_matmul_precision(sru::parse_precision(precision, "--precision"));
    sru::Generator gen(seed);
    const bool on_file = !text_file.empty() || !predict_file.empty() || !translate_input.empty();
    auto task = sru::tasks::make_task(ckpt.config, gen, {/*load_data=*/!on_file, &ckpt.file});
    sru::train::load_model(task->model(), ckpt.file, checkpoint);
    SRU_CHECK(!raw_weights || sru::train::restore_raw_weights(task->model().named_parameters(), ckpt.file, checkpoint),
              "--raw-weights: ", checkpoint, " holds no raw weights (raw.*): it was written with train.ema_decay 0, "
              "or is a best.safetensors written without train.ema_keep_raw");
    task->model().eval();
    // What the options ask of the task is checked before any work.
    if (generate > 0) require(task->generation(), *task, "--generate", "generate text");
    if (!text_file.empty()) require(task->file_evaluation(), *task, "--text", "evaluate a file");

    if (!predict_file.empty()) {
      require(task->prediction(), *task, "--predict", "predict").predict_file(predict_file, std::cout);
      return 0;
    }
    if (!translate_input.empty()) {
      auto& translator = require(task->translation(), *task, "--translate", "translate");
      SRU_CHECK(!(greedy && beam_option->count() > 0), "--greedy and --beam: choose one way to translate");
      sru::tasks::TranslationOptions options;
      options.beam = !greedy;
      if (beam_option->count() > 0) options.beam_size = generation.beam.beam_size;
      if (length_penalty_option->count() > 0) options.length_penalty = generation.beam.length_penalty;
      options.n_best = generation.beam.n_best;
      sru::tasks::TranslationStats stats;
      if (translate_input == "-") {
        // A person typing gets each sentence back at once; a pipe is translated in batches.
        if (::isatty(STDIN_FILENO)) options.buffer_lines = 1;
        const auto next_line = [](std::string& line) {
          if (!std::getline(std::cin, line)) return false;
          if (line.ends_with('\r')) line.pop_back();
          return true;
        };
        stats = translator.translate_lines(next_line, "standard input", std::cout, options);
      } else {
        sru::data::LineReader reader(translate_input);
        stats = translator.translate_lines([&](std::string& line) { return reader.next(line); }, translate_input,
                                           std::cout, options);
      }
      std::cerr << sru::tasks::translation_speed(stats) << "\n";
      return 0;
    }
    nlohmann::ordered_json out;
    out["checkpoint"] = checkpoint;
    out["step"] = ckpt.progress.step;
    if (precision != "fp32") out["precision"] = precision;
    sru::tasks::Metrics metrics;
    if (split.empty()) split = task->validation_split();
    if (!predictions_path.empty()) {
      SRU_CHECK(max_batches == 0, "--predictions answers every question: drop --max-batches");
      std::ostringstream answers;
      metrics = require(task->prediction(), *task, "--predictions", "write predictions")
                    .evaluate_with_predictions(split, text_file, answers);
      sru::train::write_file_atomic(predictions_path, answers.str());
      out["predictions"] = predictions_path;
    } else if (on_file) {
      metrics = require(task->file_evaluation(), *task, "--text", "evaluate a file")
                    .evaluate_file(text_file, max_batches, chunk);
    } else {
      metrics = task->evaluate(split, max_batches);
    }
    out[on_file ? "text" : "split"] = on_file ? text_file : split;
    nlohmann::ordered_json m;
    for (const auto& [k, v] : metrics) m[k] = v;
    out["metrics"] = m;
    std::cout << (on_file ? text_file : split) << ":";
    for (const auto& [k, v] : metrics) std::cout << "  " << k << " " << v;
    std::cout << "\n";
    if (generate > 0) {
      SRU_CHECK(!(greedy && beam_option->count() > 0), "--greedy and --beam: choose one way to generate");
      generation.tokens = generate;
      generation.sampling.temperature = temperature;
      generation.sampling.seed = seed;
      generation.strategy = greedy                       ? sru::tasks::GenerationOptions::Strategy::Greedy
                            : beam_option->count() > 0 ? sru::tasks::GenerationOptions::Strategy::Beam
                                                       : sru::tasks::GenerationOptions::Strategy::Sample;
      if (generation.strategy != sru::tasks::GenerationOptions::Strategy::Beam) generation.beam.n_best = 1;
      const auto texts = require(task->generation(), *task, "--generate", "generate text").generate(prompt, generation);
      std::string how;
      switch (generation.strategy) {
        case sru::tasks::GenerationOptions::Strategy::Sample: {
          std::ostringstream t;
          t << "sample (temperature " << temperature;
          if (generation.sampling.top_k > 0) t << ", top-k " << generation.sampling.top_k;
          if (generation.sampling.top_p < 1) t << ", top-p " << generation.sampling.top_p;
          how = t.str() + ")";
          break;
        }
        case sru::tasks::GenerationOptions::Strategy::Greedy: how = "greedy"; break;
        case sru::tasks::GenerationOptions::Strategy::Beam:
          how = "beam " + std::to_string(generation.beam.beam_size);
          break;
      }
      nlohmann::ordered_json samples = nlohmann::ordered_json::array();
      for (size_t row = 0; row < texts.size(); ++row)
        for (size_t k = 0; k < texts[row].size(); ++k) {
          std::cout << how;
          if (texts.size() > 1) std::cout << " " << row + 1;
          if (texts[row].size() > 1) std::cout << " (" << k + 1 << " of " << texts[row].size() << ")";
          std::cout << ":\n" << prompt << texts[row][k] << "\n";
          samples.push_back(prompt + texts[row][k]);
        }
      out["sample"] = samples.size() == 1 ? samples[0] : samples;
    }
    if (!json_path.empty()) sru::train::write_file_atomic(json_path, out.dump(2) + "\n");
    return 0;
  });
}
