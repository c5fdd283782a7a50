// safetensors checkpoints: round trip, atomic writes, exact mismatch reports, and detection of
// truncated or corrupted files (nothing in the model changes when a load fails).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/safetensors.h"
#include "nn/checkpoint.h"
#include "nn/sru.h"
#include "testing.h"

using namespace sru;
using sru::testing::error_of;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() : path(fs::temp_directory_path() / ("srutrain-test-" + std::to_string(::getpid()) + "-" +
                                                ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

nn::SRUOptions small_options() {
  nn::SRUOptions o;
  o.input_size = 6;
  o.hidden_size = 4;
  o.num_layers = 2;
  o.bidirectional = true;
  return o;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST(Checkpoint, RoundTripRestoresEveryTensorAndMetadata) {
  TempDir dir;
  Generator g1(1), g2(2);
  nn::SRU saved(small_options(), g1), loaded(small_options(), g2);
  nn::save_state(saved, dir.file("m.safetensors"), {{"step", "42"}});
  const auto meta = nn::load_state(loaded, dir.file("m.safetensors"));
  EXPECT_EQ(meta.at("step"), "42");
  const auto a = saved.state(), b = loaded.state();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].second.to_vector<double>(), b[i].second.to_vector<double>()) << a[i].first;
  // Only the checkpoint is in the directory: the temporary file was renamed away.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()), 1);
}

TEST(Checkpoint, FileLayoutFollowsTheSafetensorsSpec) {
  TempDir dir;
  Tensor t = Tensor::from_vector(std::vector<float>{1.5f, -2.0f}, {2});
  safetensors::save(dir.file("t.safetensors"), {{"w", t}});
  const std::string bytes = read_bytes(dir.file("t.safetensors"));
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 8);
  EXPECT_NE(bytes.substr(8, n).find(R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})"), std::string::npos);
  float values[2];
  std::memcpy(values, bytes.data() + 8 + n, 8);
  EXPECT_EQ(values[0], 1.5f);
  EXPECT_EQ(values[1], -2.0f);
}

TEST(Checkpoint, MismatchedModelListsEveryProblemAndChangesNothing) {
  TempDir dir;
  nn::SRU saved(small_options());
  nn::save_state(saved, dir.file("m.safetensors"));
  nn::SRUOptions other = small_options();
  other.hidden_size = 5;
  other.num_layers = 3;
  nn::SRU target(other);
  const auto before = target.state()[0].second.to_vector<double>();
  const std::string m = error_of([&] { nn::load_state(target, dir.file("m.safetensors")); });
  EXPECT_NE(m.find("does not match the model"), std::string::npos) << m;
  EXPECT_NE(m.find("mismatch: rnn_lst.0.weight is (6, 32) f32 in the file, the model expects (6, 40) f32"),
            std::string::npos) << m;
  EXPECT_NE(m.find("missing: rnn_lst.2.weight"), std::string::npos) << m;
  EXPECT_EQ(target.state()[0].second.to_vector<double>(), before);

  nn::SRUOptions fewer = small_options();
  fewer.num_layers = 1;
  nn::SRU small(fewer);
  const std::string u = error_of([&] { nn::load_state(small, dir.file("m.safetensors")); });
  EXPECT_NE(u.find("unexpected: rnn_lst.1.weight"), std::string::npos) << u;
}

TEST(Checkpoint, TruncatedAndCorruptedFilesAreDetected) {
  TempDir dir;
  nn::SRU model(small_options());
  const std::string good = dir.file("good.safetensors");
  nn::save_state(model, good);
  const std::string bytes = read_bytes(good);

  write_bytes(dir.file("short.safetensors"), bytes.substr(0, 5));
  EXPECT_NE(error_of([&] { safetensors::load(dir.file("short.safetensors")); }).find("truncated"), std::string::npos);

  write_bytes(dir.file("cut.safetensors"), bytes.substr(0, bytes.size() - 10));
  const std::string cut = error_of([&] { safetensors::load(dir.file("cut.safetensors")); });
  EXPECT_NE(cut.find("outside the"), std::string::npos) << cut;

  std::string bad_header = bytes;
  bad_header[8] = '#';  // the header's opening brace
  write_bytes(dir.file("json.safetensors"), bad_header);
  EXPECT_NE(error_of([&] { safetensors::load(dir.file("json.safetensors")); }).find("not valid JSON"),
            std::string::npos);

  std::string huge = bytes;
  huge[7] = '\x7f';
  write_bytes(dir.file("huge.safetensors"), huge);
  EXPECT_NE(error_of([&] { safetensors::load(dir.file("huge.safetensors")); }).find("header size"), std::string::npos);

  write_bytes(dir.file("extra.safetensors"), bytes + "junk");
  EXPECT_NE(error_of([&] { safetensors::load(dir.file("extra.safetensors")); }).find("trailing bytes"),
            std::string::npos);

  EXPECT_NE(error_of([&] { safetensors::load(dir.file("absent.safetensors")); }).find("cannot open checkpoint"),
            std::string::npos);
}

TEST(Checkpoint, FailedWriteLeavesThePreviousFileIntact) {
  TempDir dir;
  nn::SRU model(small_options());
  const std::string path = dir.file("m.safetensors");
  nn::save_state(model, path);
  const std::string before = read_bytes(path);
  // Undefined names are rejected before anything touches the disk.
  EXPECT_NE(error_of([&] { safetensors::save(path, {{"__metadata__", Tensor::zeros({1})}}); }).find("invalid tensor name"),
            std::string::npos);
  // An unwritable directory fails cleanly.
  EXPECT_NE(error_of([&] { safetensors::save(dir.file("no/such/dir/m.safetensors"), model.state()); }).find("cannot create"),
            std::string::npos);
  EXPECT_EQ(read_bytes(path), before);
}
