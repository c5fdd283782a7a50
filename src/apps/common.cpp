// Start-up helpers shared by srutrain, srueval and srubench.
#include "apps/common.h"

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "core/cuda/device_info.h"
#include "core/error.h"
#include "core/parallel.h"
#include "dist/communicator.h"

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
  os << "CPU: " << num_threads() << " threads (at most; fewer while other processes keep cores busy)\n" << cuda::describe();
  os << "Data parallel: " << dist::describe_build() << "\n";
  return os.str();
}

int run_main(const char* app, const std::function<int()>& body) {
  // A write past the file-size limit (ulimit -f) then fails with EFBIG, reported with the file's name
  // like any other write error, instead of killing the process silently with SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
  // MPI when a launcher (mpirun, srun) started this process; ended when main returns.
  const dist::World world;
  dist::Communicator& comm = dist::world();
  if (comm.size() > 1 && !comm.is_root()) {
    // Rank 0 reports for the job; the others say only what goes wrong, naming themselves.
    spdlog::set_level(spdlog::level::warn);
    spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] [rank " + std::to_string(comm.rank()) + "] %v");
  }
  const std::string who = comm.size() > 1 ? std::string(app) + ": rank " + std::to_string(comm.rank()) : app;
  try {
    dist::check_launch();
    return body();
  } catch (const CLI::ParseError&) {
    throw;  // handled by the app's CLI11 parser
  } catch (const dist::CollectiveError& e) {
    // Every rank raises it at the same point: rank 0 prints it, and the others end by themselves.
    if (comm.is_root()) print_error(app, e);
    return 1;
  } catch (const Error& e) {
    print_error(who.c_str(), e);
  } catch (const std::exception& e) {
    std::cerr << who << ": error: " << e.what() << "\n";
  }
  // This rank alone failed: the others may be waiting for it in a collective call, so end them all.
  if (comm.size() > 1) comm.abort(1);
  return 1;
}

void print_error(const char* who, const Error& e) {
  const char* debug = std::getenv("SRU_DEBUG");
  const bool show_location = debug && *debug && std::string(debug) != "0" && !e.location().empty();
  std::cerr << who << ": error: " << e.what() << (show_location ? " (at " + e.location() + ")" : "") << "\n";
}

}  // namespace sru::apps
