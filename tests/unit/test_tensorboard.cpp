// TensorBoard events files (train/tensorboard.h): CRC-32C against its published check values, the
// record framing, and which scalars a metrics.jsonl record gives. The reader-side test is
// scripts/check_tensorboard.py (ctest tensorboard_matches_metrics), with TensorBoard itself.
#include <gtest/gtest.h>

#include <cstring>

#include "train/tensorboard.h"

using namespace sru;

TEST(TensorBoard, Crc32cCheckValues) {
  EXPECT_EQ(train::crc32c("123456789"), 0xe3069283u);  // the CRC catalogue's check value for CRC-32C
  EXPECT_EQ(train::crc32c(""), 0u);
  EXPECT_EQ(train::crc32c(std::string(32, '\0')), 0x8a9136aau);  // RFC 3720 B.4: 32 bytes of zeros
  EXPECT_EQ(train::crc32c(std::string(32, '\xff')), 0x62a8ab43u);  // and of ones
}

TEST(TensorBoard, RecordFraming) {
  const std::string r = train::event_record("abc");
  ASSERT_EQ(r.size(), 8u + 4u + 3u + 4u);
  uint64_t length;
  std::memcpy(&length, r.data(), 8);
  EXPECT_EQ(length, 3u);
  const auto masked = [](uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; };
  uint32_t crc_of_length, crc_of_data;
  std::memcpy(&crc_of_length, r.data() + 8, 4);
  std::memcpy(&crc_of_data, r.data() + 15, 4);
  EXPECT_EQ(crc_of_length, masked(train::crc32c(r.substr(0, 8))));
  EXPECT_EQ(r.substr(12, 3), "abc");
  EXPECT_EQ(crc_of_data, masked(train::crc32c("abc")));
}

TEST(TensorBoard, ScalarsOfMetricsRecords) {
  const auto training = train::tensorboard_scalars(
      nlohmann::ordered_json::parse(R"({"step": 50, "epoch": 0.5, "loss": 2.25, "lr": 0.001})"));
  ASSERT_EQ(training.size(), 3u);
  EXPECT_EQ(training[0], (std::pair<std::string, double>{"train/epoch", 0.5}));
  EXPECT_EQ(training[1], (std::pair<std::string, double>{"train/loss", 2.25}));
  const auto evaluation = train::tensorboard_scalars(nlohmann::ordered_json::parse(
      R"({"step": 100, "epoch": 1.0, "split": "valid", "eval": {"bpc": 1.5, "chars": 4096}})"));
  ASSERT_EQ(evaluation.size(), 3u);
  EXPECT_EQ(evaluation[0].first, "valid/epoch");
  EXPECT_EQ(evaluation[1], (std::pair<std::string, double>{"valid/bpc", 1.5}));
  EXPECT_EQ(evaluation[2], (std::pair<std::string, double>{"valid/chars", 4096.0}));
  EXPECT_TRUE(train::tensorboard_scalars(nlohmann::ordered_json::parse(
                  R"({"step": 7, "event": "skipped", "what": "loss"})")).empty());
}

TEST(TensorBoard, ScalarsOfTheSummary) {
  const auto scalars = train::tensorboard_summary_scalars(nlohmann::ordered_json::parse(R"({
      "task": "lm", "stopped": "max_steps", "steps": 12, "epochs": 0.5,
      "final": {"valid": {"bpc": 2.5, "chars": 4096}, "test": {"bpc": 2.75}},
      "best": {"step": 8, "metric": "bpc", "higher_is_better": false, "valid": {"bpc": 2.25}, "test": {"bpc": 2.5}},
      "parameters": 1000, "wall_time_s": 3.5})"));
  const train::Scalars want = {{"final/valid/bpc", 2.5}, {"final/valid/chars", 4096.0}, {"final/test/bpc", 2.75},
                               {"best/step", 8.0},        {"best/valid/bpc", 2.25},     {"best/test/bpc", 2.5}};
  EXPECT_EQ(scalars, want);
  // A run without best.safetensors (no evaluation ran) has final evaluations only.
  const auto final_only = train::tensorboard_summary_scalars(
      nlohmann::ordered_json::parse(R"({"steps": 3, "final": {"valid": {"accuracy": 0.5}}})"));
  EXPECT_EQ(final_only, (train::Scalars{{"final/valid/accuracy", 0.5}}));
}
