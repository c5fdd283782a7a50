// Shared by the fuzz targets: the input as a temporary file (for parsers that read paths), splitting
// an input into parts, and the one rule every target checks — bad input may only raise sru::Error
// (which the apps print as a message naming the file); any other exception, crash, leak or sanitizer
// report is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace sru::fuzz {

// A file holding `bytes`, named with `suffix` (the readers choose plain / .gz / .zip by the name),
// removed when this goes.
class TempFile {
 public:
  TempFile(std::string_view bytes, const std::string& suffix) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/sru_fuzz_" + std::to_string(::getpid()) + "_" +
            std::to_string(counter_++) + suffix;
    std::ofstream(path_, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

// The input cut at NUL bytes into at most `max_parts` parts (the last keeps the rest).
inline std::vector<std::string> split_parts(const uint8_t* data, size_t size, size_t max_parts) {
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && parts.size() < max_parts) parts.emplace_back();
    else parts.back().push_back(static_cast<char>(data[i]));
  }
  return parts;
}

// Runs fn; sru::Error is the expected way to refuse input. Anything else aborts, so libFuzzer keeps the
// input as a crash.
template <typename Fn>
void expect_only_sru_errors(Fn fn) {
  try {
    fn();
  } catch (const sru::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: an exception other than sru::Error escaped: %s\n", e.what());
    std::abort();
  }
}

}  // namespace sru::fuzz
