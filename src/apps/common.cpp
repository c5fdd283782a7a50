// Start-up helpers shared by srutrain, srueval and srubench.
#include "apps/common.h"

#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "core/cuda/device_info.h"
#include "core/error.h"
#include "core/parallel.h"

namespace sru::apps {

std::string version_line(const char* app) {
  return std::string(app) + " (srutrain " SRU_VERSION ")";
}

std::string device_summary() {
  std::ostringstream os;
  os << "CPU: " << num_threads() << " OpenMP threads (OpenBLAS shares them)\n" << cuda::describe();
  return os.str();
}

int run_main(const char* app, const std::function<int()>& body) {
  try {
    return body();
  } catch (const CLI::ParseError&) {
    throw;  // handled by the app's CLI11 parser
  } catch (const Error& e) {
    std::cerr << app << ": error: " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << app << ": error: " << e.what() << "\n";
  }
  return 1;
}

}  // namespace sru::apps
