// Start-up helpers shared by srutrain, srueval and srubench.
#include "apps/common.h"

#include <cstdlib>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "core/cuda/device_info.h"
#include "core/error.h"
#include "core/parallel.h"

namespace sru::apps {

void add_debug_flag(CLI::App& cli) {
  cli.add_flag_callback("--debug", [] { ::setenv("SRU_DEBUG", "1", 1); },
                        "Also print where in the source an error was raised (same as SRU_DEBUG=1)");
}

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
    const char* debug = std::getenv("SRU_DEBUG");
    const bool show_location = debug && *debug && std::string(debug) != "0" && !e.location().empty();
    std::cerr << app << ": error: " << e.what() << (show_location ? " (at " + e.location() + ")" : "") << "\n";
  } catch (const std::exception& e) {
    std::cerr << app << ": error: " << e.what() << "\n";
  }
  return 1;
}

}  // namespace sru::apps
