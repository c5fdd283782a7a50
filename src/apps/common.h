// Shared start-up for the command-line apps: version text, the machine/device summary, and running
// a main body so that any sru::Error becomes a clear message and a non-zero exit.
#pragma once

#include <functional>
#include <string>

namespace sru::apps {

std::string version_line(const char* app);
std::string device_summary();  // CPU threads, BLAS, CUDA devices (or why there are none)
// Runs body; sru::Error and std::exception are printed to stderr as "APP: error: ..." and give exit 1.
int run_main(const char* app, const std::function<int()>& body);

}  // namespace sru::apps
