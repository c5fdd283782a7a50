// Builds without MPI: no MPI communicator exists, so dist::world() stays the single process.
#include "dist/backends.h"

namespace sru::dist::detail {

std::unique_ptr<Communicator> start_mpi() { return nullptr; }
void finish_mpi() {}
std::string mpi_library_version() { return ""; }

}  // namespace sru::dist::detail
