// The single-process communicator, the process's world, and the helpers built on any communicator.
#include "dist/communicator.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "autograd/node.h"
#include "dist/backends.h"
#include "ops/shape_ops.h"

namespace sru::dist {

namespace {

std::unique_ptr<Communicator>& mpi_world() {
  static std::unique_ptr<Communicator> world;
  return world;
}

bool launched_by_mpi() {
  const char* forced = std::getenv("SRU_DIST");
  if (forced && std::string(forced) == "single") return false;
  if (forced && std::string(forced) == "mpi") return true;
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(name)) return true;
  return false;
}

}  // namespace

std::string SingleProcess::host() const {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

void SingleProcess::abort(int code) { std::exit(code); }

Communicator& single_process() {
  static SingleProcess single;
  return single;
}

Communicator& world() {
  if (mpi_world()) return *mpi_world();
  return single_process();
}

World::World() {
  if (launched_by_mpi()) mpi_world() = detail::start_mpi();
}

World::~World() {
  if (!mpi_world()) return;
  mpi_world().reset();
  detail::finish_mpi();
}

void check_launch() {
  const char* forced = std::getenv("SRU_DIST");
  if (forced && std::string(forced) == "single") return;
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* value = std::getenv(name);
    if (!value) continue;
    const int launched = std::atoi(value);
    const int size = world().size();
    if (launched <= 1 || size == launched) return;
    SRU_FAIL("a launcher started this process as one of ", launched, " (", name, "=", value, "), but ",
             built_with_mpi() ? "MPI here sees a job of " + std::to_string(size) +
                                    ": the launcher belongs to another MPI library than the one this program was "
                                    "built with (" + detail::mpi_library_version() + "); use its mpirun"
                              : std::string("this program was built without MPI (install libopenmpi-dev openmpi-bin "
                                            "and rebuild, cmake -DSRU_MPI=ON)"),
             "; each process would train alone and write the same run directory");
  }
}

bool built_with_mpi() {
#if defined(SRU_WITH_MPI)
  return true;
#else
  return false;
#endif
}

bool built_with_nccl() {
#if defined(SRU_WITH_NCCL)
  return true;
#else
  return false;
#endif
}

std::string describe_build() {
  std::string mpi = built_with_mpi() ? "MPI built (" + detail::mpi_library_version() + ")" : "MPI not built";
  const std::string nccl = built_with_nccl() ? "NCCL built (untested on a multi-GPU machine)" : "NCCL not built";
  const Communicator& w = world();
  return mpi + ", " + nccl + "; this process: rank " + std::to_string(w.rank()) + " of " + std::to_string(w.size()) +
         " (" + w.backend() + ")";
}

void check_collective(bool cond, const std::string& message) {
  if (!cond) throw CollectiveError(message);
}

std::string on_root(Communicator& comm, const std::function<std::string()>& fn, const std::string& what) {
  if (comm.size() == 1) return fn();
  // The result + '0', or location + '\n' + the error message + '1' (a trailing flag: GCC 12 warns,
  // wrongly, of overlapping copies when a string is built behind a one-character prefix).
  std::string payload;
  if (comm.is_root()) {
    try {
      payload = fn();
      payload.push_back('0');
    } catch (const Error& e) {
      payload = e.location() + "\n" + e.what();
      payload.push_back('1');
    } catch (const std::exception& e) {
      payload = "\n" + std::string(e.what());
      payload.push_back('1');
    }
  }
  comm.broadcast(payload, 0, what);
  SRU_CHECK(!payload.empty(), "on_root: nothing came from rank 0 for ", what);
  const char flag = payload.back();
  payload.pop_back();
  if (flag == '0') return payload;
  const size_t newline = payload.find('\n');
  throw CollectiveError(payload.substr(newline + 1), payload.substr(0, newline));
}

Rows share_of(int64_t rows, int rank, int ranks) {
  const int64_t base = rows / ranks, extra = rows % ranks;
  return {rank * base + std::min<int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}

std::vector<std::string> all_gather(Communicator& comm, const std::vector<std::string>& local, const std::string& what) {
  if (comm.size() == 1) return local;
  std::string mine;
  for (const std::string& field : local) mine += std::to_string(field.size()) + ":" + field;
  std::vector<std::string> out;
  for (const std::string& part : comm.all_gather(mine, what)) {
    for (size_t at = 0; at < part.size();) {
      const size_t colon = part.find(':', at);
      SRU_CHECK(colon != std::string::npos, "dist::all_gather: ", what, ": a record without its length");
      const size_t n = std::stoul(part.substr(at, colon - at));
      out.push_back(part.substr(colon + 1, n));
      at = colon + 1 + n;
    }
  }
  return out;
}

Tensor all_gather(Communicator& comm, const Tensor& local, int dim, const std::string& what) {
  SRU_CHECK(local.device().is_cpu(), "dist::all_gather: ", what, " must be on the CPU, got ", local.device().str());
  if (comm.size() == 1) return local;
  const Tensor t = local.detach().clone();  // contiguous, own storage
  const std::vector<std::string> pieces =
      comm.all_gather(std::string(static_cast<const char*>(t.data_ptr()), t.nbytes()), what);
  const int64_t others = local.size(dim) > 0 ? local.numel() / local.size(dim) : 0;
  std::vector<Tensor> parts;
  for (size_t r = 0; r < pieces.size(); ++r) {
    const int64_t row_bytes = others * static_cast<int64_t>(dtype_size(local.dtype()));
    SRU_CHECK(row_bytes > 0 && static_cast<int64_t>(pieces[r].size()) % row_bytes == 0, "dist::all_gather: ", what,
              ": rank ", r, " sent ", pieces[r].size(), " bytes, not whole rows of ", shape_str(local.shape()));
    Shape shape = local.shape();
    shape[dim] = static_cast<int64_t>(pieces[r].size()) / row_bytes;
    Tensor part = Tensor::empty(shape, local.dtype());
    std::memcpy(part.data_ptr(), pieces[r].data(), pieces[r].size());
    parts.push_back(part);
  }
  autograd::NoGradGuard no_grad;
  return concat(parts, dim);
}

}  // namespace sru::dist
