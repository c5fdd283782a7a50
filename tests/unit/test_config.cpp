// YAML configs: defaults, overrides, printing, and errors that name the file, line and key path.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "config/config.h"
#include "nn/encoder.h"
#include "nn/sru.h"
#include "tasks/lm.h"
#include "tasks/registry.h"
#include "tasks/translate.h"
#include "testing.h"

using namespace sru;
using sru::testing::error_of;

namespace {
config::Config parse(const std::string& text, std::vector<std::string> overrides = {}) {
  return config::parse_config(text, "exp.yaml", overrides);
}
const std::string kMinimal = "data:\n  path: some.txt\n";
}  // namespace

TEST(Config, DefaultsFileValuesAndOverrides) {
  const auto c = parse("task: charlm\ndata:\n  path: x.bin\n  bptt: 50\ntrain:\n  lr: 3e-4\n  clip_grad_norm: 0.3\n",
                       {"train.lr=0.01", "model.layer_norm=true"});
  EXPECT_EQ(c.data.path, "x.bin");
  EXPECT_EQ(c.task_as<tasks::LMOptions>().bptt, 50);
  EXPECT_EQ(c.data.batch_size, 32) << "default";
  EXPECT_DOUBLE_EQ(c.train.lr, 0.01) << "--set wins over the file";
  EXPECT_DOUBLE_EQ(c.train.clip_grad_norm, 0.3);
  EXPECT_EQ(c.model.type, "sru");
  EXPECT_TRUE(c.encoder_as<nn::SRUOptions>().layer_norm);
  EXPECT_EQ(parse(kMinimal, {"model.type=lstm"}).model.type, "lstm") << "--set chooses the encoder too";
}

TEST(Config, PrintedConfigParsesBackToTheSameValues) {
  auto c = parse(kMinimal + "model:\n  highway_bias: -3\n  dropout: 0.25\n", {"train.seed=7"});
  auto again = parse(c.to_yaml());
  EXPECT_EQ(again.to_yaml(), c.to_yaml());
  EXPECT_DOUBLE_EQ(again.encoder_as<nn::SRUOptions>().highway_bias, -3.0);
  EXPECT_EQ(again.train.seed, 7);
  // Only the keys that apply are printed: an LSTM classify run has no SRU or char-LM keys.
  auto lstm = parse("task: classify\n" + kMinimal + "model:\n  type: lstm\n");
  const std::string yaml = lstm.to_yaml();
  EXPECT_EQ(yaml.find("highway_bias"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("bptt"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("folds: 10"), std::string::npos) << yaml;
}

// A list key (train.weight_decay_exclude): a YAML sequence, block or flow, or one string; --set as
// [a, b], a,b or one item (a leading * is no YAML alias there), [] or nothing to empty it; printed as a
// flow sequence that parses back; a mapping or a nested list is refused naming the key.
TEST(Config, ListKeysReadSequencesOverridesAndPrintBack) {
  using List = std::vector<std::string>;
  EXPECT_EQ(parse(kMinimal + "train:\n  weight_decay_exclude: [bias, layer_norm]\n").train.weight_decay_exclude,
            (List{"bias", "layer_norm"}));
  EXPECT_EQ(parse(kMinimal + "train:\n  weight_decay_exclude:\n    - bias\n    - \"*x\"\n").train.weight_decay_exclude,
            (List{"bias", "*x"}));
  EXPECT_EQ(parse(kMinimal + "train:\n  weight_decay_exclude: bias\n").train.weight_decay_exclude, List{"bias"});
  EXPECT_EQ(parse(kMinimal, {"train.weight_decay_exclude=[bias, 'layer_norm']"}).train.weight_decay_exclude,
            (List{"bias", "layer_norm"}));
  EXPECT_EQ(parse(kMinimal, {"train.weight_decay_exclude=*.bias,norm"}).train.weight_decay_exclude,
            (List{"*.bias", "norm"}));
  EXPECT_TRUE(parse(kMinimal + "train:\n  weight_decay_exclude: [bias]\n", {"train.weight_decay_exclude=[]"})
                  .train.weight_decay_exclude.empty());
  EXPECT_TRUE(parse(kMinimal, {"train.weight_decay_exclude="}).train.weight_decay_exclude.empty());
  auto c = parse(kMinimal, {"train.weight_decay_exclude=bias,a \"quoted\" one"});
  const std::string yaml = c.to_yaml();
  EXPECT_NE(yaml.find("weight_decay_exclude: [\"bias\", \"a \\\"quoted\\\" one\"]"), std::string::npos) << yaml;
  EXPECT_EQ(parse(yaml).train.weight_decay_exclude, c.train.weight_decay_exclude);
  EXPECT_NE(error_of([] { parse(kMinimal + "train:\n  weight_decay_exclude: {a: 1}\n"); })
                .find("exp.yaml:4: train.weight_decay_exclude: expected a list of strings, got a mapping"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse(kMinimal + "train:\n  weight_decay_exclude: [[a]]\n"); })
                .find("train.weight_decay_exclude: every item must be a string, got a list"),
            std::string::npos);
  // A block sequence's bad item is named by its own line.
  EXPECT_NE(error_of([] { parse(kMinimal + "train:\n  weight_decay_exclude:\n    - bias\n    - {a: 1}\n"); })
                .find("exp.yaml:6: train.weight_decay_exclude: every item must be a string, got a mapping"),
            std::string::npos);
}

// Integer lists (data.length_buckets): YAML sequences or one number, --set KEY=[a, b] or a,b, printed
// back as a list that reads again; items that are not integers, or below the key's minimum, refused by key.
TEST(Config, IntListKeysReadSequencesOverridesAndPrintBack) {
  using List = std::vector<int64_t>;
  const std::string translate = "task: translate\n" + kMinimal;
  const auto buckets = [](config::Config c) { return c.task_as<tasks::TranslateOptions>().length_buckets; };
  EXPECT_EQ(buckets(parse(translate + "  length_buckets: [16, 24, 32]\n")), (List{16, 24, 32}));
  EXPECT_EQ(buckets(parse(translate + "  length_buckets:\n    - 8\n    - 64\n")), (List{8, 64}));
  EXPECT_EQ(buckets(parse(translate + "  length_buckets: 40\n")), List{40});
  EXPECT_EQ(buckets(parse(translate, {"data.length_buckets=[16, 32]"})), (List{16, 32}));
  EXPECT_EQ(buckets(parse(translate, {"data.length_buckets=8,16"})), (List{8, 16}));
  EXPECT_TRUE(buckets(parse(translate + "  length_buckets: [8]\n", {"data.length_buckets=[]"})).empty());
  config::Config c = parse(translate, {"data.length_buckets=8, 12,16"});
  EXPECT_NE(c.to_yaml().find("length_buckets: [8, 12, 16]"), std::string::npos) << c.to_yaml();
  EXPECT_EQ(buckets(parse(c.to_yaml())), (List{8, 12, 16}));
  EXPECT_NE(error_of([&] { parse(translate + "  length_buckets: [8, 1.5]\n"); })
                .find("exp.yaml:4: data.length_buckets: expected an integer, got '1.5'"),
            std::string::npos);
  // A block sequence's bad item is named by its own line, not the key's.
  EXPECT_NE(error_of([&] { parse(translate + "  length_buckets:\n    - 8\n    - 16\n    - x\n"); })
                .find("exp.yaml:7: data.length_buckets: expected an integer, got 'x'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse(translate + "  length_buckets:\n    - 8\n    - [16]\n"); })
                .find("exp.yaml:6: data.length_buckets: every item must be an integer, got a list"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse(translate, {"data.length_buckets=8,x"}); })
                .find("--set data.length_buckets=8,x: data.length_buckets: expected an integer, got 'x'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse(translate + "  length_buckets: [8, 0]\n"); })
                .find("data.length_buckets: 0 is out of range: must be >= 1 (each item)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse(translate + "  length_buckets: {a: 1}\n"); })
                .find("data.length_buckets: expected a list of integers, got a mapping"),
            std::string::npos);
}

TEST(Config, TaskAndEncoderNamesComeFromTheRegistriesWithSuggestions) {
  // The choices listed are exactly the registered names, in registration order.
  std::string task_names, encoder_names;
  for (const auto& spec : tasks::task_specs()) task_names += (task_names.empty() ? "" : ", ") + spec.name;
  for (const auto& spec : nn::encoders()) encoder_names += (encoder_names.empty() ? "" : ", ") + spec.name;
  EXPECT_EQ(task_names.rfind("charlm, wordlm, classify", 0), 0u) << task_names;
  EXPECT_EQ(encoder_names.rfind("sru, lstm", 0), 0u) << encoder_names;
  EXPECT_NE(encoder_names.find("embed-sru, super-embed-sru"), std::string::npos) << encoder_names;
  const std::string t = error_of([] { parse("task: clasify\n" + kMinimal); });
  EXPECT_NE(t.find("exp.yaml:1: task: 'clasify' is not one of: " + task_names + " (did you mean 'classify'?)"),
            std::string::npos) << t;
  const std::string e = error_of([] { parse(kMinimal + "model:\n  type: lstn\n"); });
  EXPECT_NE(e.find("exp.yaml:4: model.type: 'lstn' is not one of: " + encoder_names + " (did you mean 'lstm'?)"),
            std::string::npos) << e;
  const std::string m = error_of([] { parse(kMinimal, {"train.precision=int8"}); });
  EXPECT_NE(m.find("--set train.precision=int8: train.precision: 'int8' is not one of: fp32, tf32, bf16"),
            std::string::npos) << m;
  const std::string o = error_of([] { parse(kMinimal, {"model.type=gru"}); });
  EXPECT_NE(o.find("--set model.type=gru: model.type: 'gru' is not one of: " + encoder_names), std::string::npos) << o;
  // The registries themselves refuse unknown names the same way.
  EXPECT_NE(error_of([] { tasks::find_task("charml"); }).find("did you mean 'charlm'?"), std::string::npos);
  EXPECT_NE(error_of([] { nn::find_encoder("srru"); }).find("did you mean 'sru'?"), std::string::npos);
  // ... and every registered name is a choice of the config.
  for (const auto& spec : tasks::task_specs()) EXPECT_NO_THROW(config::Config::defaults(spec.name, "sru"));
  for (const auto& spec : nn::encoders()) EXPECT_NO_THROW(config::Config::defaults("charlm", spec.name));
}

TEST(Config, KeysOfAnotherTaskOrEncoderDoNotApply) {
  const std::string a = error_of([] { parse(kMinimal + "  folds: 5\n"); });
  EXPECT_NE(a.find("exp.yaml:3: data.folds does not apply here: it is a key of task classify"), std::string::npos) << a;
  const std::string b = error_of([] { parse("task: classify\n" + kMinimal + "  bptt: 35\n"); });
  EXPECT_NE(b.find("data.bptt does not apply here: it is a key of task charlm / wordlm"), std::string::npos) << b;
  const std::string c = error_of([] { parse(kMinimal + "model:\n  type: lstm\n  highway_bias: -2\n"); });
  EXPECT_NE(c.find("exp.yaml:5: model.highway_bias does not apply here: it is a key of encoder sru / embed-sru / "
                   "super-embed-sru / srupp (remove it, or choose that encoder)"), std::string::npos) << c;
  const std::string d = error_of([] { parse(kMinimal, {"model.type=lstm", "model.rescale=true"}); });
  EXPECT_NE(d.find("--set model.rescale=true: model.rescale does not apply here: it is a key of encoder sru"),
            std::string::npos) << d;
  const std::string e = error_of([] { parse("task: wordlm\n" + kMinimal); });
  EXPECT_NE(e.find("exp.yaml: data.valid_path: is required"), std::string::npos) << e;
}

TEST(Config, StoredConfigsOfOlderVersionsSkipKeysOfOtherPlugins) {
  // Before the registries every stored config listed every key: an LSTM char-LM run saved SRU and
  // classify keys too. Checkpoints and run directories of those versions still load.
  const std::string old = kMinimal + "  bptt: 20\n  folds: 10\n  vectors: \"\"\nmodel:\n  type: lstm\n  highway_bias: 0.0\n";
  EXPECT_THROW(parse(old), Error);
  const auto c = config::parse_config(old, "ckpt (embedded config)", {}, config::Origin::Stored);
  EXPECT_EQ(c.model.type, "lstm");
  EXPECT_EQ(c.task_as<tasks::LMOptions>().bptt, 20);
  EXPECT_NE(error_of([&] { config::parse_config(old, "ckpt", {"data.folds=3"}, config::Origin::Stored); })
                .find("data.folds does not apply here"), std::string::npos) << "--set stays strict";
}

// train.matmul_precision (PyTorch's names) became train.precision: configs and stored run directories
// that set the old key still read, each value translated; a value the old key never took is refused
// naming both keys; the printed config has the new key only.
TEST(Config, RenamedMatmulPrecisionReadsAsPrecision) {
  EXPECT_EQ(parse(kMinimal).train.precision, "fp32");
  const std::vector<std::pair<std::string, std::string>> pairs = {{"highest", "fp32"}, {"high", "tf32"}, {"medium", "bf16"}};
  for (const auto& [old_value, new_value] : pairs) {
    EXPECT_EQ(parse(kMinimal + "train:\n  matmul_precision: " + old_value + "\n").train.precision, new_value);
    EXPECT_EQ(parse(kMinimal, {"train.matmul_precision=" + old_value}).train.precision, new_value);
  }
  EXPECT_EQ(parse(kMinimal + "train:\n  matmul_precision: high\n", {"train.precision=bf16"}).train.precision, "bf16")
      << "--set wins over the file, whichever name the file used";
  const std::string bad = error_of([] { parse(kMinimal + "train:\n  matmul_precision: bf16\n"); });
  EXPECT_NE(bad.find("exp.yaml:4: train.matmul_precision (now train.precision): 'bf16' is not one of: highest, "
                     "high, medium"), std::string::npos) << bad;
  const std::string printed = parse(kMinimal + "train:\n  matmul_precision: medium\n").to_yaml();
  EXPECT_NE(printed.find("precision: \"bf16\""), std::string::npos) << printed;
  EXPECT_EQ(printed.find("matmul_precision"), std::string::npos) << printed;
}

TEST(Config, UnknownKeySuggestsTheClosestWithFileAndLine) {
  const std::string m = error_of([] { parse("data:\n  path: a\ntrain:\n  lr: 1\n  wieght_decay: 0.1\n"); });
  EXPECT_NE(m.find("exp.yaml:5: unknown key 'train.wieght_decay' (did you mean 'train.weight_decay'?)"),
            std::string::npos) << m;
  const std::string s = error_of([] { parse("modle:\n  type: sru\n"); });
  EXPECT_NE(s.find("exp.yaml:1: unknown section 'modle' (did you mean 'model'?)"), std::string::npos) << s;
}

TEST(Config, WrongTypesAreErrorsNamingTheKey) {
  EXPECT_NE(error_of([] { parse(kMinimal + "train:\n  lr: fast\n"); }).find("exp.yaml:4: train.lr: expected a number, got 'fast'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse(kMinimal + "data:\n  bptt: 2.5\n"); }).find("expected an integer, got '2.5'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse(kMinimal + "model:\n  rescale: maybe\n"); }).find("model.rescale: expected true or false"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse(kMinimal + "model:\n  hidden_size: [1, 2]\n"); }).find("expected an integer, got a list"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse("data: 3\n"); }).find("section 'data' must be a mapping"), std::string::npos);
}

TEST(Config, RangeErrorsNameFileAndLineOrTheOverride) {
  EXPECT_NE(error_of([] { parse(kMinimal + "model:\n  hidden_size: -4\n"); }).find("exp.yaml:4: model.hidden_size: -4 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse(kMinimal, {"model.dropout=2"}); }).find("--set model.dropout=2: model.dropout: 2 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse("model:\n  type: sru\n"); }).find("exp.yaml: data.path: is required"), std::string::npos);
}

TEST(Config, OutOfRangeAndChoicesAndRequired) {
  EXPECT_NE(error_of([] { parse(kMinimal + "model:\n  hidden_size: -4\n"); }).find("model.hidden_size: -4 is out of range: must be >= 1"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse(kMinimal + "model:\n  dropout: 1.5\n"); }).find("model.dropout: 1.5 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse(kMinimal + "train:\n  optimizer: adamm\n"); }).find("(did you mean 'adam'?)"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse("model:\n  type: sru\n"); }).find("data.path: is required"), std::string::npos);
  EXPECT_NE(error_of([] { parse(kMinimal, {"train.device=gpu"}); }).find("unknown device 'gpu'"), std::string::npos);
  // The step's keys of the lean-step work: graphs kept, the squad task's padding, the attention kernel.
  EXPECT_NE(error_of([] { parse(kMinimal, {"train.cuda_graphs_max=0"}); })
                .find("train.cuda_graphs_max: 0 is out of range: must be >= 1"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse("task: squad\n" + kMinimal + "  valid_path: v.json\n", {"data.pad_to_multiple=-1"}); })
                .find("data.pad_to_multiple: -1 is out of range: must be >= 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse(kMinimal, {"train.attention=flash"}); })
                .find("train.attention: 'flash' is not one of: auto, composed, fused"),
            std::string::npos);
}

TEST(Config, MalformedYamlAndBadOverrides) {
  const std::string m = error_of([] { parse("data:\n  path: [unclosed\n"); });
  EXPECT_NE(m.find("exp.yaml:"), std::string::npos) << m;
  EXPECT_NE(m.find("malformed YAML"), std::string::npos) << m;
  EXPECT_NE(error_of([] { parse(kMinimal, {"train.lr"}); }).find("expected KEY=VALUE"), std::string::npos);
  EXPECT_NE(error_of([] { parse(kMinimal, {"train.lrr=1"}); }).find("did you mean 'train.lr'?"), std::string::npos);
  EXPECT_NE(error_of([] { config::load_config("/no/such/file.yaml"); }).find("cannot read config file '/no/such/file.yaml'"),
            std::string::npos);
}

TEST(Config, ReferenceListsEveryKeyOfEveryTaskAndEncoder) {
  const std::string md = config::reference();
  for (const auto& task : tasks::task_specs()) {
    EXPECT_NE(md.find("## Task `" + task.name + "`"), std::string::npos) << task.name;
    for (const auto& encoder : nn::encoders()) {
      EXPECT_NE(md.find("## Encoder `" + encoder.name + "`"), std::string::npos) << encoder.name;
      auto c = config::Config::defaults(task.name, encoder.name);
      for (const auto& section : c.schema())
        for (const auto& f : section.fields)
          EXPECT_NE(md.find("`" + (section.name.empty() ? f.key : section.name + "." + f.key) + "`"), std::string::npos)
              << f.key;
    }
  }
}

#ifdef SRU_SOURCE_DIR
TEST(Config, DocsListEveryKeyWithItsDefault) {
  std::ifstream in(std::string(SRU_SOURCE_DIR) + "/docs/configs.md");
  ASSERT_TRUE(in.good()) << "docs/configs.md is missing";
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(doc.find(config::reference()), std::string::npos)
      << "docs/configs.md is out of date: regenerate its reference with `build/srutrain --list-keys`";
}
#endif

TEST(Config, TranslateDecoderNamesTheRegistryAndRefusesOthersByKey) {
  const std::string text = "task: translate\n" + kMinimal + "model:\n  type: transformer\n";
  EXPECT_EQ(parse(text, {"model.decoder=ssru-transformer"}).task_as<tasks::TranslateOptions>().decoder,
            "ssru-transformer");
  const std::string message = error_of([&] { parse(text, {"model.decoder=lstm"}); });
  EXPECT_NE(message.find("model.decoder"), std::string::npos) << message;
  EXPECT_NE(message.find("ssru-transformer"), std::string::npos) << message;
}
