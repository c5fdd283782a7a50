// Shared start-up for the command-line apps: version text, the machine/device summary, and running
// a main body so that any sru::Error becomes a clear message and a non-zero exit.
#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;
}

namespace sru {
class Error;
}

namespace sru::apps {

// --debug: error messages also name the source location of the failed check (SRU_DEBUG=1).
void add_debug_flag(CLI::App& cli);

std::string version_line(const char* app);
std::string device_summary();  // CPU threads, BLAS, CUDA devices (or why there are none), MPI/NCCL
// Runs body inside the job's communication (dist::World: MPI when mpirun or srun started the process);
// sru::Error and std::exception are printed to stderr as "APP: error: ..." and give exit 1 (with
// "(at FILE:LINE)" of the check in debug mode). With several ranks, a CollectiveError is printed by
// rank 0 only; any other error names its rank and ends every rank (the others could be waiting for it).
int run_main(const char* app, const std::function<int()>& body);
// "WHO: error: MESSAGE" on stderr (with the location in debug mode).
void print_error(const char* who, const Error& e);

}  // namespace sru::apps
