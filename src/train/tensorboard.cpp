// TensorBoard event files (see tensorboard.h).
#include "train/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/file_io.h"

namespace sru::train {

namespace fs = std::filesystem;

namespace {

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;  // reflected Castagnoli polynomial
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

void put_le32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_le64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
// Protobuf wire format: a field's key is (number << 3) | wire type (0 varint, 1 64-bit, 2 bytes, 5 32-bit).
void put_bytes_field(std::string& out, int number, std::string_view bytes) {
  put_varint(out, (static_cast<uint64_t>(number) << 3) | 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Event { wall_time = 1, step = 2 } followed by the caller's fields.
std::string event_head(double wall_time, int64_t step) {
  std::string e;
  put_varint(e, (1 << 3) | 1);
  uint64_t bits;
  std::memcpy(&bits, &wall_time, sizeof(bits));
  put_le64(e, bits);
  put_varint(e, (2 << 3) | 0);
  put_varint(e, static_cast<uint64_t>(step));
  return e;
}

std::string scalar_summary(const std::vector<std::pair<std::string, double>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    put_bytes_field(v, 1, tag);
    put_varint(v, (2 << 3) | 5);
    const float f = static_cast<float>(value);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    put_le32(v, bits);
    put_bytes_field(summary, 1, v);
  }
  return summary;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The seconds field of an events file's name (events.out.tfevents.SECONDS.…), or -1.
long long name_seconds(const std::string& name) {
  const std::string prefix = "events.out.tfevents.";
  if (name.rfind(prefix, 0) != 0) return -1;
  const size_t end = name.find('.', prefix.size());
  const std::string digits = name.substr(prefix.size(), end == std::string::npos ? std::string::npos : end - prefix.size());
  if (digits.empty() || digits.size() > 12 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  uint32_t c = 0xffffffffu;
  for (const unsigned char b : bytes) c = kCrc32cTable[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

std::string event_record(std::string_view data) {
  std::string out, length;
  put_le64(length, data.size());
  out += length;
  put_le32(out, masked_crc32c(length));
  out.append(data);
  put_le32(out, masked_crc32c(data));
  return out;
}

Scalars tensorboard_scalars(const nlohmann::ordered_json& record) {
  Scalars out;
  const std::string prefix = record.contains("split") && record["split"].is_string() ? record["split"].get<std::string>()
                                                                                    : "train";
  const auto add = [&](const nlohmann::ordered_json& object) {
    for (const auto& [key, value] : object.items())
      if (key != "step" && value.is_number()) out.emplace_back(prefix + "/" + key, value.get<double>());
  };
  add(record);
  if (record.contains("eval") && record["eval"].is_object()) add(record["eval"]);
  return out;
}

Scalars tensorboard_summary_scalars(const nlohmann::ordered_json& summary) {
  Scalars out;
  const auto add_splits = [&](const nlohmann::ordered_json& per_split, const std::string& prefix) {
    for (const auto& [split, metrics] : per_split.items())
      if (metrics.is_object())
        for (const auto& [key, value] : metrics.items())
          if (value.is_number()) out.emplace_back(prefix + "/" + split + "/" + key, value.get<double>());
  };
  if (summary.contains("final") && summary["final"].is_object()) add_splits(summary["final"], "final");
  if (summary.contains("best") && summary["best"].is_object()) {
    const nlohmann::ordered_json& best = summary["best"];
    if (best.contains("step") && best["step"].is_number()) out.emplace_back("best/step", best["step"].get<double>());
    add_splits(best, "best");
  }
  return out;
}

TensorBoardLog::TensorBoardLog(std::string dir, int64_t resumed_at_step)
    : dir_(std::move(dir)), resumed_at_step_(resumed_at_step) {}

void TensorBoardLog::open() {
  // A name that sorts after every events file already there (the reader takes them in name order):
  // the seconds of now, or one more than the latest name's when a run restarts within its second.
  const double now = now_seconds();
  long long seconds = static_cast<long long>(now);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const long long s = name_seconds(entry.path().filename().string());
    if (s >= seconds) seconds = s + 1;
  }
  char host[256] = "localhost";
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "localhost");
  host[sizeof(host) - 1] = '\0';
  path_ = (fs::path(dir_) / ("events.out.tfevents." + std::to_string(seconds) + "." + host + "." +
                             std::to_string(::getpid()))).string();
  std::string first = event_head(now, 0);
  put_bytes_field(first, 3, "brain.Event:2");
  // SessionLog { status: START } at the first step this process trains: the reader drops what earlier
  // files logged from there on (a resumed run's steps after its checkpoint; everything, for a run started
  // afresh in a directory an earlier attempt logged to before it wrote a checkpoint).
  std::string start = event_head(now, resumed_at_step_ + 1), session;
  put_varint(session, (1 << 3) | 0);
  put_varint(session, 1);
  put_bytes_field(start, 7, session);
  append_to_file(path_, event_record(first) + event_record(start));
}

void TensorBoardLog::write(const nlohmann::ordered_json& record) {
  if (record.contains("step") && record["step"].is_number_integer())
    write(record["step"].get<int64_t>(), tensorboard_scalars(record));
}

void TensorBoardLog::write(int64_t step, const Scalars& scalars) {
  // Steps up to a resumed run's checkpoint are the earlier process's: its events there stay (this
  // file's SessionLog START purges only later steps), so the same scalars again would show twice, e.g.
  // the final evaluations of a finished run resumed with nothing left to train.
  if (scalars.empty() || step <= resumed_at_step_) return;
  if (path_.empty()) open();
  std::string event = event_head(now_seconds(), step);
  put_bytes_field(event, 5, scalar_summary(scalars));
  append_to_file(path_, event_record(event));
}

}  // namespace sru::train
