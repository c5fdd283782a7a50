// srubench: speed tables. `srubench ceilings` measures this machine's own limits — sgemm GFLOP/s at
// the SRU's GEMM shapes and elementwise / copy GB/s — so later benchmarks can be read against them.
// `srubench sru-vs-lstm` times one layer; `srubench train-epoch` times whole training epochs of
// experiment configs (forward, backward, clipping, update: what srutrain does per step); `srubench eval`
// times inference: evaluating checkpoints, and their encoder alone (e.g. a Super-Embed-SRU against the
// SRU it was converted from); `srubench srupp-layer` times one SRU++ layer against an SRU layer and a
// Transformer block of equal parameters.
#include <algorithm>
#include <cstring>
#include <iostream>

#include <CLI/CLI.hpp>

#include "apps/common.h"
#include "autograd/engine.h"
#include "autograd/node.h"
#include "bench/bench.h"
#include "bench/srupp_bench.h"
#include "core/cuda/device_info.h"
#include "core/cuda/runtime.h"
#include "core/parallel.h"
#include "nn/lstm.h"
#include "nn/sru.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/sru_recurrence.h"
#include "optim/optimizer.h"
#include "config/config.h"
#include "dist/communicator.h"
#include "tasks/registry.h"
#include "train/checkpoint.h"
#include "train/step.h"
#include "train/trainer.h"

#include <filesystem>

namespace {

using sru::Tensor;
using sru::bench::Report;
using sru::bench::Row;

struct CeilingOptions {
  std::vector<int64_t> hidden = {256, 512, 1024};
  int64_t length = 128;
  int64_t batch = 32;
  sru::bench::TimingOptions timing;
};

// U = x W for all time steps at once: (L*B, d) @ (d, 3d), the SRU's one big GEMM per layer.
void bench_sgemm(Report& report, const CeilingOptions& o) {
  for (int64_t d : o.hidden) {
    const int64_t M = o.length * o.batch, K = d, N = 3 * d;
    Tensor x = Tensor::uniform({M, K}, -1, 1), w = Tensor::uniform({K, N}, -1, 1);
    const auto t = sru::bench::time_cpu([&] { sru::matmul(x, w); }, o.timing);
    Row row{"sgemm", "cpu", {}};
    row.set("L", o.length).set("B", o.batch).set("d", d).set("M", M).set("N", N).set("K", K);
    row.set("ms", t.median_ms).set("gflops", 2.0 * M * N * K / (t.median_ms * 1e6));
    report.add(row);
  }
}

// Elementwise add of two (L, B, d) f32 tensors (reads 2, writes 1), and a plain memcpy for reference.
void bench_bandwidth(Report& report, const CeilingOptions& o) {
  for (int64_t d : o.hidden) {
    const int64_t n = o.length * o.batch * d;
    Tensor a = Tensor::uniform({n}, -1, 1), b = Tensor::uniform({n}, -1, 1);
    Tensor out = Tensor::empty({n});
    const auto t_add = sru::bench::time_cpu([&] { sru::add(a, b); }, o.timing);
    const auto t_copy = sru::bench::time_cpu([&] { std::memcpy(out.data_ptr(), a.data_ptr(), a.nbytes()); }, o.timing);
    const double bytes = static_cast<double>(n) * sizeof(float);
    for (auto [impl, t, moved] : {std::tuple{"add", t_add, 3 * bytes}, std::tuple{"copy", t_copy, 2 * bytes}}) {
      Row row{impl, "cpu", {}};
      row.set("L", o.length).set("B", o.batch).set("d", d).set("ms", t.median_ms).set("gbps", moved / (t.median_ms * 1e6));
      report.add(row);
    }
  }
}

// Philox random numbers where training draws them: a dropout mask and a uniform initialiser of
// (L, B, d) elements, in millions of elements per second.
void bench_random(Report& report, const CeilingOptions& o) {
  for (int64_t d : o.hidden) {
    const int64_t n = o.length * o.batch * d;
    sru::Generator gen(3);
    const auto t_mask = sru::bench::time_cpu([&] { sru::dropout_mask({n}, 0.3, sru::DType::F32, gen); }, o.timing);
    const auto t_uniform = sru::bench::time_cpu([&] { Tensor::uniform({n}, -1, 1, sru::DType::F32, gen); }, o.timing);
    for (auto [impl, t] : {std::pair{"dropout_mask", t_mask}, std::pair{"uniform", t_uniform}}) {
      Row row{impl, "cpu", {}};
      row.set("L", o.length).set("B", o.batch).set("d", d).set("ms", t.median_ms).set("melem_per_s", n / (t.median_ms * 1e3));
      report.add(row);
    }
  }
}

struct LayerBenchOptions {
  std::vector<int64_t> lengths = {32, 128};
  std::vector<int64_t> hidden = {256, 512};
  int64_t batch = 32;
  std::vector<std::string> impls = {"gemm",         "recurrence", "copy", "sru_fused",
                                    "sru_composed", "lstm_gemm",  "lstm", "lstm_composed"};
  sru::bench::TimingOptions timing{2, 7};
  sru::Device device;
};

// Forward + backward of one layer (n_in = d) per implementation; every row also reports its time
// relative to the GEMMs alone and to the LSTM at the same size. `recurrence` and `copy` rows also
// report bandwidth: bytes read + written over time (the recurrence's minimum traffic, below).
void bench_sru_vs_lstm(Report& report, const LayerBenchOptions& o) {
  namespace nn = sru::nn;
  const sru::Device dev = o.device;
  auto wants = [&](const std::string& impl) {
    auto listed = [&](const std::string& name) { return std::find(o.impls.begin(), o.impls.end(), name) != o.impls.end(); };
    return listed(impl) || (impl == "lstm_cudnn" && listed("lstm")) || (impl == "lstm" && listed("lstm_cudnn"));
  };
  for (int64_t L : o.lengths)
    for (int64_t d : o.hidden) {
      const int64_t B = o.batch, M = L * B;
      sru::Generator gen(1);
      Tensor x = Tensor::uniform({L, B, d}, -1, 1, sru::DType::F32, gen).to(dev);
      struct Measured {
        std::string impl;
        double ms, bytes;  // bytes moved, 0 when not a bandwidth row
      };
      std::vector<Measured> times;
      auto record = [&](const std::string& impl, const std::function<void()>& fn, double bytes = 0) {
        if (!wants(impl)) return;
        times.push_back({impl, sru::bench::time_on(dev, fn, o.timing).median_ms, bytes});
      };
      // The SRU layer's three GEMMs: U = x W, dW = x^T dU, dx = dU W^T.
      Tensor w = Tensor::uniform({d, 3 * d}, -0.1, 0.1, sru::DType::F32, gen).to(dev);
      Tensor gU = Tensor::uniform({M, 3 * d}, -1, 1, sru::DType::F32, gen).to(dev);
      record("gemm", [&] {
        sru::autograd::NoGradGuard no_grad;
        sru::matmul(x, w);
        sru::matmul(x.view({M, d}), gU, true, false);
        sru::matmul(gU, w, false, true);
      });
      // The fused elementwise recurrence alone (forward + backward), on a precomputed U.
      sru::SruRecurrenceOptions ro;
      ro.hidden_size = d;
      Tensor U = Tensor::uniform({L, B, 3 * d}, -1, 1, sru::DType::F32, gen).to(dev).set_requires_grad(true);
      Tensor vc = Tensor::uniform({2 * d}, -1, 1, sru::DType::F32, gen).to(dev).set_requires_grad(true);
      Tensor bias = Tensor::zeros({2 * d}, sru::DType::F32, dev).set_requires_grad(true);
      Tensor grad_h = Tensor::ones({L, B, d}, sru::DType::F32, dev);
      // Minimum traffic per (t, b, unit), in floats: forward reads U (3) and x, writes h and c;
      // backward reads U (3), x, c and grad h, writes grad U (3) and grad x. 16 floats in all.
      const double recurrence_bytes = 16.0 * sizeof(float) * L * B * d;
      record("recurrence", [&] {
        auto [h, c] = sru::sru_recurrence(U, x, vc, bias, Tensor(), Tensor(), Tensor(), ro);
        sru::autograd::backward(h, grad_h);
      }, recurrence_bytes);
      // A plain copy moving as many bytes (half read, half written): the bandwidth ceiling.
      Tensor copy_src = Tensor::zeros({static_cast<int64_t>(recurrence_bytes / 8)}, sru::DType::F32, dev);
      Tensor copy_dst = Tensor::empty(copy_src.shape(), sru::DType::F32, dev);
      record("copy", [&] { copy_dst.copy_(copy_src); }, recurrence_bytes);
      nn::SRUOptions so;
      so.input_size = d;
      so.hidden_size = d;
      so.num_layers = 1;
      nn::SRU layer(so, gen);
      layer.to(dev);
      Tensor xin = x.clone().set_requires_grad(true);
      auto run_sru = [&](nn::SRUImplementation impl) {
        layer.set_implementation(impl);
        return [&, impl] {
          layer.zero_grad();
          sru::autograd::backward(layer.forward(xin).first, grad_h);
        };
      };
      record("sru_fused", run_sru(nn::SRUImplementation::Fused));
      record("sru_composed", run_sru(nn::SRUImplementation::Composed));
      // The LSTM layer's GEMMs alone: x W_ih^T, per step h W_hh^T and dG_t W_hh, then dx, dW_ih, dW_hh.
      Tensor w_ih = Tensor::uniform({4 * d, d}, -0.1, 0.1, sru::DType::F32, gen).to(dev), w_hh = w_ih.clone();
      Tensor gG = Tensor::uniform({M, 4 * d}, -1, 1, sru::DType::F32, gen).to(dev);
      record("lstm_gemm", [&] {
        sru::autograd::NoGradGuard no_grad;
        sru::matmul(x, w_ih, false, true);
        for (int64_t t = 0; t < L; ++t) {
          sru::matmul(x.narrow0(t, 1).view({B, d}), w_hh, false, true);
          sru::matmul(gG.narrow0(t * B, B), w_hh);
        }
        sru::matmul(gG, w_ih);
        sru::matmul(gG, x.view({M, d}), true, false);
        sru::matmul(gG, x.view({M, d}), true, false);
      });
      nn::LSTMOptions lo;
      lo.input_size = d;
      lo.hidden_size = d;
      nn::LSTM lstm(lo, gen);
      lstm.to(dev);
      auto run_lstm = [&](nn::LSTMImplementation impl) {
        return [&, impl] {
          lstm.set_implementation(impl);
          lstm.zero_grad();
          sru::autograd::backward(lstm.forward(xin).output, grad_h);
        };
      };
      // On a GPU nn::LSTM runs through cuDNN: its row is called lstm_cudnn there (and has no composed twin).
      const std::string lstm_name = dev.is_cuda() ? "lstm_cudnn" : "lstm";
      record(lstm_name, run_lstm(nn::LSTMImplementation::Fused));
      if (!dev.is_cuda()) record("lstm_composed", run_lstm(nn::LSTMImplementation::Composed));
      auto time_of = [&](const std::string& impl) {
        for (const Measured& m : times)
          if (m.impl == impl) return m.ms;
        return 0.0;
      };
      for (const Measured& m : times) {
        Row row{m.impl, dev.str(), {}};
        row.set("L", L).set("B", B).set("d", d).set("ms", m.ms);
        if (m.bytes > 0) row.set("gbps", m.bytes / (m.ms * 1e6));
        if (time_of("gemm") > 0 && m.bytes == 0) row.set("x_gemm", m.ms / time_of("gemm"));
        if (time_of(lstm_name) > 0 && m.bytes == 0) row.set("lstm_over_this", time_of(lstm_name) / m.ms);
        if (o.timing.cpu_time) row.set("cpu_clock", 1);
        report.add(row);
      }
    }
}

struct EpochBenchOptions {
  std::vector<std::string> configs;
  std::vector<std::string> overrides;
  int64_t steps = 0;  // 0 = whole epochs
  int64_t warmup_steps = 10;
  int repeats = 3;
};

// Training epochs of each config (fold 0 for cross-validation configs), timed one epoch (or
// --steps steps, scaled to an epoch) per repeat after untimed warm-up steps. Each step is srutrain's
// (train::TrainingStep): same clipping, non-finite policy and learning-rate schedule. Under mpirun the
// epochs are data-parallel, as srutrain's (rank 0 reports its clock; tokens/s counts every rank's).
void bench_train_epoch(Report& report, const EpochBenchOptions& o) {
  sru::dist::Communicator& comm = sru::dist::world();
  double first_seconds = 0;
  for (const std::string& path : o.configs) {
    std::vector<std::string> overrides = o.overrides;
    sru::config::Config cfg = sru::config::load_config(path, overrides);
    if (const auto plan = sru::tasks::cross_validation_plan(cfg)) {
      overrides.push_back(plan->fold_key + "=0");
      cfg = sru::config::load_config(path, overrides);
    }
    sru::Generator gen(static_cast<uint64_t>(cfg.train.seed));
    auto task = sru::tasks::make_task(cfg, gen, {true, nullptr, &comm});
    sru::train::check_data_parallel(cfg, *task, comm);
    comm.set_timeout(cfg.train.dist_timeout_s);
    const sru::Device device = sru::train::resolve_train_device(cfg.train.device, comm);
    task->model().to(device);
    comm.use_device(device);
    const auto optimizer = sru::train::make_optimizer(cfg.train, task->model());
    const int64_t per_epoch = task->steps_per_epoch();
    const int64_t steps = o.steps > 0 ? std::min(o.steps, per_epoch) : per_epoch;
    const int64_t total_steps = cfg.train.max_steps > 0 ? cfg.train.max_steps : cfg.train.epochs * per_epoch;
    sru::train::TrainingStep step(*task, *optimizer, cfg.train,
                                  sru::train::schedule_options(cfg.train, task->model_size(), total_steps), &comm);
    int64_t epoch = 0, tokens = 0, taken = 0;
    double last_lr = 0;
    auto run_steps = [&](int64_t n) {
      task->start_epoch(epoch, 0);
      for (int64_t i = 0; i < n; ++i) {
        const auto r = step.run(i, ++taken, epoch);
        SRU_CHECK(r.kind != sru::train::StepOutcome::Kind::NonFinite, "srubench train-epoch: ", path, ": non-finite ",
                  r.nonfinite, " at step ", taken);
        tokens += r.tokens;
        last_lr = r.lr;
      }
      ++epoch;
      if (device.is_cuda()) sru::cuda::synchronize(device.index);  // the host clock times finished work
    };
    run_steps(std::min(o.warmup_steps, per_epoch));
    tokens = 0;
    const auto t = sru::bench::time_cpu([&] { run_steps(steps); }, {0, o.repeats});
    const double seconds = t.median_ms / 1000.0 * static_cast<double>(per_epoch) / static_cast<double>(steps);
    if (first_seconds == 0) first_seconds = seconds;
    Row row{std::filesystem::path(path).stem().string(), device.str(), {}};
    row.set("params", static_cast<double>(task->model().num_parameters()));
    row.set("steps", static_cast<double>(steps)).set("steps_per_epoch", static_cast<double>(per_epoch));
    row.set("s_per_epoch", seconds);
    row.set("tokens_per_s", static_cast<double>(tokens) / o.repeats / (t.median_ms / 1000.0));
    row.set("vs_first", seconds / first_seconds);
    row.set("steps_taken", static_cast<double>(taken)).set("lr_last", last_lr);
    row.set("ranks", comm.size());
    report.add(row);
  }
}

struct EvalBenchOptions {
  std::vector<std::string> checkpoints;
  std::vector<std::string> overrides;
  std::string split;  // "" = the task's validation split
  int64_t max_batches = 0;
  int64_t length = 35, batch = 10;  // the encoder row's input shape
  sru::bench::TimingOptions timing{1, 5};
};

// Inference of each checkpoint, two rows each: the task's evaluation of a split (forward passes without
// gradients; words/s over the split) and the encoder alone (model.type built from the checkpoint's
// config, fresh weights: speed does not depend on their values) on one (--length, --batch) batch of
// random token ids and inputs. Median of the repeats;
// vs_first = the first checkpoint's time over this one's.
void bench_eval(Report& report, const EvalBenchOptions& o) {
  double first_model_ms = 0, first_encoder_ms = 0;
  for (const std::string& path : o.checkpoints) {
    const sru::train::LoadedCheckpoint ckpt = sru::train::read_checkpoint(path, o.overrides);
    const sru::config::Config& cfg = ckpt.config;
    sru::Generator gen(1);
    auto task = sru::tasks::make_task(cfg, gen, {/*load_data=*/true, &ckpt.file});
    sru::train::load_model(task->model(), ckpt.file, path);
    task->model().eval();
    const std::string split = o.split.empty() ? task->validation_split() : o.split;
    sru::tasks::Metrics m;
    const auto t_model = sru::bench::time_cpu([&] { m = task->evaluate(split, o.max_batches); }, o.timing);
    const std::string count = task->token_name();
    const double tokens = m.count(count) ? m.at(count) : 0.0;
    // A row of `n` tokens in `ms` (median), relative to the first checkpoint's time `first_ms`.
    auto row = [&](const std::string& part, const sru::nn::Module& params, double n, double ms, double& first_ms) {
      if (first_ms == 0) first_ms = ms;
      Row r{cfg.model.type + " " + part, "cpu", {}};
      r.set("params", static_cast<double>(params.num_parameters())).set(count, n).set("ms", ms);
      r.set(count + "_per_s", n / (ms / 1000.0)).set("vs_first", first_ms / ms);
      return r;
    };
    const std::string metric = task->metrics().front().name;
    report.add(row("model", task->model(), tokens, t_model.median_ms, first_model_ms).set(metric, m.at(metric)));

    // The encoder alone on one evaluation batch.
    int64_t vocab = 0;
    for (const auto& [name, t] : task->model().state())
      if (name == "embedding.weight") vocab = t.size(0);
    const auto encoder = sru::tasks::make_encoder(cfg, cfg.model.embedding_size, gen, vocab);
    encoder->eval();
    const int64_t L = o.length, B = o.batch;
    const Tensor x = Tensor::uniform({L, B, cfg.model.embedding_size}, -1, 1, sru::DType::F32, gen);
    const Tensor tokens_in = Tensor::uniform({L, B}, 0, static_cast<double>(std::max<int64_t>(vocab, 1)) - 0.5,
                                             sru::DType::F64, gen).to(sru::DType::I64);
    const auto t_encoder = sru::bench::time_cpu(
        [&] {
          sru::autograd::NoGradGuard no_grad;
          std::vector<Tensor> state;
          encoder->forward_sequence({x, Tensor(), tokens_in}, state);
        },
        {o.timing.warmup, o.timing.repeats * 10});
    report.add(row("encoder", *encoder, static_cast<double>(L * B), t_encoder.median_ms, first_encoder_ms));
  }
}

// --repeats and --warmup of a subcommand that times with TimingOptions.
void add_timing_options(CLI::App* cmd, sru::bench::TimingOptions& timing,
                        const std::string& repeats_help = "Timed repeats (the median is reported)") {
  cmd->add_option("--repeats", timing.repeats, repeats_help)->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", timing.warmup, "Untimed warm-up runs")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

struct ReaderBenchOptions {
  int64_t hidden = 128, embedding = 300, batch = 32;
  int64_t doc_length = 148, question_length = 12;  // dev-v1.1's mean paragraph and question (tokens)
  int64_t sru_layers = 6, lstm_layers = 3;         // the paper's SRU reader and DrQA's LSTM
  int64_t questions = 87599;                       // train-v1.1
  sru::bench::TimingOptions timing{1, 5};
  sru::Device device;
};

// The Document Reader's recurrent part, the paper's "time in RNN": the paragraph encoder (input
// 2E + 3: embedding, aligned question embedding, features) and the question encoder (input E), both
// bidirectional, forward + backward of a training batch with the configs' dropout, per batch and per
// epoch of `questions` questions.
void bench_reader_rnn(Report& report, const ReaderBenchOptions& o) {
  double lstm_ms = 0;
  std::vector<std::pair<std::string, double>> totals;
  for (const std::string type : {"lstm", "sru"}) {
    sru::config::Config cfg = sru::config::Config::defaults("squad", type);
    cfg.model.hidden_size = o.hidden;
    cfg.model.num_layers = type == "sru" ? o.sru_layers : o.lstm_layers;
    cfg.model.bidirectional = true;
    cfg.model.dropout = 0.2;
    if (type == "sru") cfg.encoder_options.as<sru::nn::SRUOptions>().rnn_dropout = 0.2;
    sru::Generator gen(1);
    const auto doc_rnn = sru::tasks::make_encoder(cfg, 2 * o.embedding + 3, gen);
    const auto question_rnn = sru::tasks::make_encoder(cfg, o.embedding, gen);
    const std::string name = type == "lstm" && o.device.is_cuda() ? "lstm_cudnn" : type;
    double both = 0;
    for (const auto& [part, rnn, L, n_in] :
         {std::tuple{"paragraph", doc_rnn, o.doc_length, 2 * o.embedding + 3},
          std::tuple{"question", question_rnn, o.question_length, o.embedding}}) {
      rnn->to(o.device);
      rnn->train(true);
      const Tensor x = Tensor::uniform({L, o.batch, n_in}, -1, 1, sru::DType::F32, gen).to(o.device).set_requires_grad(true);
      const Tensor grad = Tensor::ones({L, o.batch, rnn->output_size()}, sru::DType::F32, o.device);
      const auto t = sru::bench::time_on(o.device, [&, rnn = rnn] {
        std::vector<Tensor> state;
        rnn->zero_grad();
        sru::autograd::backward(rnn->forward_sequence({x, Tensor(), Tensor()}, state), grad);
      }, o.timing);
      both += t.median_ms;
      Row row{name + "/" + part, o.device.str(), {}};
      row.set("layers", static_cast<double>(cfg.model.num_layers)).set("L", L).set("B", o.batch).set("d", o.hidden);
      row.set("ms_per_batch", t.median_ms);
      report.add(row);
    }
    if (type == "lstm") lstm_ms = both;
    Row row{name + "/both", o.device.str(), {}};
    row.set("layers", static_cast<double>(cfg.model.num_layers)).set("ms_per_batch", both);
    row.set("s_per_epoch", both / 1000.0 * static_cast<double>((o.questions + o.batch - 1) / o.batch));
    row.set("lstm_over_this", lstm_ms / both);
    report.add(row);
  }
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

  CeilingOptions ceilings;
  std::string json_path;
  std::string device = "cpu";
  auto* ceil_cmd = cli.add_subcommand("ceilings", "sgemm GFLOP/s and elementwise/copy GB/s at SRU-sized shapes");
  ceil_cmd->add_option("--hidden", ceilings.hidden, "Hidden sizes d")->capture_default_str();
  ceil_cmd->add_option("--length", ceilings.length, "Sequence length L")->capture_default_str()->check(CLI::PositiveNumber);
  ceil_cmd->add_option("--batch", ceilings.batch, "Batch size B")->capture_default_str()->check(CLI::PositiveNumber);
  add_timing_options(ceil_cmd, ceilings.timing);
  ceil_cmd->add_option("--device", device, "Device to measure (cpu)")->capture_default_str();
  ceil_cmd->add_option("--json", json_path, "Also write the rows as JSON to this file");

  LayerBenchOptions layer;
  auto* layer_cmd = cli.add_subcommand("sru-vs-lstm", "Forward+backward of one layer: GEMMs alone, the fused "
                                                       "recurrence alone, SRU fused, SRU composed, the LSTM's "
                                                       "GEMMs alone, LSTM fused, LSTM composed");
  layer_cmd->add_option("--lengths", layer.lengths, "Sequence lengths L")->capture_default_str();
  layer_cmd->add_option("--hidden", layer.hidden, "Hidden sizes d (= input size)")->capture_default_str();
  layer_cmd->add_option("--batch", layer.batch, "Batch size B")->capture_default_str()->check(CLI::PositiveNumber);
  layer_cmd->add_option("--impls", layer.impls, "Implementations to run")->capture_default_str()
      ->check(CLI::IsMember({"gemm", "recurrence", "copy", "sru_fused", "sru_composed", "lstm_gemm", "lstm",
                             "lstm_composed", "lstm_cudnn"}));
  add_timing_options(layer_cmd, layer.timing);
  layer_cmd->add_flag("--cpu-time", layer.timing.cpu_time, "CPU only: report the process's CPU time per run, not "
                      "the wall clock (for a loaded shared machine; with --threads 1 it is the work of one thread)");
  layer_cmd->add_option("--device", device, "Device to measure: cpu, cuda or cuda:N")->capture_default_str();
  layer_cmd->add_option("--json", json_path, "Also write the rows as JSON to this file");

  EpochBenchOptions epoch;
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

  EvalBenchOptions eval;
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
  ReaderBenchOptions reader;
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
  reader_cmd->add_option("--device", device, "Device to measure: cpu, cuda or cuda:N")->capture_default_str();
  reader_cmd->add_option("--json", json_path, "Also write the rows as JSON to this file");

  sru::bench::SruppLayerBenchOptions srupp;
  auto* srupp_cmd = cli.add_subcommand("srupp-layer", "Forward+backward and peak memory of one SRU++ layer, one SRU "
                                                      "layer and one Transformer block of equal parameters");
  srupp_cmd->add_option("--lengths", srupp.lengths, "Sequence lengths L (the attention context)")->capture_default_str();
  srupp_cmd->add_option("--hidden", srupp.hidden, "SRU++ widths d")->capture_default_str();
  srupp_cmd->add_option("--proj-ratio", srupp.proj_ratio, "d / d'")->capture_default_str()->check(CLI::PositiveNumber);
  srupp_cmd->add_option("--heads", srupp.heads, "Attention heads")->capture_default_str()->check(CLI::PositiveNumber);
  srupp_cmd->add_option("--batch", srupp.batch, "Batch size B")->capture_default_str()->check(CLI::PositiveNumber);
  srupp_cmd->add_option("--repeats", srupp.timing.repeats, "Timed repeats (the median is reported)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  srupp_cmd->add_option("--warmup", srupp.timing.warmup, "Untimed warm-up runs")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  srupp_cmd->add_option("--device", device, "Device to measure: cpu, cuda or cuda:N")->capture_default_str();
  srupp_cmd->add_option("--json", json_path, "Also write the rows as JSON to this file");

  CLI11_PARSE(cli, argc, argv);
  return sru::apps::run_main("srubench", [&] {
    sru::set_num_threads(threads);
    const std::string name = ceil_cmd->parsed()     ? "ceilings"
                             : epoch_cmd->parsed()  ? "train-epoch"
                             : eval_cmd->parsed()   ? "eval"
                             : reader_cmd->parsed() ? "reader-rnn"
                             : srupp_cmd->parsed()  ? "srupp-layer"
                                                    : "sru-vs-lstm";
    layer.device = reader.device = srupp.device = sru::Device::parse(device);
    SRU_CHECK(layer.device.is_cpu() || layer_cmd->parsed() || reader_cmd->parsed() || srupp_cmd->parsed(), "srubench ",
              name, ": --device ", device, " is not supported: only sru-vs-lstm, reader-rnn and srupp-layer measure "
              "CUDA devices");
    SRU_CHECK(!(layer.timing.cpu_time && layer.device.is_cuda()), "srubench sru-vs-lstm: --cpu-time measures the CPU "
              "only; a CUDA device is timed with CUDA events");
    if (layer.device.is_cuda()) {
      const std::string why = sru::cuda::unavailable_reason(layer.device.index);
      SRU_CHECK(why.empty(), "srubench ", name, ": --device ", device, " is not available: ", why);
    }
    Report report(name);
    sru::bench::warm_up_cpu(warm_up_seconds);
    if (epoch_cmd->parsed()) {
      bench_train_epoch(report, epoch);
    } else if (eval_cmd->parsed()) {
      bench_eval(report, eval);
    } else if (reader_cmd->parsed()) {
      bench_reader_rnn(report, reader);
    } else if (srupp_cmd->parsed()) {
      sru::bench::bench_srupp_layer(report, srupp);
    } else if (ceil_cmd->parsed()) {
      for (int64_t d : ceilings.hidden) SRU_CHECK(d > 0, "srubench ceilings: --hidden sizes must be positive, got ", d);
      bench_sgemm(report, ceilings);
      bench_bandwidth(report, ceilings);
      bench_random(report, ceilings);
    } else {
      for (int64_t v : layer.lengths) SRU_CHECK(v > 0, "srubench sru-vs-lstm: --lengths must be positive, got ", v);
      for (int64_t v : layer.hidden) SRU_CHECK(v > 0, "srubench sru-vs-lstm: --hidden sizes must be positive, got ", v);
      bench_sru_vs_lstm(report, layer);
    }
    if (!sru::dist::world().is_root()) return 0;  // rank 0 reports for a data-parallel run
    std::cout << "threads: " << sru::num_threads() << (layer.timing.cpu_time ? ", clock: process CPU time" : "")
              << "\n" << report.table();
    if (!json_path.empty()) report.write_json(json_path);
    return 0;
  });
}
