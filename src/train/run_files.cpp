// Run-directory files, atomic writes, metrics log, stop signals.
#include "train/run_files.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/file_io.h"
#include "git_commit.inc"  // SRU_GIT_COMMIT, the source commit, written at every build by cmake/GitCommit.cmake

namespace sru::train {

namespace fs = std::filesystem;

void prepare_run_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  SRU_CHECK(!ec, "cannot create run directory '", dir, "': ", ec.message());
  SRU_CHECK(::access(dir.c_str(), W_OK) == 0, "run directory '", dir, "' is not writable: ", std::strerror(errno));
}

void write_file_atomic(const std::string& path, const std::string& text) { write_file_atomically(path, {text}); }

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SRU_CHECK(in.good(), "cannot read '", path, "'");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

MetricsLog::MetricsLog(const std::string& path) : path_(path) {}

void MetricsLog::write(const nlohmann::ordered_json& record) { append_to_file(path_, record.dump() + "\n"); }

namespace {
std::atomic<bool> stop_flag{false};
extern "C" void on_stop_signal(int) { stop_flag.store(true); }
}  // namespace

void install_stop_handlers() {
  stop_flag.store(false);
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

bool stop_requested() { return stop_flag.load(); }

std::string build_commit() { return SRU_GIT_COMMIT; }

}  // namespace sru::train
