// srueval: evaluates a srutrain checkpoint on a split of its data or on any file, samples text
// (char-LM) or predicts classes (classify).
// The model is rebuilt from the config stored in the checkpoint: no config file is needed.
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/common.h"
#include "core/parallel.h"
#include "data/line_reader.h"
#include "tasks/charlm.h"
#include "tasks/classify.h"
#include "train/checkpoint.h"
#include "train/run_files.h"

int main(int argc, char** argv) {
  CLI::App cli{"srueval: evaluate a srutrain checkpoint (its config comes from the checkpoint)"};
  cli.set_version_flag("--version", sru::apps::version_line("srueval"));
  std::string checkpoint, split = "valid", text_file, json_path, prompt, predict_file;
  std::vector<std::string> overrides;
  int64_t generate = 0, max_batches = 0, chunk = 0;
  double temperature = 1.0;
  uint64_t seed = 1;
  int threads = 0;
  bool device_info = false;
  cli.add_option("--checkpoint", checkpoint, "Checkpoint file (last.safetensors or best.safetensors of a run)");
  cli.add_option("--split", split, "Split to evaluate: valid, test or train")->check(CLI::IsMember({"valid", "test", "train"}))
      ->capture_default_str();
  cli.add_option("--text", text_file, "Evaluate on this file instead: charlm: one stream from a zero state (BPC); "
                 "classify: \"LABEL text\" lines (accuracy)");
  cli.add_option("--predict", predict_file, "classify: print the predicted class of each line of this file "
                 "(one sentence a line, no label), one per line");
  cli.add_option("--chunk", chunk, "Bytes per forward pass with --text (default data.bptt); the result does not depend on it")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--max-batches", max_batches, "Evaluate at most this many batches (0 = all)")->check(CLI::NonNegativeNumber);
  cli.add_option("--json", json_path, "Also write the metrics as JSON to this file");
  cli.add_option("--set", overrides, "Override a key of the stored config, e.g. --set data.path=/data/enwik8");
  cli.add_option("--generate", generate, "Sample this many bytes from the model after the evaluation")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--temperature", temperature, "Sampling temperature")->check(CLI::PositiveNumber)->capture_default_str();
  cli.add_option("--prompt", prompt, "Text the sample continues");
  cli.add_option("--seed", seed, "Sampling seed")->capture_default_str();
  cli.add_option("--threads", threads, "CPU threads (0 = all cores)")->check(CLI::NonNegativeNumber);
  cli.add_flag("--device-info", device_info, "Print the CPU thread count and the CUDA devices, then exit");
  CLI11_PARSE(cli, argc, argv);

  return sru::apps::run_main("srueval", [&] {
    if (device_info) {
      std::cout << sru::apps::device_summary();
      return 0;
    }
    SRU_CHECK(!checkpoint.empty(), "no checkpoint given: srueval --checkpoint FILE (see srueval --help)");
    sru::set_num_threads(threads);
    const sru::train::LoadedCheckpoint ckpt = sru::train::read_checkpoint(checkpoint, overrides);
    sru::Generator gen(seed);
    const bool on_file = !text_file.empty() || !predict_file.empty();
    auto task = sru::tasks::make_task(ckpt.config, gen, /*load_data=*/!on_file, &ckpt.file);
    sru::train::load_model(task->model(), ckpt.file, checkpoint);
    task->model().eval();
    auto* lm = dynamic_cast<sru::tasks::CharLMTask*>(task.get());
    auto* classifier = dynamic_cast<sru::tasks::ClassifyTask*>(task.get());

    if (!predict_file.empty()) {
      SRU_CHECK(classifier, "--predict works with classify checkpoints");
      sru::data::LineReader in(predict_file);
      std::vector<std::string> lines;
      for (std::string line; in.next(line);) lines.push_back(line);
      for (int64_t label : classifier->predict(lines)) std::cout << label << "\n";
      return 0;
    }
    nlohmann::ordered_json out;
    out["checkpoint"] = checkpoint;
    out["step"] = ckpt.progress.step;
    sru::tasks::Metrics metrics;
    if (on_file && classifier) {
      metrics = classifier->evaluate_file(text_file, max_batches);
      out["text"] = text_file;
    } else if (on_file) {
      SRU_CHECK(lm, "--text works with charlm and classify checkpoints");
      const std::string bytes = sru::tasks::read_bytes(text_file);
      const auto r = sru::tasks::stream_loss(lm->lm(), bytes, 1, chunk > 0 ? chunk : ckpt.config.data.bptt, max_batches);
      metrics = {{"bpc", r.bits_per_char()}, {"loss", r.predictions ? r.nats / r.predictions : 0.0},
                 {"chars", static_cast<double>(r.predictions)}};
      out["text"] = text_file;
    } else {
      metrics = task->evaluate(split, max_batches);
      out["split"] = split;
    }
    nlohmann::ordered_json m;
    for (const auto& [k, v] : metrics) m[k] = v;
    out["metrics"] = m;
    std::cout << (on_file ? text_file : split) << ":";
    for (const auto& [k, v] : metrics) std::cout << "  " << k << " " << v;
    std::cout << "\n";
    if (generate > 0) {
      SRU_CHECK(lm, "--generate works with charlm checkpoints");
      const std::string sample = sru::tasks::generate(lm->lm(), prompt, generate, temperature, gen);
      std::cout << "sample (temperature " << temperature << "):\n" << prompt << sample << "\n";
      out["sample"] = prompt + sample;
    }
    if (!json_path.empty()) sru::train::write_file_atomic(json_path, out.dump(2) + "\n");
    return 0;
  });
}
