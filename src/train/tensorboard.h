// TensorBoard event files beside metrics.jsonl (log.tensorboard): every number of every metrics.jsonl
// record becomes a scalar, "train/{key}" for training lines and "{split}/{metric}" for evaluations,
// at the record's step, and at the end the final evaluations of summary.json (tensorboard_summary_scalars).
// No library: Debian packages none for the record format, which is small:
//   record = uint64 length, uint32 masked_crc32c(length bytes), data, uint32 masked_crc32c(data)
//   (little-endian; masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xa282ead8, c = CRC-32C of x)
// and each record's data is a protobuf `Event` (tensorflow/core/util/event.proto), of which we write
//   Event { double wall_time = 1; int64 step = 2; string file_version = 3 (first record: "brain.Event:2");
//           Summary summary = 5; SessionLog session_log = 7 }
//   Summary { repeated Value value = 1 }   Value { string tag = 1; float simple_value = 2 }
//   SessionLog { SessionStatus status = 1 (START = 1) }
// The test is the real reader (scripts/check_tensorboard.py, tensorboard's EventAccumulator).
// Each process that logs opens a new file, events.out.tfevents.{seconds}.{host}.{pid}, whose name sorts
// after the directory's earlier ones (the reader loads them in name order), and first writes SessionLog
// START at the first step it trains (a resumed run: the one after its checkpoint's; a new run: 0), so
// TensorBoard drops what earlier processes logged from there on (steps trained again). Every record is appended whole and
// flushed (append_to_file), as metrics.jsonl's lines.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace sru::train {

// CRC-32C (Castagnoli), as TFRecord frames use it.
uint32_t crc32c(std::string_view bytes);
// One framed record holding `data`.
std::string event_record(std::string_view data);
using Scalars = std::vector<std::pair<std::string, double>>;
// The scalars a metrics.jsonl record gives (tag, value); none for records without numbers.
Scalars tensorboard_scalars(const nlohmann::ordered_json& record);
// The scalars of summary.json's final evaluations: "final/{split}/{metric}" (the model last.safetensors
// holds), "best/{split}/{metric}" and "best/step" (best.safetensors'); logged at the run's last step.
Scalars tensorboard_summary_scalars(const nlohmann::ordered_json& summary);

class TensorBoardLog {
 public:
  // `dir`: the run directory (exists). resumed_at_step: a resumed run's checkpoint step, -1 for a new run.
  TensorBoardLog(std::string dir, int64_t resumed_at_step);
  // The scalars of one metrics.jsonl record (the file is created at the first call).
  void write(const nlohmann::ordered_json& record);
  // Scalars at `step` (none, or a step at or before a resumed run's checkpoint: nothing is written).
  void write(int64_t step, const Scalars& scalars);
  const std::string& path() const { return path_; }

 private:
  void open();
  std::string dir_, path_;
  int64_t resumed_at_step_;
};

}  // namespace sru::train
