// srubench: speed tables. `srubench ceilings` measures this machine's own limits — sgemm GFLOP/s at
// the SRU's GEMM shapes and elementwise / copy GB/s — so later benchmarks can be read against them.
// `srubench sru-vs-lstm` times one layer; `srubench train-epoch` times whole training epochs of
// experiment configs (forward, backward, clipping, update: what srutrain does per step) and `srubench
// batch-shapes` counts their batch shapes and the steps CUDA graphs would replay; `srubench eval` times inference: evaluating checkpoints, and their encoder alone (e.g. a Super-Embed-SRU against the
// SRU it was converted from); `srubench reader-rnn` times the SQuAD reader's encoders; `srubench
// srupp-layer` times one SRU++ layer against an SRU layer and a Transformer block of equal parameters;
// `srubench generate` times a language model's text generation; `srubench under-load` times training
// steps and evaluation beside busy processes, with and without the load-aware thread count; `srubench ops`
// times the op table's entries. The benchmarks live in src/bench/; this file only parses the arguments
// (one function per subcommand) and calls them.
#include <algorithm>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "apps/common.h"
#include "nn/attention.h"
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
#include "ops/cpu/blas.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/row_exp.h"
#include "ops/matmul.h"
#include "ops/sru_recurrence.h"

namespace {

// --repeats and --warmup of a subcommand that times with TimingOptions.
void add_timing_options(CLI::App* cmd, sru::bench::TimingOptions& timing,
                        const std::string& repeats_help = "Timed repeats (the median is reported)") {
  cmd->add_option("--repeats", timing.repeats, repeats_help)->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", timing.warmup, "Untimed warm-up runs")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

// The options every subcommand shares (--json, --device and --precision where it takes them).
struct SharedOptions {
  int threads = 0;
  double warm_up_seconds = 2.0;
  std::string json_path, device = "cpu", precision = "fp32", attention = "auto", cpu_kernels = "auto",
              sru_column_pairs = "on";
  void add_json(CLI::App* cmd) { cmd->add_option("--json", json_path, "Also write the rows as JSON to this file"); }
  void add_precision(CLI::App* cmd) {
    cmd->add_option("--precision", precision, "Float32 matrix products: fp32, tf32 (TF32 tensor cores on a GPU; FP32 "
                    "on the CPU) or bf16 (operands rounded to BF16, FP32 sums), as train.precision")
        ->capture_default_str()->check(CLI::IsMember(sru::precision_names()));
  }
  // The device options of the subcommands that measure a GPU, with the precision of its float32 products.
  void add_device(CLI::App* cmd) {
    cmd->add_option("--device", device, "Device to measure: cpu, cuda or cuda:N")->capture_default_str();
    add_precision(cmd);
  }
};

// A subcommand: its parser, whether it measures CUDA devices, and the benchmark it runs.
struct BenchCommand {
  CLI::App* cmd = nullptr;
  bool measures_cuda = false;
  std::function<void(sru::bench::Report&, sru::Device)> run;
  bool timed = true;  // false: counts only (no warm-up of the CPU first)
};

// Each subcommand's options (declarative tables), bound to the options struct its benchmark reads.
struct Options {
  sru::bench::CeilingOptions ceilings;
  sru::bench::LayerBenchOptions layer;
  sru::bench::EpochBenchOptions epoch;
  sru::bench::BatchShapesOptions batch_shapes;
  sru::bench::EvalBenchOptions eval;
  sru::bench::ReaderBenchOptions reader;
  sru::bench::SruppLayerBenchOptions srupp_layer;
  sru::bench::GenerateBenchOptions generate;
  sru::bench::LoadBenchOptions under_load;
  sru::bench::OpBenchOptions ops;
};

BenchCommand add_ceilings(CLI::App& cli, Options& o, SharedOptions& shared) {
  auto* cmd = cli.add_subcommand("ceilings", "sgemm GFLOP/s and elementwise/copy GB/s at SRU-sized shapes");
  cmd->add_option("--hidden", o.ceilings.hidden, "Hidden sizes d")->capture_default_str();
  cmd->add_option("--length", o.ceilings.length, "Sequence length L")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--batch", o.ceilings.batch, "Batch size B")->capture_default_str()->check(CLI::PositiveNumber);
  add_timing_options(cmd, o.ceilings.timing);
  cmd->add_option("--device", shared.device, "Device to measure (cpu)")->capture_default_str();
  shared.add_precision(cmd);
  shared.add_json(cmd);
  return {cmd, false, [&o](sru::bench::Report& r, sru::Device) { sru::bench::bench_ceilings(r, o.ceilings); }};
}

BenchCommand add_sru_vs_lstm(CLI::App& cli, Options& o, SharedOptions& shared) {
  auto* cmd = cli.add_subcommand("sru-vs-lstm", "Forward+backward of one layer: GEMMs alone, the fused recurrence "
                                                "alone, SRU fused, SRU composed, the LSTM's GEMMs alone, LSTM fused, "
                                                "LSTM composed");
  sru::bench::LayerBenchOptions& layer = o.layer;
  cmd->add_option("--lengths", layer.lengths, "Sequence lengths L")->capture_default_str();
  cmd->add_option("--hidden", layer.hidden, "Hidden sizes d (= input size)")->capture_default_str();
  cmd->add_option("--batch", layer.batch, "Batch size B")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--impls", layer.impls, "Implementations to run")->capture_default_str()
      ->check(CLI::IsMember(sru::bench::layer_bench_impl_names()));
  add_timing_options(cmd, layer.timing);
  cmd->add_flag("--cpu-time", layer.timing.cpu_time, "CPU only: report the process's CPU time per run, not "
                "the wall clock (for a loaded shared machine; with --threads 1 it is the work of one thread)");
  shared.add_device(cmd);
  shared.add_json(cmd);
  return {cmd, true, [&o](sru::bench::Report& r, sru::Device device) {
            o.layer.device = device;
            sru::bench::bench_sru_vs_lstm(r, o.layer);
          }};
}

BenchCommand add_train_epoch(CLI::App& cli, Options& o, SharedOptions& shared) {
  auto* cmd = cli.add_subcommand("train-epoch", "Training epochs (forward, backward, update) of experiment "
                                                "configs, e.g. an SRU config and its LSTM twin");
  sru::bench::EpochBenchOptions& epoch = o.epoch;
  cmd->add_option("--config", epoch.configs, "Experiment configs (repeat the option)")->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", epoch.overrides, "Override a key in every config, e.g. --set model.freeze_embedding=true");
  cmd->add_option("--steps", epoch.steps, "Time this many steps per repeat, scaled to an epoch (0 = whole epochs)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--warmup-steps", epoch.warmup_steps, "Untimed training steps first")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--repeats", epoch.repeats, "Timed repeats (the median is reported)")->capture_default_str()
      ->check(CLI::PositiveNumber);
  shared.add_json(cmd);
  cmd->add_flag("--host-profile", epoch.host_profile,
                "Then as many steps again with every dispatch's host time recorded: a table of the host's "
                "time per op (where a host-bound GPU step goes)");
  cmd->add_flag("--idle-share", epoch.idle_share,
                "On a GPU, then as many steps again with CUPTI's activity records on (libcupti loaded at run "
                "time): the columns idle_share (the share of those steps' wall time in which no kernel, copy or "
                "memset ran), busy_ms_per_step and cupti_records_per_step");
  return {cmd, false, [&o](sru::bench::Report& r, sru::Device) { sru::bench::bench_train_epoch(r, o.epoch); }};
}

BenchCommand add_batch_shapes(CLI::App& cli, Options& o, SharedOptions& shared) {
  auto* cmd = cli.add_subcommand("batch-shapes", "Training batch shapes of experiment configs and what CUDA graphs "
                                                 "make of them (no training, no timing): batch shapes and graph keys "
                                                 "an epoch, the share of steps train.cuda_graphs_max lets replay, "
                                                 "and for translation the padding per piece (to choose "
                                                 "data.pad_to_multiple and data.length_buckets before a GPU run)");
  sru::bench::BatchShapesOptions& shapes = o.batch_shapes;
  cmd->add_option("--config", shapes.configs, "Experiment configs (repeat the option)")->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", shapes.overrides, "Override a key in every config, e.g. --set data.length_buckets=[16,32]");
  cmd->add_option("--epochs", shapes.epochs, "Epochs (each its own order and row)")->capture_default_str()
      ->check(CLI::PositiveNumber);
  shared.add_json(cmd);
  return {cmd, false, [&o](sru::bench::Report& r, sru::Device) { sru::bench::bench_batch_shapes(r, o.batch_shapes); },
          false};
}

BenchCommand add_eval(CLI::App& cli, Options& o, SharedOptions& shared) {
  auto* cmd = cli.add_subcommand("eval", "Inference: evaluation of checkpoints on a split, and their encoder "
                                         "alone on one batch (e.g. Super-Embed-SRU against the SRU it came from)");
  sru::bench::EvalBenchOptions& eval = o.eval;
  cmd->add_option("--checkpoint", eval.checkpoints, "Checkpoints (repeat the option)")->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", eval.overrides, "Override a key of every stored config, e.g. --set data.path=...");
  cmd->add_option("--split", eval.split, "Split to evaluate (default: the task's validation split)");
  cmd->add_option("--max-batches", eval.max_batches, "Evaluate at most this many batches (0 = all)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--length", eval.length, "The encoder row's sequence length")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--batch", eval.batch, "The encoder row's batch size")->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_timing_options(cmd, eval.timing, "Timed repeats (the median is reported; the encoder row takes 10x as many)");
  shared.add_json(cmd);
  return {cmd, false, [&o](sru::bench::Report& r, sru::Device) { sru::bench::bench_eval(r, o.eval); }};
}

BenchCommand add_reader_rnn(CLI::App& cli, Options& o, SharedOptions& shared) {
  auto* cmd = cli.add_subcommand("reader-rnn", "The SQuAD Document Reader's encoders (paragraph + question, "
                                               "bidirectional), SRU vs LSTM: forward + backward per batch and "
                                               "per epoch (the paper's time in RNN)");
  sru::bench::ReaderBenchOptions& reader = o.reader;
  cmd->add_option("--hidden", reader.hidden, "Hidden size per direction")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--embedding", reader.embedding, "Word embedding size E")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--batch", reader.batch, "Questions per batch")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--doc-length", reader.doc_length, "Paragraph tokens")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--question-length", reader.question_length, "Question tokens")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--sru-layers", reader.sru_layers, "SRU layers")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--lstm-layers", reader.lstm_layers, "LSTM layers")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--questions", reader.questions, "Questions per epoch (train-v1.1: 87599)")->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_timing_options(cmd, reader.timing);
  shared.add_device(cmd);
  shared.add_json(cmd);
  return {cmd, true, [&o](sru::bench::Report& r, sru::Device device) {
            o.reader.device = device;
            sru::bench::bench_reader_rnn(r, o.reader);
          }};
}

BenchCommand add_srupp_layer(CLI::App& cli, Options& o, SharedOptions& shared) {
  auto* cmd = cli.add_subcommand("srupp-layer", "Forward+backward and peak memory of one SRU++ layer, one SRU "
                                                "layer and one Transformer block of equal parameters");
  sru::bench::SruppLayerBenchOptions& s = o.srupp_layer;
  cmd->add_option("--lengths", s.lengths, "Sequence lengths L (the attention context)")->capture_default_str();
  cmd->add_option("--hidden", s.hidden, "SRU++ widths d")->capture_default_str();
  cmd->add_option("--proj-ratio", s.proj_ratio, "d / d'")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--heads", s.heads, "Attention heads")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--batch", s.batch, "Batch size B")->capture_default_str()->check(CLI::PositiveNumber);
  add_timing_options(cmd, s.timing);
  shared.add_device(cmd);
  shared.add_json(cmd);
  return {cmd, true, [&o](sru::bench::Report& r, sru::Device device) {
            o.srupp_layer.device = device;
            sru::bench::bench_srupp_layer(r, o.srupp_layer);
          }};
}

BenchCommand add_generate(CLI::App& cli, Options& o, SharedOptions& shared) {
  auto* cmd = cli.add_subcommand("generate", "Text generation of a language model through its task's "
                                             "generation capability: ms per call and per token, tokens/s");
  sru::bench::GenerateBenchOptions& g = o.generate;
  cmd->add_option("--config", g.config, "Experiment config of a task that generates text")->check(CLI::ExistingFile);
  cmd->add_option("--set", g.overrides, "Override a config key, e.g. --set model.hidden_size=512");
  cmd->add_option("--checkpoint", g.checkpoint, "Weights from this checkpoint (default: the config's "
                  "random initialisation; without --config, its stored config builds the model)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tokens", g.tokens, "Tokens generated per call")->capture_default_str();
  cmd->add_option("--batch", g.batch, "Continuations decoded together (B)")->capture_default_str();
  cmd->add_option("--strategy", g.strategy, "How to pick each token")->capture_default_str()
      ->check(CLI::IsMember(sru::bench::generate_strategy_names()));
  cmd->add_option("--beam", g.beam, "Beam size of --strategy beam")->capture_default_str()->check(CLI::PositiveNumber);
  add_timing_options(cmd, g.timing, "Timed generate calls per case (the median is reported)");
  shared.add_device(cmd);
  shared.add_json(cmd);
  return {cmd, true, [&o](sru::bench::Report& r, sru::Device device) {
            o.generate.device = device;
            sru::bench::bench_generate(r, o.generate);
          }};
}

BenchCommand add_under_load(CLI::App& cli, Options& o, SharedOptions& shared) {
  auto* cmd = cli.add_subcommand("under-load", "Training steps and evaluation alone and beside busy-loop "
                                 "processes, at 1 and 2 threads, with the load-aware thread count and fixed");
  sru::bench::LoadBenchOptions& u = o.under_load;
  cmd->add_option("--config", u.configs, "Time training steps of these experiment configs (repeat)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--checkpoint", u.checkpoints, "Time the evaluation of these checkpoints (repeat)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", u.overrides, "Override a key of every config and checkpoint");
  cmd->add_option("--threads-list", u.threads, "Thread counts, the first 1 (the reference)")
      ->capture_default_str()->delimiter(',');
  cmd->add_option("--busy", u.busy_cores, "Busy-loop processes beside the loaded runs")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--steps", u.steps, "Timed training steps per repeat")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-batches", u.max_batches, "Evaluation batches (0 = the whole split)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--repeats", u.repeats, "Timed repeats (the median is reported)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_flag("!--no-fixed", u.compare_fixed, "Skip the rows with the thread count fixed");
  shared.add_json(cmd);
  return {cmd, false, [&o](sru::bench::Report& r, sru::Device) { sru::bench::bench_under_load(r, o.under_load); }};
}

BenchCommand add_ops(CLI::App& cli, Options& o, SharedOptions& shared) {
  auto* cmd = cli.add_subcommand("ops", "Forward and forward + backward time of every op table entry "
                                 "(ops/op_table.h) at its bench shape");
  cmd->add_option("--only", o.ops.only, "Entries whose name contains this");
  cmd->add_flag("--small", o.ops.small, "The entries' small cases (the checks' shapes) instead");
  cmd->add_option("--dtype", o.ops.dtype, "Storage dtype of the inputs: f32, or bf16 (the entries with bf16 kernels)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  add_timing_options(cmd, o.ops.timing);
  shared.add_device(cmd);
  shared.add_json(cmd);
  return {cmd, true, [&o](sru::bench::Report& r, sru::Device device) {
            o.ops.device = device;
            sru::bench::bench_ops(r, o.ops);
          }};
}

// The parsed subcommand's benchmark on its device, then the table (and JSON) on rank 0; `cpu_time`: the
// rows are CPU time (sru-vs-lstm --cpu-time), said in the heading.
int run(const BenchCommand& command, const SharedOptions& shared, const std::vector<BenchCommand>& commands,
        bool cpu_time) {
  sru::set_num_threads(shared.threads);
  const std::string name = command.cmd->get_name();
  const sru::Device device = sru::Device::parse(shared.device);
  std::vector<std::string> cuda_names;
  for (const BenchCommand& c : commands)
    if (c.measures_cuda) cuda_names.push_back(c.cmd->get_name());
  std::string cuda_commands;  // "a, b, c and d"
  for (size_t i = 0; i < cuda_names.size(); ++i)
    cuda_commands += (i == 0 ? "" : i + 1 == cuda_names.size() ? " and " : ", ") + cuda_names[i];
  SRU_CHECK(device.is_cpu() || command.measures_cuda, "srubench ", name, ": --device ", shared.device,
            " is not supported: only ", cuda_commands, " measure CUDA devices");
  SRU_CHECK(!(cpu_time && device.is_cuda()), "srubench sru-vs-lstm: --cpu-time measures the CPU only; a CUDA device "
            "is timed with CUDA events");
  if (device.is_cuda()) {
    const std::string why = sru::cuda::unavailable_reason(device.index);
    SRU_CHECK(why.empty(), "srubench ", name, ": --device ", shared.device, " is not available: ", why);
  }
  sru::set_matmul_precision(sru::parse_precision(shared.precision, "--precision"));
  sru::nn::set_attention_kernel(sru::nn::parse_attention_kernel(shared.attention, "--attention"));
  sru::set_sru_column_pairs(shared.sru_column_pairs == "on");
  if (shared.cpu_kernels != "auto") {  // the AVX-512 builds off: the SRU recurrence's and the bf16 GEMM's
    sru::cpu::limit_sru_kernel_isa(shared.cpu_kernels == "avx2" ? sru::cpu::SruKernelIsa::Avx2
                                                                : sru::cpu::SruKernelIsa::Baseline);
    sru::cpu::force_bf16_dot_kernels_off(true);
  }
  sru::bench::Report report(name);
  if (command.timed) sru::bench::warm_up_cpu(shared.warm_up_seconds);
  command.run(report, device);
  if (!sru::dist::world().is_root()) return 0;  // rank 0 reports for a data-parallel run
  std::cout << "threads: " << sru::num_threads() << (cpu_time ? ", clock: process CPU time" : "")
            << ", SRU kernels: " << sru::cpu::sru_kernel_isa() << ", row kernels: " << sru::cpu::rows::isa()
            << (sru::cpu::bf16_dot_kernels_available() ? ", bf16 GEMM: AVX512-BF16" : "")
            << (sru::sru_column_pairs() ? "" : ", SRU column pairs: off") << ", BLAS: "
            << sru::cpu::blas_kernels().core
            << (sru::cpu::blas_kernels().replaced.empty() ? "" : " (OpenBLAS chose " + sru::cpu::blas_kernels().replaced + ")")
            << (sru::matmul_precision() != sru::MatmulPrecision::Highest
                    ? ", precision: " + sru::precision_name(sru::matmul_precision())
                    : std::string())
            << "\n" << report.table();
  if (!shared.json_path.empty()) report.write_json(shared.json_path);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"srubench: speed tables (median of repeats)"};
  cli.set_version_flag("--version", sru::apps::version_line("srubench"));
  sru::apps::add_debug_flag(cli);
  cli.require_subcommand(1);
  SharedOptions shared;
  cli.add_option("--threads", shared.threads, "CPU threads for kernels and BLAS (0 = all cores)")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--warm-up-seconds", shared.warm_up_seconds, "Busy GEMM time before the first measurement")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cli.add_option("--attention", shared.attention, "Multi-head attention: auto (fused on a GPU, composed on the CPU), "
                 "composed or fused (nn/attention.h AttentionKernel)")
      ->capture_default_str()->check(CLI::IsMember(sru::nn::attention_kernel_names()));
  cli.add_option("--cpu-kernels", shared.cpu_kernels, "Widest CPU kernel builds: auto (what the processor has), "
                 "avx2 (no AVX-512: the SRU recurrence's AVX2 build, the row primitives' eight lanes, bf16 products "
                 "as rounded operands through sgemm) or baseline (the SRU recurrence's x86-64 build and scalar "
                 "row primitives too)")
      ->capture_default_str()->check(CLI::IsMember({"auto", "avx2", "baseline"}));
  cli.add_option("--sru-column-pairs", shared.sru_column_pairs, "CUDA SRU recurrence with bf16 I/O: on (two neighbouring "
                 "columns a thread where d is even) or off (one column a thread, the kernels before 2026-11-30)")
      ->capture_default_str()->check(CLI::IsMember({"on", "off"}));
  Options options;
  const std::vector<BenchCommand> commands = {
      add_ceilings(cli, options, shared),   add_sru_vs_lstm(cli, options, shared), add_train_epoch(cli, options, shared),
      add_batch_shapes(cli, options, shared), add_eval(cli, options, shared),       add_reader_rnn(cli, options, shared),  add_srupp_layer(cli, options, shared),
      add_generate(cli, options, shared),   add_under_load(cli, options, shared),  add_ops(cli, options, shared)};
  CLI11_PARSE(cli, argc, argv);
  return sru::apps::run_main("srubench", [&] {
    const auto parsed = std::find_if(commands.begin(), commands.end(), [](const BenchCommand& c) { return c.cmd->parsed(); });
    return run(*parsed, shared, commands, options.layer.timing.cpu_time);
  });
}
