// YAML configs: defaults, overrides, printing, and errors that name the file, line and key path.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "config/config.h"
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
                       {"train.lr=0.01", "model.type=lstm", "model.layer_norm=true"});
  EXPECT_EQ(c.data.path, "x.bin");
  EXPECT_EQ(c.data.bptt, 50);
  EXPECT_EQ(c.data.batch_size, 32) << "default";
  EXPECT_DOUBLE_EQ(c.train.lr, 0.01) << "--set wins over the file";
  EXPECT_DOUBLE_EQ(c.train.clip_grad_norm, 0.3);
  EXPECT_EQ(c.model.type, "lstm");
  EXPECT_TRUE(c.model.layer_norm);
}

TEST(Config, PrintedConfigParsesBackToTheSameValues) {
  auto c = parse(kMinimal + "model:\n  highway_bias: -3\n  dropout: 0.25\n", {"train.seed=7"});
  auto again = parse(c.to_yaml());
  EXPECT_EQ(again.to_yaml(), c.to_yaml());
  EXPECT_DOUBLE_EQ(again.model.highway_bias, -3.0);
  EXPECT_EQ(again.train.seed, 7);
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

TEST(Config, ReferenceListsEveryKey) {
  config::Config c;
  const std::string md = config::markdown_reference(c.schema());
  for (const auto& section : c.schema())
    for (const auto& f : section.fields)
      EXPECT_NE(md.find("`" + (section.name.empty() ? f.key : section.name + "." + f.key) + "`"), std::string::npos) << f.key;
}

#ifdef SRU_SOURCE_DIR
TEST(Config, DocsListEveryKeyWithItsDefault) {
  std::ifstream in(std::string(SRU_SOURCE_DIR) + "/docs/configs.md");
  ASSERT_TRUE(in.good()) << "docs/configs.md is missing";
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  config::Config c;
  const std::string reference = config::markdown_reference(c.schema());
  EXPECT_NE(doc.find(reference), std::string::npos)
      << "docs/configs.md is out of date: regenerate its reference with `build/srutrain --list-keys`";
}
#endif
