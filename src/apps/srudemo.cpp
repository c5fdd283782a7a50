// srudemo: the quickstart's small end-to-end job until the SRU char-LM lands. It trains a character
// n-gram MLP language model (Bengio et al. 2003 style: the previous n bytes -> embeddings -> tanh
// layer -> softmax over 256 bytes) with the autograd core and plain SGD, on a byte file split
// 90/5/5 into train/valid/test like enwik8, and prints the loss in bits per character as it falls.
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "apps/common.h"
#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/parallel.h"
#include "ops/ops.h"

namespace {

using sru::Tensor;

struct Options {
  std::string data = "data/enwik8-sample/enwik8.head1M";
  int64_t context = 5;
  int64_t embed = 16;
  int64_t hidden = 256;
  int64_t batch = 128;
  double lr = 0.5;
  int64_t steps = 3000;
  double seconds = 0;  // 0 = no time limit
  int64_t eval_every = 500;
  int64_t eval_positions = 20000;
  uint64_t seed = 1;
};

struct Model {
  Tensor embedding, w1, b1, w2, b2;

  Model(const Options& o, sru::Generator& gen) {
    const int64_t fan_in = o.context * o.embed;
    embedding = Tensor::randn({256, o.embed}, sru::DType::F32, gen).mul_(0.1);
    w1 = Tensor::uniform({fan_in, o.hidden}, -1, 1, sru::DType::F32, gen).mul_(std::sqrt(3.0 / fan_in));
    b1 = Tensor::zeros({o.hidden});
    w2 = Tensor::uniform({o.hidden, 256}, -1, 1, sru::DType::F32, gen).mul_(std::sqrt(3.0 / o.hidden));
    b2 = Tensor::zeros({256});
    for (Tensor* p : parameters()) p->set_requires_grad(true);
  }
  std::vector<Tensor*> parameters() { return {&embedding, &w1, &b1, &w2, &b2}; }

  // contexts (B, n) i64 -> logits (B, 256)
  Tensor forward(const Tensor& contexts) const {
    const Tensor e = sru::embedding(embedding, contexts);                    // (B, n, e)
    const Tensor h = sru::reshape(e, {contexts.size(0), -1});                 // (B, n*e)
    const Tensor hidden = sru::tanh(sru::matmul(h, w1) + b1);                 // (B, hidden)
    return sru::matmul(hidden, w2) + b2;                                      // (B, 256)
  }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SRU_CHECK(in.good(), "cannot open data file '", path, "'");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return bytes;
}

// Fills (contexts, targets) for the given target positions of `text`.
void make_batch(const std::string& text, const std::vector<int64_t>& positions, int64_t n, Tensor& contexts,
                Tensor& targets) {
  const int64_t B = static_cast<int64_t>(positions.size());
  contexts = Tensor::empty({B, n}, sru::DType::I64);
  targets = Tensor::empty({B}, sru::DType::I64);
  int64_t* c = contexts.data<int64_t>();
  int64_t* t = targets.data<int64_t>();
  for (int64_t i = 0; i < B; ++i) {
    for (int64_t k = 0; k < n; ++k) c[i * n + k] = static_cast<unsigned char>(text[positions[i] - n + k]);
    t[i] = static_cast<unsigned char>(text[positions[i]]);
  }
}

// Mean bits per character over up to max_positions evenly spaced positions of a split.
double evaluate_bpc(const Model& model, const std::string& text, const Options& o) {
  sru::autograd::NoGradGuard no_grad;
  const int64_t available = static_cast<int64_t>(text.size()) - o.context;
  const int64_t count = std::min(available, o.eval_positions);
  const double stride = static_cast<double>(available) / count;
  double total = 0.0;
  for (int64_t start = 0; start < count; start += 1024) {
    std::vector<int64_t> positions;
    for (int64_t i = start; i < std::min(count, start + 1024); ++i)
      positions.push_back(o.context + static_cast<int64_t>(i * stride));
    Tensor contexts, targets;
    make_batch(text, positions, o.context, contexts, targets);
    total += sru::cross_entropy(model.forward(contexts), targets, -100, sru::Reduction::Sum).item<double>();
  }
  return total / count / std::log(2.0);
}

int run(const Options& o) {
  const std::string bytes = read_file(o.data);
  SRU_CHECK(static_cast<int64_t>(bytes.size()) > 40 * o.context, "data file '", o.data, "' has only ", bytes.size(),
            " bytes: too short to split into train/valid/test for context ", o.context);
  const size_t n_train = bytes.size() * 90 / 100, n_valid = bytes.size() * 5 / 100;
  const std::string train = bytes.substr(0, n_train), valid = bytes.substr(n_train, n_valid),
                    test = bytes.substr(n_train + n_valid);
  spdlog::info("data {}: {} bytes -> train {}, valid {}, test {} (90/5/5)", o.data, bytes.size(), train.size(),
               valid.size(), test.size());

  sru::Generator gen(o.seed);
  Model model(o, gen);
  int64_t n_params = 0;
  for (Tensor* p : model.parameters()) n_params += p->numel();
  spdlog::info("model: {}-byte context, embed {}, hidden {}, {} parameters; SGD lr {}, batch {}, {} threads",
               o.context, o.embed, o.hidden, n_params, o.lr, o.batch, sru::num_threads());

  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int64_t> pick(o.context, static_cast<int64_t>(train.size()) - 1);
  const auto start = std::chrono::steady_clock::now();
  double window_loss = 0.0;
  int64_t window_steps = 0, step = 0;
  for (step = 1; step <= o.steps; ++step) {
    std::vector<int64_t> positions(o.batch);
    for (auto& p : positions) p = pick(rng);
    Tensor contexts, targets;
    make_batch(train, positions, o.context, contexts, targets);
    Tensor loss = sru::cross_entropy(model.forward(contexts), targets);
    SRU_CHECK(std::isfinite(loss.item<double>()), "training loss became ", loss.item<double>(), " at step ", step,
              ": lower --lr");
    sru::autograd::backward(loss);
    {
      sru::autograd::NoGradGuard no_grad;
      for (Tensor* p : model.parameters()) {
        p->add_(p->grad(), -o.lr);
        p->set_grad(Tensor());
      }
    }
    window_loss += loss.item<double>() / std::log(2.0);
    ++window_steps;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool out_of_time = o.seconds > 0 && elapsed >= o.seconds;
    if (step % o.eval_every == 0 || step == o.steps || out_of_time) {
      spdlog::info("step {:6d}  train {:.3f} bpc  valid {:.3f} bpc  {:.0f} chars/s", step, window_loss / window_steps,
                   evaluate_bpc(model, valid, o), step * o.batch / elapsed);
      window_loss = 0.0;
      window_steps = 0;
    }
    if (out_of_time) break;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Options full = o;
  full.eval_positions = std::numeric_limits<int64_t>::max();
  std::cout << "final: valid " << evaluate_bpc(model, valid, full) << " bpc, test " << evaluate_bpc(model, test, full)
            << " bpc after " << std::min(step, o.steps) << " steps in " << seconds << " s\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"srudemo: train a small character n-gram MLP language model with the srutrain autograd core"};
  cli.set_version_flag("--version", sru::apps::version_line("srudemo"));
  Options o;
  int threads = 0;
  cli.add_option("--data", o.data, "Byte file to model (split 90/5/5)")->capture_default_str();
  cli.add_option("--context", o.context, "Previous bytes seen by the model")->capture_default_str()->check(CLI::PositiveNumber);
  cli.add_option("--embed", o.embed, "Embedding size per byte")->capture_default_str()->check(CLI::PositiveNumber);
  cli.add_option("--hidden", o.hidden, "Hidden layer size")->capture_default_str()->check(CLI::PositiveNumber);
  cli.add_option("--batch", o.batch, "Examples per step")->capture_default_str()->check(CLI::PositiveNumber);
  cli.add_option("--lr", o.lr, "SGD learning rate")->capture_default_str()->check(CLI::PositiveNumber);
  cli.add_option("--steps", o.steps, "Training steps")->capture_default_str()->check(CLI::PositiveNumber);
  cli.add_option("--seconds", o.seconds, "Stop after this many seconds (0 = no limit)")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--eval-every", o.eval_every, "Steps between validation reports")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cli.add_option("--seed", o.seed, "Random seed")->capture_default_str();
  cli.add_option("--threads", threads, "CPU threads (0 = all cores)")->capture_default_str()->check(CLI::NonNegativeNumber);
  CLI11_PARSE(cli, argc, argv);
  return sru::apps::run_main("srudemo", [&] {
    sru::set_num_threads(threads);
    return run(o);
  });
}
