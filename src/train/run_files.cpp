// Run-directory files, atomic writes, metrics log, stop signals.
#include "train/run_files.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "git_commit.inc"  // SRU_GIT_COMMIT, the source commit, written at every build by cmake/GitCommit.cmake

namespace sru::train {

namespace fs = std::filesystem;

void prepare_run_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  SRU_CHECK(!ec, "cannot create run directory '", dir, "': ", ec.message());
  const std::string probe = (fs::path(dir) / ".write-test").string();
  {
    std::ofstream out(probe);
    SRU_CHECK(out.good(), "run directory '", dir, "' is not writable");
  }
  fs::remove(probe, ec);
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    SRU_CHECK(out.good(), "cannot write '", tmp, "'");
    out << text;
    out.flush();
    SRU_CHECK(out.good(), "error while writing '", tmp, "'");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  SRU_CHECK(!ec, "cannot move '", tmp, "' to '", path, "': ", ec.message());
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SRU_CHECK(in.good(), "cannot read '", path, "'");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  std::ofstream out(path_, std::ios::app);
  SRU_CHECK(out.good(), "cannot open metrics log '", path_, "' for appending");
}

void MetricsLog::write(const nlohmann::ordered_json& record) {
  std::ofstream out(path_, std::ios::app);
  out << record.dump() << "\n";
  out.flush();
  SRU_CHECK(out.good(), "error while appending to '", path_, "'");
}

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
