// srueval: evaluates a srutrain checkpoint on a split of its data or on any file, and uses what the
// task can do beyond that (predict, generate), asking the task for each capability.
// The model is rebuilt from the config stored in the checkpoint: no config file is needed.
#include <fstream>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/common.h"
#include "core/parallel.h"
#include "data/squad.h"
#include "data/squad_metric.h"
#include "tasks/registry.h"
#include "train/checkpoint.h"
#include "train/convert.h"
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
  std::string checkpoint, split, text_file, json_path, prompt, predict_file, predictions_path;
  std::vector<std::string> overrides;
  int64_t generate = 0, max_batches = 0, chunk = 0;
  double temperature = 1.0;
  uint64_t seed = 1;
  int threads = 0;
  bool device_info = false;
  cli.add_option("--checkpoint", checkpoint, "Checkpoint file (last.safetensors or best.safetensors of a run)");
  cli.add_option("--split", split, "Split to evaluate (default: the task's validation split; e.g. train, valid, test)");
  cli.add_option("--text", text_file, "Evaluate on this file instead: language models: one stream from a zero state; "
                 "classify: \"LABEL text\" lines (accuracy); squad: a SQuAD v1.1 file (EM/F1)");
  cli.add_option("--predict", predict_file, "Answer the inputs of this file and print the answers (classify: one "
                 "sentence a line, no label -> one class a line; squad: a JSON array of {\"id\", \"context\", "
                 "\"question\"} -> a JSON object of answers)");
  cli.add_option("--predictions", predictions_path, "Also write the answers behind the evaluation to this file "
                 "(classify: one class a line; squad: {question id: answer}, what `srueval squad-score` reads)");
  cli.add_option("--chunk", chunk, "Tokens per forward pass with --text (default data.bptt); the result does not depend on it")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--max-batches", max_batches, "Evaluate at most this many batches (0 = all)")->check(CLI::NonNegativeNumber);
  cli.add_option("--json", json_path, "Also write the metrics as JSON to this file");
  cli.add_option("--set", overrides, "Override a key of the stored config, e.g. --set data.path=/data/enwik8");
  cli.add_option("--generate", generate, "Sample this many tokens from a language model after the evaluation")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--temperature", temperature, "Sampling temperature")->check(CLI::PositiveNumber)->capture_default_str();
  cli.add_option("--prompt", prompt, "Text the sample continues");
  cli.add_option("--seed", seed, "Sampling seed")->capture_default_str();
  cli.add_option("--threads", threads, "CPU threads (0 = all cores)")->check(CLI::NonNegativeNumber);
  cli.add_flag("--device-info", device_info, "Print the CPU thread count and the CUDA devices, then exit");
  std::string convert_form, out_path;
  cli.add_option("--convert", convert_form, "Write the checkpoint's model in another form that computes the same "
                 "outputs to --out: super-embed (a v1 SRU's first layer as Super-Embed-SRU per-word tables)");
  cli.add_option("--out", out_path, "The converted checkpoint (--convert)");
  std::string score_data, score_predictions;
  auto* squad_score = cli.add_subcommand("squad-score", "Score a SQuAD v1.1 predictions file exactly as the official "
                                                        "evaluate-v1.1.py does; prints {\"exact_match\": ..., \"f1\": ...}");
  squad_score->add_option("--data", score_data, "The SQuAD v1.1 data file (e.g. dev-v1.1.json)")->required();
  squad_score->add_option("--predictions", score_predictions, "A JSON object {question id: answer text}")->required();
  CLI11_PARSE(cli, argc, argv);

  return sru::apps::run_main("srueval", [&] {
    if (device_info) {
      std::cout << sru::apps::device_summary();
      return 0;
    }
    if (squad_score->parsed()) {
      const sru::data::SquadDataset dataset = sru::data::read_squad(score_data);
      const sru::data::SquadScore r = sru::data::score_squad(dataset, sru::data::read_squad_predictions(score_predictions));
      // Like the official script: questions without a prediction score 0 and are named on stderr.
      for (const std::string& id : r.unanswered) std::cerr << "Unanswered question " << id << " will receive score 0.\n";
      std::cout << nlohmann::json{{"exact_match", r.exact_match}, {"f1", r.f1}}.dump() << "\n";
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
    sru::Generator gen(seed);
    const bool on_file = !text_file.empty() || !predict_file.empty();
    auto task = sru::tasks::make_task(ckpt.config, gen, {/*load_data=*/!on_file, &ckpt.file});
    sru::train::load_model(task->model(), ckpt.file, checkpoint);
    task->model().eval();
    // What the options ask of the task is checked before any work.
    if (generate > 0) require(task->generation(), *task, "--generate", "generate text");
    if (!text_file.empty()) require(task->file_evaluation(), *task, "--text", "evaluate a file");

    if (!predict_file.empty()) {
      require(task->prediction(), *task, "--predict", "predict").predict_file(predict_file, std::cout);
      return 0;
    }
    nlohmann::ordered_json out;
    out["checkpoint"] = checkpoint;
    out["step"] = ckpt.progress.step;
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
      const std::string sample =
          require(task->generation(), *task, "--generate", "generate text").generate(prompt, generate, temperature, gen);
      std::cout << "sample (temperature " << temperature << "):\n" << prompt << sample << "\n";
      out["sample"] = prompt + sample;
    }
    if (!json_path.empty()) sru::train::write_file_atomic(json_path, out.dump(2) + "\n");
    return 0;
  });
}
