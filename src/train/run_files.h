// The files of a run directory: config.yaml (resolved config), metrics.jsonl (one JSON object per
// line, appended and flushed as training goes), last/best.safetensors, summary.json; and the
// signal handling that lets Ctrl-C end a run with a saved checkpoint.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace sru::train {

// Creates `dir` (and parents) and checks that files can be written in it; throws naming it.
void prepare_run_dir(const std::string& dir);
// Writes text to path atomically (temporary file, then rename).
void write_file_atomic(const std::string& path, const std::string& text);
std::string read_text_file(const std::string& path);

class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path);  // appends
  void write(const nlohmann::ordered_json& record);

 private:
  std::string path_;
};

// SIGINT/SIGTERM set a flag instead of killing the process; the trainer polls it between steps.
void install_stop_handlers();
bool stop_requested();

// The commit this binary was built from ("unknown" outside a git checkout).
std::string build_commit();

}  // namespace sru::train
