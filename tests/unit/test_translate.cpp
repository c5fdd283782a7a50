// The translate task (tasks/translate.h) on a small synthetic corpus (a word-for-word "translation" of
// generated sentences): training batches (fixed, every pair once per epoch, order per (seed, epoch)),
// a training step, greedy decoding through the incremental decoder against teacher-forced argmaxes of
// the whole hypothesis, beam 1 = greedy, the SentencePiece model through the checkpoint, refusals.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/safetensors.h"
#include "nn/checkpoint.h"
#include "ops/ops.h"
#include "tasks/registry.h"
#include "tasks/translate.h"
#include "testing.h"
#include "translate_testing.h"

using namespace sru;
using sru::testing::error_of;
using sru::testing::temp_file;
using sru::testing::tiny_translate;

TEST(Translate, FixedBatchesHoldEveryPairOnceInAnOrderOfSeedAndEpoch) {
  const config::Config cfg = tiny_translate("batches");
  Generator gen(cfg.train.seed);
  auto task = tasks::make_task(cfg, gen);
  auto& t = dynamic_cast<tasks::TranslateTask&>(*task);
  const int64_t steps = t.steps_per_epoch();
  ASSERT_GT(steps, 5);
  const auto order = [&](int64_t epoch) {
    t.start_epoch(epoch, 0);
    return t.steps_per_epoch();
  };
  EXPECT_EQ(order(0), steps);
  EXPECT_EQ(order(3), steps) << "the same batches every epoch";
  // One training step: a finite loss over the batch's target pieces, gradients everywhere.
  t.start_epoch(0, 0);
  const tasks::StepResult r = t.forward_step(0);
  EXPECT_TRUE(std::isfinite(r.loss.item<double>()));
  EXPECT_GT(r.tokens, 0);
  autograd::backward(r.loss);
  int64_t with_grad = 0;
  for (const auto& [name, p] : t.model().named_parameters()) with_grad += p.grad().defined();
  EXPECT_EQ(with_grad, static_cast<int64_t>(t.model().named_parameters().size()));
  EXPECT_NE(error_of([&] { t.forward_step(steps); }).find("past the end of the epoch"), std::string::npos);
}

TEST(Translate, GreedyDecodingIsTheArgmaxOfTheWholeHypothesisAndBeamOneAgrees) {
  for (const std::string ffn : {"relu", "sru"}) {
    const config::Config cfg = tiny_translate("greedy_" + ffn, {"model.ffn=" + ffn});
    Generator gen(cfg.train.seed);
    auto task = tasks::make_task(cfg, gen);
    auto& t = dynamic_cast<tasks::TranslateTask&>(*task);
    // Some training so that the argmaxes are not ties of an untrained model.
    t.start_epoch(0, 0);
    for (int64_t s = 0; s < 3; ++s) {
      t.model().zero_grad();
      autograd::backward(t.forward_step(s).loss);
    }
    const std::vector<std::string> sources = {"the man runs", "a big red dog sits on the park", "dog"};
    const auto greedy = t.translate(sources, false);
    ASSERT_EQ(greedy.size(), 3u);
    // Teacher-forced argmax over bos + the greedy pieces reproduces them and then eos (or the length cap).
    autograd::NoGradGuard no_grad;
    auto& model = dynamic_cast<nn::EncoderDecoder&>(t.model());
    model.eval();
    const auto& spm = *dynamic_cast<const tasks::TranslateTask&>(t).subword_model();
    for (size_t i = 0; i < sources.size(); ++i) {
      std::vector<int32_t> src = spm.encode(sources[i]);
      src.push_back(data::SentencePieceModel::kEos);
      const int64_t Ls = static_cast<int64_t>(src.size());
      const Tensor source = Tensor::from_vector(std::vector<int64_t>(src.begin(), src.end()), {Ls, 1});
      const Tensor source_pad = Tensor::zeros({Ls, 1}, DType::I32);
      const std::vector<int32_t> hyp = spm.encode(greedy[i]);
      std::vector<int64_t> target_in = {data::SentencePieceModel::kBos};
      target_in.insert(target_in.end(), hyp.begin(), hyp.end());
      const int64_t Lt = static_cast<int64_t>(target_in.size());
      const Tensor logits = model.decode(Tensor::from_vector(target_in, {Lt, 1}), Tensor::zeros({Lt, 1}, DType::I32),
                                         model.encode(source, source_pad), source_pad);
      const auto l = logits.to_vector<double>();
      const int64_t V = logits.size(1);
      for (int64_t p = 0; p + 1 < Lt; ++p) {
        const int64_t best = std::max_element(l.begin() + p * V, l.begin() + (p + 1) * V) - (l.begin() + p * V);
        EXPECT_EQ(best, target_in[p + 1]) << ffn << " sentence " << i << " position " << p;
      }
    }
    model.train(true);
    EXPECT_EQ(t.translate(sources, false), greedy) << "deterministic";
  }
}

TEST(Translate, TheSubwordModelTravelsInTheCheckpointAndBadConfigsAreRefused) {
  const config::Config cfg = tiny_translate("ckpt");
  Generator gen(cfg.train.seed);
  auto task = tasks::make_task(cfg, gen);
  const std::string path = sru::testing::tmp_dir() + "translate.safetensors";
  nn::NamedTensors all = task->model().state();
  for (auto& [n, t] : task->extra_state()) all.emplace_back(n, t);
  safetensors::save(path, all);
  const safetensors::File file = safetensors::load(path);
  Generator gen2(cfg.train.seed);
  auto restored = tasks::make_task(cfg, gen2, {/*load_data=*/false, &file});
  nn::load_state_from(restored->model(), file, path, {"task."});
  const std::vector<std::string> sources = {"the dog sits", "a man"};
  EXPECT_EQ(dynamic_cast<tasks::TranslateTask&>(*restored).translate(sources, true),
            dynamic_cast<tasks::TranslateTask&>(*task).translate(sources, true));
  Generator gen3(1);
  // (model.num_heads is the Transformer's key: with another encoder the config itself refuses it.)
  EXPECT_NE(error_of([&] { tasks::make_task(tiny_translate("bad1", {"model.type=sru"}), gen3); }).find("transformer"),
            std::string::npos);
  EXPECT_NE(error_of([&] { tasks::make_task(tiny_translate("bad2", {"model.causal=true"}), gen3); }).find("model.causal"),
            std::string::npos);
  const config::Config mismatch = tiny_translate("bad3", {"data.valid_target=" + temp_file("short.de", "xa\n")});
  EXPECT_NE(error_of([&] { tasks::make_task(mismatch, gen3); }).find("short.de"), std::string::npos);
}
