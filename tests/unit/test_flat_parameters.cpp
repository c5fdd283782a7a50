// Flat parameter and gradient buffers (nn/flat_parameters.h): the layout, handles that follow it, the
// gradients written in place by backward (autograd::gradient_destination), the one-call update, the bf16
// copies of a step's weights made in one conversion (nn/weight_shadows.h), and training that takes the
// same steps to the bit with and without the flat layout.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "autograd/engine.h"
#include "config/config.h"
#include "core/cuda/device_info.h"
#include "core/kernel_count.h"
#include "nn/checkpoint.h"
#include "nn/layers.h"
#include "nn/sru.h"
#include "nn/weight_shadows.h"
#include "ops/lstm_recurrence.h"
#include "ops/ops.h"
#include "tasks/lm.h"
#include "tasks/registry.h"
#include "testing.h"
#include "train/ema.h"
#include "train/step.h"
#include "train/trainer.h"

using namespace sru;
using sru::testing::error_of;

namespace {

// Two layers and a parameter registered on the root, of two dtypes.
struct TwoLayers : nn::Module {
  TwoLayers() {
    Generator gen(3);
    first = register_module("first", std::make_shared<nn::Linear>(3, 5, true, DType::F32, gen));
    second = register_module("second", std::make_shared<nn::Linear>(5, 2, true, DType::F32, gen));
    scale = register_parameter("scale", Tensor::uniform({7}, -1, 1, DType::F64, gen));
  }
  Tensor forward(const Tensor& x) const { return second->forward(relu(first->forward(x))); }
  std::shared_ptr<nn::Linear> first, second;
  Tensor scale;
};

std::vector<uint32_t> bits(const Tensor& t) {
  const std::vector<float> v = t.to_vector<float>();
  std::vector<uint32_t> out(v.size());
  if (!v.empty()) std::memcpy(out.data(), v.data(), v.size() * sizeof(float));  // (no null pointer to memcpy)
  return out;
}

}  // namespace

TEST(FlatParameters, EveryParameterIsAnAlignedViewOfItsGroupAndKeepsItsValues) {
  TwoLayers model;
  const nn::NamedTensors before = model.named_parameters();
  std::vector<std::vector<double>> values;
  for (const auto& [name, p] : before) values.push_back(p.to_vector<double>());
  const auto flat = model.flatten_parameters();
  EXPECT_EQ(model.flatten_parameters(), flat) << "a second call returns the same layout";
  ASSERT_EQ(flat->groups().size(), 2u);  // f32 and f64
  EXPECT_EQ(flat->members().size(), 5u);
  const nn::NamedTensors after = model.named_parameters();
  for (size_t i = 0; i < after.size(); ++i) {
    const Tensor& p = after[i].second;
    EXPECT_EQ(p.impl(), before[i].second.impl()) << "the handles are the same tensors";
    EXPECT_EQ(p.to_vector<double>(), values[i]) << after[i].first;
    const nn::FlatParameters::Member* m = flat->find(p);
    ASSERT_NE(m, nullptr) << after[i].first;
    EXPECT_EQ(m->name, after[i].first);
    EXPECT_TRUE(p.shares_storage(flat->groups()[m->group].values));
    EXPECT_EQ(m->offset * static_cast<int64_t>(dtype_size(p.dtype())) % 64, 0) << after[i].first;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.data_ptr()) % 64, 0u) << after[i].first;
  }
  EXPECT_EQ(flat->find(model.first->weight)->name, "first.weight") << "the module's member follows";
  // Padding between members is zero.
  const nn::FlatParameters::Group& g32 = flat->groups()[flat->find(model.first->weight)->group];
  EXPECT_EQ(g32.dtype, DType::F32);
  double total = 0;
  for (double v : g32.values.to_vector<double>()) total += std::abs(v);
  double members = 0;
  for (size_t m : g32.members)
    for (double v : flat->members()[m].parameter.to_vector<double>()) members += std::abs(v);
  EXPECT_EQ(total, members);
}

namespace {

// A module of a tree that registers and ties parameters on request, as a lazily built one would.
struct Late : nn::Module {
  Late() { weight = register_parameter("weight", Tensor::zeros({2})); }
  void add_late() { register_parameter("late", Tensor::zeros({2})); }
  void tie(const Tensor& t) { replace_parameter("weight", t); }
  Tensor weight;
};

struct LateRoot : nn::Module {
  LateRoot() { child = register_module("child", std::make_shared<Late>()); }
  std::shared_ptr<Late> child;
};

}  // namespace

TEST(FlatParameters, AParameterRegisteredOrReplacedAfterwardsIsRefusedByName) {
  LateRoot root;
  root.child->add_late();  // before: fine
  root.flatten_parameters();
  const std::string added = error_of([&] { root.child->add_late(); });
  EXPECT_NE(added.find("'child.late' after the model's parameters were laid out in flat buffers"), std::string::npos)
      << added;
  const std::string tied = error_of([&] { root.child->tie(Tensor::zeros({2})); });
  EXPECT_NE(tied.find("'child.weight'"), std::string::npos) << tied;
  EXPECT_NE(error_of([&] { root.child->flatten_parameters(); }).find("call it on the root"), std::string::npos);
  root.child->to(Device::cpu());  // where it is: nothing to move
  if (sru::cuda::device_count() > 0)
    EXPECT_NE(error_of([&] { root.child->to(Device::cuda(0)); }).find("'child' is part of a model whose parameters lie in "
                                                                       "flat buffers"),
              std::string::npos);
  EXPECT_EQ(root.named_parameters().size(), 2u) << "nothing was added";
}

TEST(FlatParameters, BackwardWritesEachGradientIntoItsPlaceWithoutACopy) {
  TwoLayers model;
  const auto flat = model.flatten_parameters();
  const Tensor x = Tensor::uniform({4, 3}, -1, 1, DType::F32, default_generator());
  // The reference: the same model's gradients without the flat layout (a first pass each).
  TwoLayers plain;
  uint64_t before = kernel_dispatches();
  autograd::backward(sum(plain.forward(x)));
  const uint64_t plain_dispatches = kernel_dispatches() - before;
  before = kernel_dispatches();
  autograd::backward(sum(model.forward(x)));
  EXPECT_EQ(kernel_dispatches() - before, plain_dispatches) << "no copy into the flat buffer";
  for (const Tensor* p : {&model.first->weight, &model.first->bias, &model.second->weight, &model.second->bias})
    EXPECT_TRUE(p->grad().same_data(Tensor(p->impl()->grad_home)));
  EXPECT_EQ(bits(model.first->weight.grad()), bits(plain.first->weight.grad()));
  EXPECT_EQ(bits(model.second->bias.grad()), bits(plain.second->bias.grad()));
  EXPECT_TRUE(flat->gradients_in_place(flat->find(model.first->weight)->group));
  EXPECT_FALSE(flat->gradients_in_place(flat->find(model.scale)->group)) << "scale got no gradient";
  EXPECT_FALSE(model.scale.grad().defined());
}

TEST(FlatParameters, GradientsMeetingInThePlaceSumAsElsewhere) {
  // A parameter used three times (twice in one op, as x * x): its gradient is the sum, in its place.
  Tensor w = Tensor::uniform({6}, -1, 1, DType::F64, default_generator()).set_requires_grad(true);
  Tensor v = w.detach().clone().set_requires_grad(true);
  struct Holder : nn::Module {
    explicit Holder(const Tensor& t) { p = register_parameter("p", t); }
    Tensor p;
  } holder(w);
  holder.flatten_parameters();
  auto loss = [](const Tensor& p) { return sum(mul(p, p)) + sum(mul(p, Tensor::full({6}, 3.0, DType::F64))); };
  autograd::backward(loss(w));
  autograd::backward(loss(v));
  EXPECT_TRUE(w.grad().same_data(Tensor(w.impl()->grad_home)));
  EXPECT_EQ(w.grad().to_vector<double>(), v.grad().to_vector<double>());
  // A second pass accumulates into the same place (gradient accumulation).
  autograd::backward(loss(w));
  autograd::backward(loss(v));
  EXPECT_TRUE(w.grad().same_data(Tensor(w.impl()->grad_home)));
  EXPECT_EQ(w.grad().to_vector<double>(), v.grad().to_vector<double>());
}

// The flat layout changes where the values live, not what a checkpoint holds: the same model saved
// before and after flatten_parameters (two groups: f32 and f64) writes the same bytes.
TEST(FlatParameters, AFlatModelSavesTheBytesOfThePlainOne) {
  TwoLayers plain, flat;
  flat.flatten_parameters();
  const std::string plain_path = sru::testing::tmp_dir() + "flat_vs_plain.plain.safetensors",
                    flat_path = sru::testing::tmp_dir() + "flat_vs_plain.flat.safetensors";
  nn::save_state(plain, plain_path);
  nn::save_state(flat, flat_path);
  const auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string a = bytes(plain_path), b = bytes(flat_path);
  EXPECT_GT(a.size(), 100u);
  EXPECT_TRUE(a == b) << a.size() << " vs " << b.size() << " bytes";
}

TEST(FlatParameters, CheckpointLoadAndTheWeightAverageKeepTheViews) {
  TwoLayers model, source;
  const auto flat = model.flatten_parameters();
  const std::string path = sru::testing::tmp_dir() + "flat_parameters.safetensors";
  nn::save_state(source, path);
  nn::load_state(model, path);
  const nn::NamedTensors loaded = model.named_parameters(), saved = source.named_parameters();
  for (size_t i = 0; i < loaded.size(); ++i) {
    const Tensor& p = loaded[i].second;
    EXPECT_TRUE(p.shares_storage(flat->groups()[flat->find(p)->group].values)) << loaded[i].first;
    EXPECT_EQ(p.to_vector<double>(), saved[i].second.to_vector<double>()) << loaded[i].first;
  }
  nn::NamedTensors trainable;
  for (const auto& [name, p] : model.named_parameters()) trainable.emplace_back(name, p);
  train::WeightEma ema(trainable, 0.5, 0, false);
  const std::vector<double> raw = model.first->weight.to_vector<double>();
  model.first->weight.mul_(3.0);  // the average keeps the raw value
  ema.update(1);
  const Tensor& values = flat->groups()[flat->find(model.first->weight)->group].values;
  {
    const train::WeightEma::InModel average(&ema);
    EXPECT_TRUE(model.first->weight.shares_storage(values)) << "the exchange keeps the view";
    const std::vector<double> in_model = model.first->weight.to_vector<double>();
    for (size_t i = 0; i < raw.size(); ++i) EXPECT_NEAR(in_model[i], 0.5 * raw[i] + 0.5 * 3 * raw[i], 1e-6);
  }
  const std::vector<double> back = model.first->weight.to_vector<double>();
  for (size_t i = 0; i < raw.size(); ++i) EXPECT_EQ(back[i], static_cast<double>(static_cast<float>(3 * raw[i])));
  EXPECT_TRUE(model.first->weight.shares_storage(values));
}

namespace {

// A small char-LM of encoder `type` trained `steps` steps with optimiser `kind` (weight decay, clipping,
// two batches accumulated per step), with or without the flat layout: the losses and the final weights.
struct Trained {
  std::vector<double> losses;
  uint64_t dispatches = 0;  // the steps' (core/kernel_count.h)
  std::vector<std::vector<uint32_t>> weights;
  std::vector<std::string> names;  // the weights' parameters
  bool whole_buffer_update = false;
};

// The optimiser's settings besides its kind: the defaults are the tests' usual ones (momentum -1: 0.9 for
// SGD, else 0); freeze_embedding takes the embedding out of training before the optimiser is made, as
// classify's and SQuAD's model.freeze_embedding do.
struct Settings {
  double momentum = -1.0, weight_decay = 0.01, clip = 0.5;
  int accumulate = 2;
  bool freeze_embedding = false;
};

Trained train_char_lm(const std::string& type, const std::string& kind, bool flat, int steps,
                      const std::vector<std::string>& no_decay = {}, bool weight_shadows = true,
                      const Settings& settings = {}) {
  const std::string path = sru::testing::tmp_dir() + "flat_parameters_" + type + ".bin";
  {
    Generator gen(7);
    std::ofstream out(path, std::ios::binary);
    for (double u : Tensor::uniform({3000}, 0, 64, DType::F64, gen).to_vector<double>())
      out.put(static_cast<char>(static_cast<unsigned char>(u)));
  }
  config::Config cfg = config::Config::defaults("charlm", type);
  cfg.data.path = path;
  cfg.data.batch_size = 4;
  cfg.task_as<tasks::LMOptions>().bptt = 10;
  cfg.model.embedding_size = cfg.model.hidden_size = 16;
  cfg.model.num_layers = 2;
  cfg.model.dropout = 0.1;
  if (type == "sru") cfg.encoder_options.as<nn::SRUOptions>().layer_norm = true;
  cfg.train.optimizer = kind;
  cfg.train.lr = kind == "sgd" ? 0.1 : 0.003;
  cfg.train.momentum = settings.momentum >= 0 ? settings.momentum : kind == "sgd" ? 0.9 : 0.0;
  cfg.train.weight_decay = settings.weight_decay;
  cfg.train.weight_decay_exclude = no_decay;
  cfg.train.clip_grad_norm = settings.clip;
  cfg.train.accumulate = settings.accumulate;
  Generator gen(11);
  const auto task = tasks::make_task(cfg, gen);
  if (settings.freeze_embedding)
    for (auto& [name, p] : task->model().named_parameters())
      if (name.find("embedding") != std::string::npos) p.set_requires_grad(false);
  std::unique_ptr<optim::Optimizer> optimizer;
  if (flat) {
    optimizer = train::make_optimizer(cfg.train, task->model());
  } else {
    nn::NamedTensors trainable;
    for (const auto& [name, p] : task->model().named_parameters())
      if (p.requires_grad()) trainable.emplace_back(name, p);
    optim::OptimizerOptions o;
    o.kind = kind;
    o.momentum = cfg.train.momentum;
    o.weight_decay = cfg.train.weight_decay;
    o.weight_decay_exclude = no_decay;
    optimizer = std::make_unique<optim::Optimizer>(trainable, o);
  }
  train::TrainingStep step(*task, *optimizer, cfg.train, train::schedule_options(cfg.train, 16, 100));
  if (!weight_shadows) step.convert_weights_at_each_call();
  task->start_epoch(0, 0);
  Trained out;
  const uint64_t dispatches_before = kernel_dispatches();
  const int64_t batches = settings.accumulate;
  for (int s = 0; s < steps; ++s) {
    out.losses.push_back(step.run(batches * s, batches, s + 1, 0).loss);
    out.whole_buffer_update = optimizer->whole_buffer_updates() == 1;
  }
  out.dispatches = kernel_dispatches() - dispatches_before;
  for (const auto& [name, p] : task->model().named_parameters()) {
    out.weights.push_back(bits(p));
    out.names.push_back(name);
  }
  return out;
}

}  // namespace

TEST(FlatParameters, TrainingTakesTheSameStepsToTheBitWithEveryOptimiser) {
  for (const std::string type : {"sru", "lstm", "transformer"})
    for (const std::string kind : {"sgd", "adam", "adamw", "adamax", "radam", "radamw"}) {
      const Trained plain = train_char_lm(type, kind, false, 3);
      const Trained flat = train_char_lm(type, kind, true, 3);
      EXPECT_EQ(plain.losses, flat.losses) << type << " " << kind;
      EXPECT_EQ(plain.weights, flat.weights) << type << " " << kind;
      EXPECT_TRUE(flat.whole_buffer_update) << type << " " << kind;
    }
}

// The other settings the per-tensor update and the whole-buffer one must agree on: SGD without
// momentum, no clipping, no weight decay, one batch a step; and a frozen embedding (outside the flat
// buffers and the optimiser), which must stay as it was.
TEST(FlatParameters, EverySettingTakesTheSameStepsToTheBit) {
  Settings plain_sgd;
  plain_sgd.momentum = 0.0;
  plain_sgd.weight_decay = 0.0;
  plain_sgd.clip = 0.0;
  plain_sgd.accumulate = 1;
  Settings frozen;
  frozen.freeze_embedding = true;
  frozen.clip = 0.0;
  frozen.accumulate = 1;
  const std::pair<std::string, Settings> cases[] = {{"sgd", plain_sgd}, {"adamw", frozen}, {"sgd", frozen}};
  for (const std::string type : {"sru", "lstm", "transformer"})
    for (const auto& [kind, settings] : cases) {
      SCOPED_TRACE(type + " " + kind + (settings.freeze_embedding ? ", frozen embedding" : ", plain"));
      const Trained plain = train_char_lm(type, kind, false, 3, {}, true, settings);
      const Trained flat = train_char_lm(type, kind, true, 3, {}, true, settings);
      EXPECT_EQ(plain.losses, flat.losses);
      EXPECT_EQ(plain.weights, flat.weights);
      EXPECT_TRUE(flat.whole_buffer_update);
      if (!settings.freeze_embedding) continue;
      const Trained untrained = train_char_lm(type, kind, true, 0, {}, true, settings);
      int frozen_tensors = 0;
      for (size_t i = 0; i < flat.names.size(); ++i) {
        const bool embedding = flat.names[i].find("embedding") != std::string::npos;
        frozen_tensors += embedding;
        if (embedding) EXPECT_EQ(flat.weights[i], untrained.weights[i]) << flat.names[i] << " moved";
        else EXPECT_NE(flat.weights[i], untrained.weights[i]) << flat.names[i] << " did not train";
      }
      EXPECT_GT(frozen_tensors, 0);
    }
}

// Weight-decay exclusions ride in the segment table of the whole-buffer update: the same steps to the
// bit as the per-tensor update's groups, and not those of training without the exclusions.
TEST(FlatParameters, WeightDecayExclusionsTakeTheSameStepsInTheWholeBufferUpdate) {
  for (const std::string type : {"sru", "lstm", "transformer"})
    for (const std::string kind : {"sgd", "adamw"}) {
      const std::vector<std::string> exclude{"bias", type == "lstm" ? "embedding" : "layer_norm"};
      const Trained plain = train_char_lm(type, kind, false, 3, exclude);
      const Trained flat = train_char_lm(type, kind, true, 3, exclude);
      const Trained decaying = train_char_lm(type, kind, true, 3);
      EXPECT_EQ(plain.losses, flat.losses) << type << " " << kind;
      EXPECT_EQ(plain.weights, flat.weights) << type << " " << kind;
      EXPECT_TRUE(flat.whole_buffer_update) << type << " " << kind;
      EXPECT_NE(flat.weights, decaying.weights) << type << " " << kind << ": the exclusions changed nothing";
    }
}

// The gradient norm of an optimiser over a flat model reads each group as one buffer: one reduction
// dispatch per group (however many tensors) plus the finish, the same [norm, factor] to the bit as the
// per-tensor reduction, and the update leaves the padding between members alone (zero even where a
// rule would turn zero into NaN: Adam with eps 0 and a zero gradient).
TEST(FlatParameters, TheNormReadsEachGroupAsOneBufferAndTheUpdateSkipsThePadding) {
  TwoLayers model;
  const auto flat = model.flatten_parameters();
  nn::NamedTensors trainable = model.named_parameters();
  optim::OptimizerOptions o;
  o.eps = 0.0;
  optim::Optimizer optimizer(trainable, o, flat);
  const Tensor x = Tensor::uniform({4, 3}, -1, 1, DType::F32, default_generator());
  autograd::backward(sum(model.forward(x)));
  autograd::backward(sum(model.scale * model.scale));
  const uint64_t before = kernel_dispatches();
  const Tensor whole = optimizer.grad_norm_and_clip_factor(0.5);
  EXPECT_EQ(kernel_dispatches() - before, 2u + 1u) << "f32 group, f64 group, finish";
  const Tensor reference = optim::grad_norm_and_clip_factor(trainable, 0.5);
  EXPECT_EQ(whole.to_vector<double>(), reference.to_vector<double>());
  EXPECT_LT(whole.to_vector<double>()[1], 1.0) << "clipped";
  model.first->bias.grad().fill_(0.0);  // Adam with eps 0: 0 / 0 for these, as for the padding
  optimizer.step(0.01, whole);
  EXPECT_EQ(optimizer.whole_buffer_updates(), 2);
  const nn::FlatParameters::Group& group = flat->groups()[flat->find(model.first->weight)->group];
  const std::vector<float> values = group.values.to_vector<float>();
  std::vector<bool> member(values.size(), false);
  for (size_t m : group.members)
    for (int64_t i = 0; i < flat->members()[m].parameter.numel(); ++i)
      member[static_cast<size_t>(flat->members()[m].offset + i)] = true;
  int padding = 0;
  for (size_t i = 0; i < values.size(); ++i)
    if (!member[i]) {
      ++padding;
      EXPECT_EQ(values[i], 0.0f) << "padding element " << i;
    }
  EXPECT_GT(padding, 0);
  EXPECT_TRUE(std::isnan(model.first->bias.to_vector<float>()[0])) << "the members are updated (0 / 0 is torch's NaN too)";
}

namespace {

// Parameters of sizes that cut into several pieces of the whole-buffer update (4,096) and of the norm's
// blocks (64 Ki), and empty ones first, in the middle and last; every third a "bias".
struct ManySizes : nn::Module {
  explicit ManySizes(uint64_t seed) {
    Generator gen(seed);
    const std::vector<int64_t> sizes{0, 5, 4096, 4097, 9000, 0, 70000, 131073, 37, 0};
    for (size_t i = 0; i < sizes.size(); ++i)
      register_parameter("p" + std::to_string(i) + (i % 3 == 0 ? ".bias" : ".weight"),
                         Tensor::uniform({sizes[i]}, -1, 1, DType::F32, gen));
  }
};

}  // namespace

// The segment tables over members of several pieces and empty members: every optimiser takes the same
// steps to the bit through the whole buffers as tensor by tensor (weight decay excluded for the biases,
// clipping on), the norm too; a step with a NaN gradient changes nothing on either path.
TEST(FlatParameters, MembersOfManyPiecesAndEmptyOnesStepAsTensorByTensor) {
  for (const std::string kind : {"sgd", "adam", "adamw", "adamax", "radam", "radamw"}) {
    SCOPED_TRACE(kind);
    const optim::OptimizerOptions o = sru::testing::options_with_decay(kind, 0.05, {"bias"});
    ManySizes flat_model(3), plain_model(3);
    const auto flat = flat_model.flatten_parameters();
    optim::Optimizer whole(flat_model.named_parameters(), o, flat), per_tensor(plain_model.named_parameters(), o);
    for (int step = 0; step < 4; ++step) {
      auto a = flat_model.named_parameters(), b = plain_model.named_parameters();
      for (size_t i = 0; i < a.size(); ++i) {
        Generator gen(100 + 10 * step + i);
        const Tensor g = Tensor::uniform(a[i].second.shape(), -1, 1, DType::F32, gen);
        if (step == 2 && a[i].second.numel() > 0) g.data<float>()[0] = std::nanf("");  // a non-finite step
        Tensor place(a[i].second.impl()->grad_home);
        place.copy_(g);
        a[i].second.set_grad(place);
        b[i].second.set_grad(g.clone());
      }
      const Tensor whole_clip = whole.grad_norm_and_clip_factor(10.0);
      const Tensor plain_clip = per_tensor.grad_norm_and_clip_factor(10.0);
      const std::vector<double> w = whole_clip.to_vector<double>(), p = plain_clip.to_vector<double>();
      if (step == 2) {
        EXPECT_TRUE(std::isnan(w[0]) && std::isnan(p[0]) && std::isnan(w[1]) && std::isnan(p[1]));
      } else {
        EXPECT_EQ(w, p) << "step " << step;
      }
      whole.step(0.01, whole_clip);
      per_tensor.step(0.01, plain_clip);
      EXPECT_EQ(whole.whole_buffer_updates(), 1);
      if (step == 2) {
        whole.forget_step();
        per_tensor.forget_step();
      }
      for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(bits(a[i].second), bits(b[i].second)) << "step " << step << " " << a[i].first;
    }
  }
}

// The LSTM's two biases get one gradient: b_hh never receives b_ih's flat place (the engine adds b_ih's
// other gradients there), whether b_hh has a place of its own or not (review of 2026-11-29).
TEST(FlatParameters, TheLstmsBiasesEachKeepTheirOwnGradient) {
  for (const bool hh_has_grad : {false, true}) {
    struct Biases : nn::Module {
      Biases() {
        Generator gen(5);
        ih = register_parameter("ih", Tensor::uniform({8}, -1, 1, DType::F32, gen));
        hh = register_parameter("hh", Tensor::uniform({8}, -1, 1, DType::F32, gen));
        w = register_parameter("w", Tensor::uniform({8, 2}, -1, 1, DType::F32, gen));
      }
      Tensor ih, hh, w;
    } flat, plain;
    flat.flatten_parameters();
    const Tensor gates = Tensor::uniform({3, 2, 8}, -1, 1, DType::F32, default_generator());
    for (Biases* m : {&flat, &plain}) {
      if (hh_has_grad) m->hh.set_grad(Tensor::zeros({8}));  // b_hh then gets no place offered
      const Tensor other_ih = sum(mul(m->ih, Tensor::full({8}, 100.0))), other_hh = sum(mul(m->hh, Tensor::full({8}, 3.0)));
      const LstmRecurrenceResult r = lstm_recurrence(gates, m->w, m->ih, m->hh, Tensor(), Tensor(), Tensor(), false);
      autograd::backward(other_hh + other_ih + sum(r.output));
    }
    EXPECT_EQ(bits(flat.ih.grad()), bits(plain.ih.grad())) << hh_has_grad;
    EXPECT_EQ(bits(flat.hh.grad()), bits(plain.hh.grad())) << hh_has_grad;
    EXPECT_EQ(bits(flat.w.grad()), bits(plain.w.grad())) << hh_has_grad;
  }
}

// The weight average of a flat model is laid out as its values: two dispatches an update whatever the
// number of tensors, an exchange without a copy, the same numbers as the per-tensor average.
TEST(FlatParameters, TheWeightAverageWorksOnWholeBuffers) {
  TwoLayers flat_model, plain_model;
  const auto flat = flat_model.flatten_parameters();
  nn::NamedTensors flat_params, plain_params;
  for (const auto& [name, p] : flat_model.named_parameters())
    if (p.dtype() == DType::F32) flat_params.emplace_back(name, p);  // one group: the f32 one
  for (const auto& [name, p] : plain_model.named_parameters())
    if (p.dtype() == DType::F32) plain_params.emplace_back(name, p);
  train::WeightEma flat_ema(flat_params, 0.7, 1, true, flat), plain_ema(plain_params, 0.7, 1, true);
  for (int64_t step = 1; step <= 4; ++step) {
    for (nn::NamedTensors* ps : {&flat_params, &plain_params})
      for (auto& [name, p] : *ps) p.mul_(1.25).add_(Tensor::full(p.shape(), 0.01 * static_cast<double>(step)));
    const uint64_t before = kernel_dispatches();
    flat_ema.update(step);
    EXPECT_EQ(kernel_dispatches() - before, step <= 1 ? 1u : 2u);
    plain_ema.update(step);
  }
  uint64_t before = kernel_dispatches();
  {
    const train::WeightEma::InModel a(&flat_ema);
    EXPECT_EQ(kernel_dispatches() - before, 0u) << "the exchange copies nothing";
    const train::WeightEma::InModel b(&plain_ema);
    for (size_t i = 0; i < flat_params.size(); ++i) {
      EXPECT_EQ(bits(flat_params[i].second), bits(plain_params[i].second)) << flat_params[i].first;
      EXPECT_TRUE(flat_params[i].second.shares_storage(flat->groups()[flat->find(flat_params[i].second)->group].values));
    }
    const nn::NamedTensors raw_flat = flat_ema.raw_weights(), raw_plain = plain_ema.raw_weights();
    for (size_t i = 0; i < raw_flat.size(); ++i) EXPECT_EQ(bits(raw_flat[i].second), bits(raw_plain[i].second));
  }
  for (size_t i = 0; i < flat_params.size(); ++i)
    EXPECT_EQ(bits(flat_params[i].second), bits(plain_params[i].second)) << "raw weights back";
}

// The update's scalars read from memory (a CUDA graph's replays: optim::StepScalarsSource): with
// set_scalars_in_memory, the whole-buffer update of a flat model and the per-tensor update of a plain one
// take the learning rate and bias corrections written there, whatever step() is handed, and so follow
// the optimiser that steps normally to the bit over three steps, weight-decay exclusions included.
TEST(FlatParameters, TheUpdateReadsTheStepsScalarsFromMemoryWhenGiven) {
  for (const bool flat : {true, false})
    for (const std::string kind : {"sgd", "adamw", "radam"}) {
      SCOPED_TRACE(std::string(flat ? "flat " : "per tensor ") + kind);
      TwoLayers normal_model, replayed_model;
      const auto normal_flat = flat ? normal_model.flatten_parameters() : nullptr;
      const auto replayed_flat = flat ? replayed_model.flatten_parameters() : nullptr;
      nn::NamedTensors normal_params = normal_model.named_parameters(), replayed_params = replayed_model.named_parameters();
      const optim::OptimizerOptions o = sru::testing::options_with_decay(kind, 0.01, {"bias"});
      optim::Optimizer normal(normal_params, o, normal_flat), replayed(replayed_params, o, replayed_flat);
      optim::StepScalars slot{};  // the memory a replay reads (device memory on a GPU)
      replayed.set_scalars_in_memory(&slot);
      for (int step = 1; step <= 3; ++step) {
        const double lr = 0.01 * step;
        const Tensor x = Tensor::uniform({4, 3}, -1, 1, DType::F32, default_generator());
        for (TwoLayers* m : {&normal_model, &replayed_model}) {
          autograd::backward(sum(m->forward(x)));
          autograd::backward(sum(m->scale * m->scale));
        }
        normal.step(lr, normal.grad_norm_and_clip_factor(0.5));
        slot = replayed.scalars_of_step(lr, replayed.steps() + 1);
        replayed.step(123.0, replayed.grad_norm_and_clip_factor(0.5));  // the argument is not what is used
        if (flat) EXPECT_EQ(replayed.whole_buffer_updates(), 2);
        normal.zero_grad();
        replayed.zero_grad();
      }
      for (size_t k = 0; k < normal_params.size(); ++k)
        EXPECT_EQ(replayed_params[k].second.to_vector<double>(), normal_params[k].second.to_vector<double>())
            << normal_params[k].first;
    }
}

// At bf16 precision a training step converts its flat float32 weights once (nn/weight_shadows.h) and the
// products' casts read those copies, where without them each weight is converted at its call: the same
// rounding of the same values, so the same steps to the bit, in fewer dispatches (per forward and
// backward, one conversion against one per cast weight: the SRU's W, the LSTM's two, the Transformer's
// projections and feed-forward layers with their biases, and the LM heads'); and the same as the plain
// layout's.
TEST(WeightShadows, Bf16TrainingTakesTheSameStepsToTheBitFromOneConversionAStep) {
  const sru::testing::PrecisionScope bf16(MatmulPrecision::Medium);
  for (const std::string type : {"sru", "lstm", "transformer"}) {
    const Trained at_calls = train_char_lm(type, "adam", true, 3, {}, false);
    const Trained shadowed = train_char_lm(type, "adam", true, 3);
    const Trained plain = train_char_lm(type, "adam", false, 3);
    EXPECT_EQ(at_calls.losses, shadowed.losses) << type;
    EXPECT_EQ(at_calls.weights, shadowed.weights) << type;
    EXPECT_EQ(plain.weights, shadowed.weights) << type;
    EXPECT_LT(shadowed.dispatches, at_calls.dispatches) << type << ": the copies were not used";
  }
}

// The copies and cast, one forward and backward at a time: the same output and gradients to the bit as
// the casts at the calls, in 3 fewer dispatches (the two Linears' weights and biases: 4 conversions,
// against one of the float32 group); the copy follows the weights at each refresh, and is not used
// for a buffer exchanged since (the weight average's exchange) or outside bf16 precision.
TEST(WeightShadows, CastReadsTheStepsCopyWithTheSameBitsGradientsAndFollowsTheWeights) {
  TwoLayers model;
  const auto flat = model.flatten_parameters();
  nn::WeightShadows shadows(flat);
  Generator gen(5);
  const Tensor x = Tensor::uniform({4, 3}, -1, 1, DType::F32, gen);
  const sru::testing::PrecisionScope bf16(MatmulPrecision::Medium);
  const auto pass = [&](bool shadowed) {
    for (const auto& [name, p] : model.named_parameters()) Tensor(p).set_grad(Tensor());
    const uint64_t before = kernel_dispatches();
    std::vector<std::vector<uint32_t>> out;
    {
      const nn::WeightShadows::Scope scope(shadowed ? &shadows : nullptr);
      const Tensor y = model.forward(x);
      autograd::backward(sum(y));
      out.push_back(bits(cast(y, DType::F32)));
    }
    for (const Tensor& p : {model.first->weight, model.first->bias, model.second->weight, model.second->bias})
      out.push_back(bits(p.grad()));
    return std::make_pair(out, kernel_dispatches() - before);
  };
  const auto [at_calls, dispatches_at_calls] = pass(false);
  const auto [from_copy, dispatches_from_copy] = pass(true);
  EXPECT_EQ(at_calls, from_copy);
  EXPECT_EQ(dispatches_at_calls - dispatches_from_copy, 3u);
  {
    autograd::NoGradGuard no_grad;
    model.first->weight.mul_(-2.0);  // between steps, as an update
  }
  EXPECT_NE(pass(true).first, from_copy) << "the refresh missed the new weights";
  EXPECT_EQ(pass(true).first, pass(false).first);
  const size_t f32_group = flat->find(model.first->weight)->group;
  Tensor other = flat->zeros_like(f32_group);
  flat->exchange_values(f32_group, other);
  EXPECT_FALSE(shadows.bf16_of(model.first->weight).defined()) << "a copy of the buffer exchanged away";
  flat->exchange_values(f32_group, other);
  EXPECT_TRUE(shadows.bf16_of(model.first->weight).defined());
  EXPECT_FALSE(shadows.bf16_of(x).defined()) << "not a parameter";
  EXPECT_FALSE(shadows.bf16_of(model.scale).defined()) << "a float64 parameter";
  const sru::testing::PrecisionScope fp32(MatmulPrecision::Highest);
  const uint64_t before = kernel_dispatches();
  { const nn::WeightShadows::Scope scope(&shadows); }
  EXPECT_EQ(kernel_dispatches(), before) << "a refresh outside bf16 precision";
}
