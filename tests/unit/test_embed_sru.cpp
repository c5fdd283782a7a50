// The PTB word-LM variants: the Embed-SRU / Super-Embed-SRU recurrence against a step loop of basic ops,
// the after-update hook (gate clipping) inside the shared training step, checkpoints of both variants,
// the exact conversion of a trained v1 SRU into Super-Embed form (same perplexity before and after),
// refused conversions and encoder settings, the Zaremba schedule, and that model.v1 + use_tanh is the
// study's SRU.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "autograd/engine.h"
#include "nn/embed_sru.h"
#include "ops/ops.h"
#include "ops/embed_sru_recurrence.h"
#include "optim/schedule.h"
#include "tasks/lm.h"
#include "tasks/registry.h"
#include "testing.h"
#include "train/checkpoint.h"
#include "train/convert.h"
#include "train/step.h"
#include "train/trainer.h"

using namespace sru;
using sru::testing::error_of;
using sru::testing::leaf;
using sru::testing::temp_file;
using sru::testing::tensors_near;

namespace {

// c = f c + (1 - f) u (or + u), h = m r g + (1 - m r) x (or + x), one step at a time from basic ops.
std::pair<Tensor, Tensor> composed(const Tensor& u, const Tensor& f, const Tensor& r, const Tensor& x, const Tensor& c0,
                                   const Tensor& mask, const Tensor& pad, bool super_embed, bool use_tanh) {
  const int64_t L = u.size(0), B = u.size(1), d = u.size(2);
  Tensor c = c0.defined() ? c0 : Tensor::zeros({B, d}, u.dtype());
  std::vector<Tensor> hs;
  auto at = [](const Tensor& t, int64_t i) { return reshape(slice(t, 0, i, i + 1), {t.size(1), t.size(2)}); };
  for (int64_t t = 0; t < L; ++t) {
    const Tensor ft = at(f, t), rt = at(r, t), ut = at(u, t), xt = at(x, t);
    const Tensor c_new = super_embed ? ft * c + ut : ft * c + (1.0 - ft) * ut;
    const Tensor g = use_tanh ? sru::tanh(c_new) : c_new;
    const Tensor mr = mask.defined() ? mask * rt : rt;
    Tensor h = super_embed ? mr * g + xt : mr * g + (1.0 - mr) * xt;
    if (pad.defined()) {
      std::vector<double> rows(B * d);
      for (int64_t i = 0; i < B * d; ++i) rows[i] = pad.to_vector<double>()[t * B + i / d];
      const Tensor padded = Tensor::from_vector(rows, {B, d});
      h = where(padded, Tensor::zeros({B, d}, u.dtype()), h);
      c = where(padded, c, c_new);
    } else {
      c = c_new;
    }
    hs.push_back(reshape(h, {1, B, d}));
  }
  return {concat(hs, 0), c};
}

// Sentences with a learnable pattern, in PTB's form (one sentence a line, <unk> among the words).
std::string word_text(int lines, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out;
  for (int i = 0; i < lines; ++i) {
    out += rng() % 2 ? " the cat sat" : " a dog ran";
    if (rng() % 3 == 0) out += " <unk>";
    out += rng() % 2 ? " home\n" : " away\n";
  }
  return out;
}

config::Config tiny_wordlm(const std::string& encoder, int64_t embedding = 8, int64_t hidden = 8) {
  config::Config c = config::Config::defaults("wordlm", encoder);
  c.data.batch_size = 4;
  c.data.eval_batch_size = 2;
  c.model.embedding_size = embedding;
  c.model.hidden_size = hidden;
  c.model.num_layers = 2;
  c.model.dropout = 0.1;
  c.model.embedding_dropout = 0.1;
  c.train.optimizer = "sgd";
  c.train.lr = 2.0;
  c.train.seed = 3;
  auto& lm = c.task_as<tasks::LMOptions>();
  lm.bptt = 6;
  lm.init_range = 0.1;
  c.data.path = temp_file("embed_sru.train.txt", word_text(80, 1));
  lm.valid_path = temp_file("embed_sru.valid.txt", word_text(16, 2));
  lm.test_path = temp_file("embed_sru.test.txt", word_text(16, 3));
  return c;
}

// Trains `epochs` epochs through the shared training step.
void train_epochs(tasks::Task& task, const config::Config& cfg, int epochs) {
  const auto optimizer = train::make_optimizer(cfg.train, task.model());
  train::TrainingStep step(task, *optimizer, cfg.train, train::schedule_options(cfg.train, 8, 1000));
  int64_t taken = 0;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    task.start_epoch(epoch, 0);
    for (int64_t i = 0; i < task.steps_per_epoch(); ++i)
      ASSERT_EQ(step.run(i, ++taken, epoch).kind, train::StepOutcome::Kind::Updated);
  }
}

// Trains a tiny model of `cfg` and saves it as a training checkpoint; returns its path.
std::string trained_checkpoint(const config::Config& cfg, const std::string& name, int epochs = 3) {
  Generator gen(static_cast<uint64_t>(cfg.train.seed));
  auto task = tasks::make_task(cfg, gen);
  train_epochs(*task, cfg, epochs);
  const std::string path = sru::testing::tmp_dir() + name;
  config::Config copy = cfg;
  train::save_checkpoint(path, *task, nullptr, copy.to_yaml(), {});
  return path;
}

struct Evaluated {
  double valid_ppl, test_ppl;
};
Evaluated evaluate_checkpoint(const std::string& path) {
  const train::LoadedCheckpoint ckpt = train::read_checkpoint(path);
  Generator gen(1);
  auto task = tasks::make_task(ckpt.config, gen, {true, &ckpt.file});
  train::load_model(task->model(), ckpt.file, path);
  return {task->evaluate("valid", 0).at("ppl"), task->evaluate("test", 0).at("ppl")};
}

bool has_tensor(const nn::Module& m, const std::string& name, const Shape& shape) {
  for (const auto& [n, t] : m.state())
    if (n == name) return t.shape() == shape;
  return false;
}

}  // namespace

TEST(EmbedSru, RecurrenceMatchesAStepLoopOfBasicOps) {
  const int64_t L = 5, B = 3, d = 4;
  for (int bits = 0; bits < 8; ++bits) {
    const bool super_embed = bits & 1, use_tanh = bits & 2, extras = bits & 4;
    SCOPED_TRACE(::testing::Message() << "bits=" << bits);
    const Tensor u = leaf({L, B, d}, 1), f = leaf({L, B, d}, 2, 0.01, 0.99), r = leaf({L, B, d}, 3, 0.01, 0.99);
    const Tensor x = leaf({L, B, d}, 4), c0 = extras ? leaf({B, d}, 5) : Tensor();
    Tensor mask, pad;
    if (extras) {
      mask = leaf({B, d}, 6, 0.0, 2.0).detach();
      pad = Tensor::from_vector(std::vector<double>{0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1}, {L, B});
    }
    EmbedSruRecurrenceOptions o;
    o.super_embed = super_embed;
    o.use_tanh = use_tanh;
    auto [h, c] = embed_sru_recurrence(u, f, r, x, c0, mask, pad, o);
    auto [h_ref, c_ref] = composed(u, f, r, x, c0, mask, pad, super_embed, use_tanh);
    EXPECT_TRUE(tensors_near(h, h_ref, 1e-12, 1e-12));
    EXPECT_TRUE(tensors_near(c, c_ref, 1e-12, 1e-12));
    // Every gradient of a random projection of both outputs.
    const Tensor wh = leaf({L, B, d}, 7).detach(), wc = leaf({B, d}, 8).detach();
    std::vector<Tensor> inputs = {u, f, r, x};
    if (c0.defined()) inputs.push_back(c0);
    std::vector<std::vector<double>> grads[2];
    for (int k = 0; k < 2; ++k) {
      for (Tensor t : inputs) t.set_grad(Tensor());
      const auto [hk, ck] = k == 0 ? std::pair{h, c} : std::pair{h_ref, c_ref};
      autograd::backward(sum(hk * wh) + sum(ck * wc));
      for (const Tensor& t : inputs) grads[k].push_back(t.grad().to_vector<double>());
    }
    for (size_t i = 0; i < inputs.size(); ++i)
      for (size_t j = 0; j < grads[0][i].size(); ++j) ASSERT_NEAR(grads[0][i][j], grads[1][i][j], 1e-12) << i << "," << j;
  }
}

TEST(EmbedSru, AfterUpdateHooksRunInEveryModuleOfTheTree) {
  struct Counting : nn::Module {
    int calls = 0;
    void on_after_update() override { ++calls; }
    std::shared_ptr<Counting> add(const std::string& name) {
      return register_module(name, std::make_shared<Counting>());
    }
  };
  Counting root;
  auto child = root.add("a");
  auto grandchild = child->add("b");
  root.after_update();
  root.after_update();
  EXPECT_EQ(root.calls, 2);
  EXPECT_EQ(child->calls, 2);
  EXPECT_EQ(grandchild->calls, 2);
}

TEST(EmbedSru, TheTrainingStepClipsTheGateTablesAfterEveryUpdate) {
  for (const std::string encoder : {"embed-sru", "super-embed-sru"}) {
    SCOPED_TRACE(encoder);
    config::Config cfg = tiny_wordlm(encoder);
    cfg.train.lr = 50.0;  // large steps push gates out of range
    Generator gen(1);
    auto task = tasks::make_task(cfg, gen);
    Tensor forget, reset, candidate;
    for (const auto& [name, t] : task->model().named_parameters()) {
      if (name == "rnn.rnn_lst.0.forget.weight") forget = t;
      if (name == "rnn.rnn_lst.0.reset.weight") reset = t;
      if (name == "rnn.rnn_lst.0.candidate.weight" || name == "rnn.rnn_lst.0.cell_input.weight") candidate = t;
    }
    ASSERT_TRUE(forget.defined() && reset.defined() && candidate.defined());
    for (double v : forget.to_vector<double>()) ASSERT_TRUE(v > 0.47 && v < 0.53) << "gates start near 0.5";
    // Out of range before the step (as an update could leave them), and a candidate above the range.
    forget.fill_(3.0);
    reset.fill_(-2.0);
    candidate.fill_(1.5);
    const auto optimizer = train::make_optimizer(cfg.train, task->model());
    train::TrainingStep step(*task, *optimizer, cfg.train, train::schedule_options(cfg.train, 8, 10));
    task->start_epoch(0, 0);
    for (int64_t i = 0; i < 3; ++i) {
      ASSERT_EQ(step.run(i, i + 1, 0).kind, train::StepOutcome::Kind::Updated);
      for (const Tensor& gate : {forget, reset})
        for (double v : gate.to_vector<double>())
          ASSERT_TRUE(v >= nn::EmbedSRULayer::kGateMin - 1e-7 && v <= nn::EmbedSRULayer::kGateMax + 1e-7) << v;
    }
    const auto cand = candidate.to_vector<double>();
    EXPECT_GT(*std::max_element(cand.begin(), cand.end()), 1.0) << "only the gates are clipped";
  }
}

TEST(EmbedSru, CheckpointsOfBothVariantsRoundTrip) {
  for (const std::string encoder : {"embed-sru", "super-embed-sru"}) {
    SCOPED_TRACE(encoder);
    const config::Config cfg = tiny_wordlm(encoder);
    const std::string path = trained_checkpoint(cfg, encoder + ".safetensors", 1);
    const train::LoadedCheckpoint ckpt = train::read_checkpoint(path);
    EXPECT_EQ(ckpt.config.model.type, encoder);
    Generator gen(5);
    auto task = tasks::make_task(ckpt.config, gen, {true, &ckpt.file});
    const std::string first = encoder == "embed-sru" ? "candidate" : "cell_input";
    const nn::NamedTensors state = task->model().state();
    int64_t vocab = 0;
    for (const auto& [n, t] : state)
      if (n == "embedding.weight") vocab = t.size(0);
    EXPECT_EQ(vocab, 10) << "the cat sat a dog ran <unk> home away <eos>";
    for (const std::string& table : {first, std::string("forget"), std::string("reset")})
      EXPECT_TRUE(has_tensor(task->model(), "rnn.rnn_lst.0." + table + ".weight", {vocab, 8})) << table;
    EXPECT_TRUE(has_tensor(task->model(), "rnn.rnn_lst.1.weight", {8, 24})) << "layer 2 is an SRU layer";
    const double before = [&] {
      Generator g(5);
      auto fresh = tasks::make_task(ckpt.config, g, {true, &ckpt.file});
      return fresh->evaluate("valid", 0).at("ppl");
    }();
    train::load_model(task->model(), ckpt.file, path);
    const double loaded = task->evaluate("valid", 0).at("ppl");
    EXPECT_NE(loaded, before) << "the trained weights were loaded";
    // Saved again and loaded into a third model: the same numbers.
    const std::string again = sru::testing::tmp_dir() + encoder + "-again.safetensors";
    train::save_checkpoint(again, *task, nullptr, config::Config(ckpt.config).to_yaml(), ckpt.progress);
    EXPECT_EQ(evaluate_checkpoint(again).valid_ppl, loaded);
  }
}

TEST(EmbedSru, AV1SruConvertsToSuperEmbedWithTheSamePerplexity) {
  struct Case {
    std::string name;
    int64_t embedding, hidden;
    bool tied, rescale, mapped_input = false;
  };
  for (const Case& k : {Case{"k3", 8, 8, false, false}, Case{"k3-tied-rescaled", 8, 8, true, true},
                        Case{"k4-projected-skip", 6, 8, false, false},
                        Case{"input-mapped-first", 6, 8, false, true, true}}) {
    SCOPED_TRACE(k.name);
    config::Config cfg = tiny_wordlm("sru", k.embedding, k.hidden);
    cfg.encoder_options.as<nn::SRUOptions>().proj_input_to_hidden_first = k.mapped_input;
    cfg.encoder_options.as<nn::SRUOptions>().v1 = true;
    cfg.encoder_options.as<nn::SRUOptions>().use_tanh = true;
    cfg.encoder_options.as<nn::SRUOptions>().rescale = k.rescale;
    cfg.encoder_options.as<nn::SRUOptions>().highway_bias = k.rescale ? -1.0 : 0.0;
    cfg.task_as<tasks::LMOptions>().tie_weights = k.tied;
    const std::string sru = trained_checkpoint(cfg, "sru-" + k.name + ".safetensors");
    const std::string converted = sru::testing::tmp_dir() + "super-" + k.name + ".safetensors";
    train::convert_checkpoint(sru, "super-embed", converted);

    const train::LoadedCheckpoint ckpt = train::read_checkpoint(converted);
    EXPECT_EQ(ckpt.config.model.type, "super-embed-sru");
    EXPECT_EQ(ckpt.config.model.embedding_size, k.hidden);
    EXPECT_FALSE(ckpt.config.task_as<tasks::LMOptions>().tie_weights);
    EXPECT_EQ(ckpt.file.find("rnn.rnn_lst.0.weight"), nullptr) << "no matrix product left in the first layer";
    EXPECT_NE(ckpt.file.find("rnn.rnn_lst.0.cell_input.weight"), nullptr);
    EXPECT_NE(ckpt.file.find("output.weight"), nullptr);

    const Evaluated a = evaluate_checkpoint(sru), b = evaluate_checkpoint(converted);
    EXPECT_LT(a.valid_ppl, 9.0) << "the model learnt something (10 words)";
    EXPECT_NEAR(b.valid_ppl, a.valid_ppl, 1e-6 * a.valid_ppl);
    EXPECT_NEAR(b.test_ppl, a.test_ppl, 1e-6 * a.test_ppl);
  }
}

TEST(EmbedSru, ConversionsThatCannotBeExactAreRefused) {
  config::Config lstm = tiny_wordlm("lstm");
  const std::string lstm_ckpt = trained_checkpoint(lstm, "lstm-refused.safetensors", 1);
  const std::string out = sru::testing::tmp_dir() + "refused.safetensors";
  EXPECT_EQ(error_of([&] { train::convert_checkpoint(lstm_ckpt, "super-embed", out); }),
            "--convert super-embed: the model's encoder is lstm (model.type); only a v1 SRU (model.type sru with "
            "model.v1: true) converts to Super-Embed-SRU form");
  config::Config v2 = tiny_wordlm("sru");  // v1 false: c_{t-1} in the gates
  const std::string v2_ckpt = trained_checkpoint(v2, "sru-v2-refused.safetensors", 1);
  EXPECT_NE(error_of([&] { train::convert_checkpoint(v2_ckpt, "super-embed", out); })
                .find("the SRU has c_{t-1} terms in its gates (model.v1: false)"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { train::convert_checkpoint(v2_ckpt, "tiny", out); }),
            "--convert: unknown form 'tiny' (available: super-embed)");
  EXPECT_EQ(error_of([&] { train::convert_checkpoint(v2_ckpt, "super-embed", ""); }),
            "--convert needs --out FILE: where to write the converted checkpoint");
  EXPECT_FALSE(std::filesystem::exists(out)) << "nothing written for a refused conversion";
}

TEST(EmbedSru, EncoderSettingsThatCannotWorkAreRefused) {
  Generator gen(1);
  config::Config sizes = tiny_wordlm("embed-sru", 6, 8);
  EXPECT_NE(error_of([&] { tasks::make_task(sizes, gen); })
                .find("model.type embed-sru: the first layer adds its input to h, so the input size (6; "
                      "model.embedding_size in the language models) must equal model.hidden_size (8)"),
            std::string::npos);
  nn::EmbedSRUOptions o;
  o.input_size = o.hidden_size = 4;
  EXPECT_NE(error_of([&] { nn::EmbedSRU(o, 0, nn::EmbedSRUForm::SuperEmbed, gen); })
                .find("must have a token vocabulary"),
            std::string::npos);
  o.bidirectional = true;
  EXPECT_NE(error_of([&] { nn::EmbedSRU(o, 5, nn::EmbedSRUForm::Embed, gen); }).find("one direction only"),
            std::string::npos);
  o.bidirectional = false;
  nn::EmbedSRU model(o, 5, nn::EmbedSRUForm::Embed, gen);
  nn::EncoderStatePtr state;
  EXPECT_NE(error_of([&] { model.forward_sequence({Tensor::zeros({3, 2, 4}), Tensor(), Tensor()}, state); })
                .find("the task passed no token ids"),
            std::string::npos);
}

TEST(EmbedSru, ZarembaScheduleKeepsTheRateSixEpochsThenDividesBy1Point2) {
  optim::ScheduleOptions o;
  o.kind = "epoch";
  o.lr = 1.0;
  o.decay_rate = 1.0 / 1.2;
  o.epochs_before_decay = 6;
  for (int64_t epoch = 0; epoch < 6; ++epoch) EXPECT_DOUBLE_EQ(optim::learning_rate(o, 100, epoch), 1.0) << epoch;
  EXPECT_DOUBLE_EQ(optim::learning_rate(o, 1, 6), 1.0 / 1.2);
  EXPECT_DOUBLE_EQ(optim::learning_rate(o, 1, 7), 1.0 / 1.44);
  EXPECT_NEAR(optim::learning_rate(o, 1, 38), 1.0 / std::pow(1.2, 33), 1e-15);  // the 39th epoch
  // The default (1) is the plain per-epoch decay: the study's lr 1.0 x 0.85 per epoch.
  o.epochs_before_decay = 1;
  o.decay_rate = 0.85;
  EXPECT_DOUBLE_EQ(optim::learning_rate(o, 1, 0), 1.0);
  EXPECT_DOUBLE_EQ(optim::learning_rate(o, 1, 2), 0.85 * 0.85);
}

// The study's SRU is the first version of the unit with tanh: f = sigmoid(W_f x + b_f), r = sigmoid(W_r x +
// b_r), c = f c + (1 - f) W x, h = r tanh(c) + (1 - r) x. model.v1 + model.use_tanh (rescale off, so the
// skip term is x itself) give exactly that: checked against the equations written out here.
TEST(EmbedSru, V1SruWithTanhIsTheStudysUnit) {
  nn::SRUOptions o;
  o.input_size = o.hidden_size = 3;
  o.num_layers = 1;
  o.v1 = true;
  o.use_tanh = true;
  o.dtype = DType::F64;
  Generator gen(2);
  nn::SRU sru(o, gen);
  nn::SRULayer& layer = *sru.layers[0];
  EXPECT_FALSE(layer.weight_c.requires_grad()) << "no c_{t-1} terms, and they stay absent";
  layer.bias.copy_(leaf({6}, 11).detach());  // non-zero b_f, b_r
  const int64_t L = 4, B = 2, d = 3;
  const Tensor x = leaf({L, B, d}, 12).detach();
  const auto [h, c_last] = sru.forward(x);
  const auto W = layer.weight.to_vector<double>(), b = layer.bias.to_vector<double>(), xs = x.to_vector<double>();
  const auto hs = h.to_vector<double>();
  auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  for (int64_t bi = 0; bi < B; ++bi) {
    std::vector<double> c(d, 0.0);
    for (int64_t t = 0; t < L; ++t)
      for (int64_t j = 0; j < d; ++j) {
        double u[3] = {0, 0, 0};  // candidate, forget, reset: columns j*3 + m of W (d, 3d)
        for (int64_t i = 0; i < d; ++i)
          for (int m = 0; m < 3; ++m) u[m] += xs[(t * B + bi) * d + i] * W[i * 3 * d + j * 3 + m];
        const double f = sigmoid(u[1] + b[j]), r = sigmoid(u[2] + b[d + j]);
        c[j] = f * c[j] + (1 - f) * u[0];
        const double expected = r * std::tanh(c[j]) + (1 - r) * xs[(t * B + bi) * d + j];
        ASSERT_NEAR(hs[(t * B + bi) * d + j], expected, 1e-12) << "t=" << t << " b=" << bi << " j=" << j;
      }
  }
}
