// srubench: speed tables. `srubench ceilings` measures this machine's own limits — sgemm GFLOP/s at
// the SRU's GEMM shapes and elementwise / copy GB/s — so later benchmarks can be read against them.
// `srubench sru-vs-lstm` times one layer; `srubench train-epoch` times whole training epochs of
// experiment configs (forward, backward, clipping, update: what srutrain does per step); `srubench eval`
// times inference: evaluating checkpoints, and their encoder alone (e.g. a Super-Embed-SRU against the
// SRU it was converted from); `srubench reader-rnn` times the SQuAD reader's encoders; `srubench
// srupp-layer` times one SRU++ layer against an SRU layer and a Transformer block of equal parameters;
// `srubench generate` times a language model's text generation; `srubench under-load` times training
// steps and evaluation beside busy processes, with and without the load-aware thread count. The benchmarks live in src/bench/; this
// file only parses the arguments and calls them.
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "apps/common.h"
#include "bench/bench.h"
#include "bench/ceilings_bench.h"
#include "bench/generate_bench.h"
#include "bench/layer_bench.h"
#include "bench/load_bench.h"
#include "bench/op_bench.h"
#include "bench/reader_bench.h"
#include "bench/srupp_bench.h"
#include "bench/task_bench.h"
#include "core/cuda/device_info.h"
#include "core/parallel.h"
#include "dist/communicator.h"
#include "ops/matmul.h"

namespace {

// --repeats and --warmup of a subcommand that times with TimingOptions.
void add_timing_options(CLI::App* cmd, sru::bench::TimingOptions& timing,
                        const std::string& repeats_help = "Timed repeats (the median is reported)") {
  cmd->add_option("--repeats", timing.repeats, repeats_help)->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", timing.warmup, "Untimed warm-up runs")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"srubench: speed tables (median of repeats)"};
  cli.set_version_flag("--version", sru::apps::version_line("srubench"));
  sru::apps::add_debug_flag(cli);
  cli.require_subcommand(1);
  int threads = 0;
  double warm_up_seconds = 2.0;
  cli.add_option("--threads", threads, "CPU threads for kernels and BLAS (0 = all cores)")->check(CLI::NonNegativeNumber);
  cli.add_option("--warm-up-seconds", warm_up_seconds, "Busy GEMM time before the first measurement")
      ->capture_default_str()->check(CLI::NonNegativeNumber);

  sru::bench::CeilingOptions ceilings;
  std::string json_path;
  std::string device = "cpu";
  std::string precision = "fp32";
  const auto add_precision_option = [&](CLI::App* cmd) {
    cmd->add_option("--precision", precision, "Float32 matrix products: fp32, tf32 (TF32 tensor cores on a GPU; FP32 "
                    "on the CPU) or bf16 (operands rounded to BF16, FP32 sums), as train.precision")
        ->capture_default_str()->check(CLI::IsMember(sru::precision_names()));
  };
  // The device options of the subcommands that measure a GPU, with the precision of its float32 products.
  const auto add_device_options = [&](CLI::App* cmd) {
    cmd->add_option("--device", device, "Device to measure: cpu, cuda or cuda:N")->capture_default_str();
    add_precision_option(cmd);
  };
  auto* ceil_cmd = cli.add_subcommand("ceilings", "sgemm GFLOP/s and elementwise/copy GB/s at SRU-sized shapes");
  ceil_cmd->add_option("--hidden", ceilings.hidden, "Hidden sizes d")->capture_default_str();
  ceil_cmd->add_option("--length", ceilings.length, "Sequence length L")->capture_default_str()->check(CLI::PositiveNumber);
  ceil_cmd->add_option("--batch", ceilings.batch, "Batch size B")->capture_default_str()->check(CLI::PositiveNumber);
  add_timing_options(ceil_cmd, ceilings.timing);
  ceil_cmd->add_option("--device", device, "Device to measure (cpu)")->capture_default_str();
  add_precision_option(ceil_cmd);
  ceil_cmd->add_option("--json", json_path, "Also write the rows as JSON to this file");

  sru::bench::LayerBenchOptions layer;
  auto* layer_cmd = cli.add_subcommand("sru-vs-lstm", "Forward+backward of one layer: GEMMs alone, the fused "
                                                       "recurrence alone, SRU fused, SRU composed, the LSTM's "
                                                       "GEMMs alone, LSTM fused, LSTM composed");
  layer_cmd->add_option("--lengths", layer.lengths, "Sequence lengths L")->capture_default_str();
  layer_cmd->add_option("--hidden", layer.hidden, "Hidden sizes d (= input size)")->capture_default_str();
  layer_cmd->add_option("--batch", layer.batch, "Batch size B")->capture_default_str()->check(CLI::PositiveNumber);
  layer_cmd->add_option("--impls", layer.impls, "Implementations to run")->capture_default_str()
      ->check(CLI::IsMember(sru::bench::layer_bench_impl_names()));
  add_timing_options(layer_cmd, layer.timing);
  layer_cmd->add_flag("--cpu-time", layer.timing.cpu_time, "CPU only: report the process's CPU time per run, not "
                      "the wall clock (for a loaded shared machine; with --threads 1 it is the work of one thread)");
  add_device_options(layer_cmd);
  layer_cmd->add_option("--json", json_path, "Also write the rows as JSON to this file");

  sru::bench::EpochBenchOptions epoch;
  auto* epoch_cmd = cli.add_subcommand("train-epoch", "Training epochs (forward, backward, update) of experiment "
                                                      "configs, e.g. an SRU config and its LSTM twin");
  epoch_cmd->add_option("--config", epoch.configs, "Experiment configs (repeat the option)")->required()
      ->check(CLI::ExistingFile);
  epoch_cmd->add_option("--set", epoch.overrides, "Override a key in every config, e.g. --set model.freeze_embedding=true");
  epoch_cmd->add_option("--steps", epoch.steps, "Time this many steps per repeat, scaled to an epoch (0 = whole epochs)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  epoch_cmd->add_option("--warmup-steps", epoch.warmup_steps, "Untimed training steps first")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  epoch_cmd->add_option("--repeats", epoch.repeats, "Timed repeats (the median is reported)")->capture_default_str()
      ->check(CLI::PositiveNumber);
  epoch_cmd->add_option("--json", json_path, "Also write the rows as JSON to this file");
  epoch_cmd->add_flag("--host-profile", epoch.host_profile,
                      "Then as many steps again with every dispatch's host time recorded: a table of the host's "
                      "time per op (where a host-bound GPU step goes)");

  sru::bench::EvalBenchOptions eval;
  auto* eval_cmd = cli.add_subcommand("eval", "Inference: evaluation of checkpoints on a split, and their encoder "
                                               "alone on one batch (e.g. Super-Embed-SRU against the SRU it came from)");
  eval_cmd->add_option("--checkpoint", eval.checkpoints, "Checkpoints (repeat the option)")->required()
      ->check(CLI::ExistingFile);
  eval_cmd->add_option("--set", eval.overrides, "Override a key of every stored config, e.g. --set data.path=...");
  eval_cmd->add_option("--split", eval.split, "Split to evaluate (default: the task's validation split)");
  eval_cmd->add_option("--max-batches", eval.max_batches, "Evaluate at most this many batches (0 = all)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  eval_cmd->add_option("--length", eval.length, "The encoder row's sequence length")->capture_default_str()
      ->check(CLI::PositiveNumber);
  eval_cmd->add_option("--batch", eval.batch, "The encoder row's batch size")->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_timing_options(eval_cmd, eval.timing, "Timed repeats (the median is reported; the encoder row takes 10x as many)");
  eval_cmd->add_option("--json", json_path, "Also write the rows as JSON to this file");
  sru::bench::ReaderBenchOptions reader;
  auto* reader_cmd = cli.add_subcommand("reader-rnn", "The SQuAD Document Reader's encoders (paragraph + question, "
                                                      "bidirectional), SRU vs LSTM: forward + backward per batch and "
                                                      "per epoch (the paper's time in RNN)");
  reader_cmd->add_option("--hidden", reader.hidden, "Hidden size per direction")->capture_default_str()
      ->check(CLI::PositiveNumber);
  reader_cmd->add_option("--embedding", reader.embedding, "Word embedding size E")->capture_default_str()
      ->check(CLI::PositiveNumber);
  reader_cmd->add_option("--batch", reader.batch, "Questions per batch")->capture_default_str()->check(CLI::PositiveNumber);
  reader_cmd->add_option("--doc-length", reader.doc_length, "Paragraph tokens")->capture_default_str()
      ->check(CLI::PositiveNumber);
  reader_cmd->add_option("--question-length", reader.question_length, "Question tokens")->capture_default_str()
      ->check(CLI::PositiveNumber);
  reader_cmd->add_option("--sru-layers", reader.sru_layers, "SRU layers")->capture_default_str()->check(CLI::PositiveNumber);
  reader_cmd->add_option("--lstm-layers", reader.lstm_layers, "LSTM layers")->capture_default_str()
      ->check(CLI::PositiveNumber);
  reader_cmd->add_option("--questions", reader.questions, "Questions per epoch (train-v1.1: 87599)")->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_timing_options(reader_cmd, reader.timing);
  add_device_options(reader_cmd);
  reader_cmd->add_option("--json", json_path, "Also write the rows as JSON to this file");

  sru::bench::SruppLayerBenchOptions srupp_layer;
  auto* srupp_cmd = cli.add_subcommand("srupp-layer", "Forward+backward and peak memory of one SRU++ layer, one SRU "
                                                      "layer and one Transformer block of equal parameters");
  srupp_cmd->add_option("--lengths", srupp_layer.lengths, "Sequence lengths L (the attention context)")->capture_default_str();
  srupp_cmd->add_option("--hidden", srupp_layer.hidden, "SRU++ widths d")->capture_default_str();
  srupp_cmd->add_option("--proj-ratio", srupp_layer.proj_ratio, "d / d'")->capture_default_str()->check(CLI::PositiveNumber);
  srupp_cmd->add_option("--heads", srupp_layer.heads, "Attention heads")->capture_default_str()->check(CLI::PositiveNumber);
  srupp_cmd->add_option("--batch", srupp_layer.batch, "Batch size B")->capture_default_str()->check(CLI::PositiveNumber);
  srupp_cmd->add_option("--repeats", srupp_layer.timing.repeats, "Timed repeats (the median is reported)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  srupp_cmd->add_option("--warmup", srupp_layer.timing.warmup, "Untimed warm-up runs")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  add_device_options(srupp_cmd);
  srupp_cmd->add_option("--json", json_path, "Also write the rows as JSON to this file");

  sru::bench::GenerateBenchOptions generate;
  auto* generate_cmd = cli.add_subcommand("generate", "Text generation of a language model through its task's "
                                                      "generation capability: ms per call and per token, tokens/s");
  generate_cmd->add_option("--config", generate.config, "Experiment config of a task that generates text")
      ->check(CLI::ExistingFile);
  generate_cmd->add_option("--set", generate.overrides, "Override a config key, e.g. --set model.hidden_size=512");
  generate_cmd->add_option("--checkpoint", generate.checkpoint, "Weights from this checkpoint (default: the config's "
                           "random initialisation; without --config, its stored config builds the model)")
      ->check(CLI::ExistingFile);
  generate_cmd->add_option("--tokens", generate.tokens, "Tokens generated per call")->capture_default_str();
  generate_cmd->add_option("--batch", generate.batch, "Continuations decoded together (B)")->capture_default_str();
  generate_cmd->add_option("--strategy", generate.strategy, "How to pick each token")->capture_default_str()
      ->check(CLI::IsMember(sru::bench::generate_strategy_names()));
  generate_cmd->add_option("--beam", generate.beam, "Beam size of --strategy beam")->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_timing_options(generate_cmd, generate.timing, "Timed generate calls per case (the median is reported)");
  add_device_options(generate_cmd);
  generate_cmd->add_option("--json", json_path, "Also write the rows as JSON to this file");

  sru::bench::LoadBenchOptions under_load;
  auto* load_cmd = cli.add_subcommand("under-load", "Training steps and evaluation alone and beside busy-loop "
                                      "processes, at 1 and 2 threads, with the load-aware thread count and fixed");
  load_cmd->add_option("--config", under_load.configs, "Time training steps of these experiment configs (repeat)")
      ->check(CLI::ExistingFile);
  load_cmd->add_option("--checkpoint", under_load.checkpoints, "Time the evaluation of these checkpoints (repeat)")
      ->check(CLI::ExistingFile);
  load_cmd->add_option("--set", under_load.overrides, "Override a key of every config and checkpoint");
  load_cmd->add_option("--threads-list", under_load.threads, "Thread counts, the first 1 (the reference)")
      ->capture_default_str()->delimiter(',');
  load_cmd->add_option("--busy", under_load.busy_cores, "Busy-loop processes beside the loaded runs")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  load_cmd->add_option("--steps", under_load.steps, "Timed training steps per repeat")->capture_default_str()
      ->check(CLI::PositiveNumber);
  load_cmd->add_option("--max-batches", under_load.max_batches, "Evaluation batches (0 = the whole split)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  load_cmd->add_option("--repeats", under_load.repeats, "Timed repeats (the median is reported)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  load_cmd->add_flag("!--no-fixed", under_load.compare_fixed, "Skip the rows with the thread count fixed");
  load_cmd->add_option("--json", json_path, "Also write the rows as JSON to this file");

  sru::bench::OpBenchOptions ops;
  auto* ops_cmd = cli.add_subcommand("ops", "Forward and forward + backward time of every op table entry "
                                     "(ops/op_table.h) at its bench shape");
  ops_cmd->add_option("--only", ops.only, "Entries whose name contains this");
  ops_cmd->add_flag("--small", ops.small, "The entries' small cases (the checks' shapes) instead");
  ops_cmd->add_option("--dtype", ops.dtype, "Storage dtype of the inputs: f32, or bf16 (the entries with bf16 kernels)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  add_timing_options(ops_cmd, ops.timing);
  add_device_options(ops_cmd);
  ops_cmd->add_option("--json", json_path, "Also write the rows as JSON to this file");

  CLI11_PARSE(cli, argc, argv);
  return sru::apps::run_main("srubench", [&] {
    sru::set_num_threads(threads);
    const std::string name = ceil_cmd->parsed()       ? "ceilings"
                             : epoch_cmd->parsed()    ? "train-epoch"
                             : eval_cmd->parsed()     ? "eval"
                             : reader_cmd->parsed()   ? "reader-rnn"
                             : srupp_cmd->parsed()    ? "srupp-layer"
                             : generate_cmd->parsed() ? "generate"
                             : load_cmd->parsed()     ? "under-load"
                             : ops_cmd->parsed()      ? "ops"
                                                      : "sru-vs-lstm";
    layer.device = reader.device = srupp_layer.device = generate.device = ops.device = sru::Device::parse(device);
    SRU_CHECK(layer.device.is_cpu() || layer_cmd->parsed() || reader_cmd->parsed() || srupp_cmd->parsed() ||
                  generate_cmd->parsed() || ops_cmd->parsed(),
              "srubench ", name, ": --device ", device, " is not supported: only sru-vs-lstm, reader-rnn, srupp-layer, "
              "generate and ops measure CUDA devices");
    SRU_CHECK(!(layer.timing.cpu_time && layer.device.is_cuda()), "srubench sru-vs-lstm: --cpu-time measures the CPU "
              "only; a CUDA device is timed with CUDA events");
    if (layer.device.is_cuda()) {
      const std::string why = sru::cuda::unavailable_reason(layer.device.index);
      SRU_CHECK(why.empty(), "srubench ", name, ": --device ", device, " is not available: ", why);
    }
    sru::set_matmul_precision(sru::parse_precision(precision, "--precision"));
    sru::bench::Report report(name);
    sru::bench::warm_up_cpu(warm_up_seconds);
    if (epoch_cmd->parsed()) {
      sru::bench::bench_train_epoch(report, epoch);
    } else if (eval_cmd->parsed()) {
      sru::bench::bench_eval(report, eval);
    } else if (reader_cmd->parsed()) {
      sru::bench::bench_reader_rnn(report, reader);
    } else if (srupp_cmd->parsed()) {
      sru::bench::bench_srupp_layer(report, srupp_layer);
    } else if (load_cmd->parsed()) {
      sru::bench::bench_under_load(report, under_load);
    } else if (generate_cmd->parsed()) {
      sru::bench::bench_generate(report, generate);
    } else if (ops_cmd->parsed()) {
      sru::bench::bench_ops(report, ops);
    } else if (ceil_cmd->parsed()) {
      sru::bench::bench_ceilings(report, ceilings);
    } else {
      sru::bench::bench_sru_vs_lstm(report, layer);
    }
    if (!sru::dist::world().is_root()) return 0;  // rank 0 reports for a data-parallel run
    std::cout << "threads: " << sru::num_threads() << (layer.timing.cpu_time ? ", clock: process CPU time" : "")
              << (sru::matmul_precision() != sru::MatmulPrecision::Highest
                      ? ", precision: " + sru::precision_name(sru::matmul_precision())
                      : std::string())
              << "\n" << report.table();
    if (!json_path.empty()) report.write_json(json_path);
    return 0;
  });
}
