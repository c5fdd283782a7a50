// srueval: Evaluate a saved srutrain checkpoint.
// At this stage of the project it reports the build and the devices; the training and evaluation
// commands arrive with the trainer (see README.md, "Status").
#include <iostream>

#include <CLI/CLI.hpp>

#include "apps/common.h"
#include "core/parallel.h"

int main(int argc, char** argv) {
  CLI::App cli{"srueval: Evaluate a saved srutrain checkpoint."};
  cli.set_version_flag("--version", sru::apps::version_line("srueval"));
  bool device_info = false;
  int threads = 0;
  cli.add_flag("--device-info", device_info, "Print the CPU thread count and the CUDA devices, then exit");
  cli.add_option("--threads", threads, "CPU threads for kernels and BLAS (0 = all cores)")->check(CLI::NonNegativeNumber);
  CLI11_PARSE(cli, argc, argv);
  return sru::apps::run_main("srueval", [&] {
    sru::set_num_threads(threads);
    if (device_info) {
      std::cout << sru::apps::device_summary();
      return 0;
    }
    std::cout << cli.help();
    return 0;
  });
}
