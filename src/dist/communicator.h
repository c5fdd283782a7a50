// Data-parallel communication: the processes (ranks) of one training job and the collective calls the
// trainer and the tasks need — in-place sums of gradient buckets (started in order, so that they can
// overlap the backward pass, then waited for), sums of host numbers, gathering and broadcasting bytes.
//
// Backends: SingleProcess (world size 1, every collective the identity; always built, and what a
// process not started by a launcher gets) and MPI (dist/mpi.cpp, in builds with MPI, for processes
// started by mpirun or srun), which sums CUDA buffers with NCCL when built with it (dist/nccl.cu) and
// through host memory otherwise. The trainer never names a backend: it calls this interface.
//
// Every wait of the MPI backend has a deadline (set_timeout): when a rank stops responding, the others
// end the job with a message naming it instead of hanging (see dist/mpi.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"

namespace sru::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;  // among the ranks on this machine
  virtual int local_size() const = 0;
  virtual std::string backend() const = 0;  // "single", "mpi", "mpi+nccl"
  virtual std::string host() const = 0;
  // Seconds any collective may wait for the other ranks before the job is ended.
  virtual void set_timeout(double seconds) = 0;
  // Collective: sums of buffers on `device` will follow (NCCL for a CUDA device when built).
  virtual void use_device(Device device) = 0;

  // Starts summing `buffer` (f32 or f64) over the ranks, in place. Every rank must start the same sums
  // in the same order; wait_all() completes every started one (for NCCL by ordering the device stream
  // after them, without a host wait).
  virtual void start_all_reduce_sum(const Tensor& buffer, const std::string& what) = 0;
  virtual void wait_all() = 0;
  // Before the host reads values that depend on started sums on `device`: waits for the device within
  // the timeout, so that a lost rank ends the job instead of hanging the read (NCCL; a no-op otherwise).
  virtual void await_device(Device) {}
  // Blocking host collectives.
  virtual void all_reduce_sum(std::vector<double>& values, const std::string& what) = 0;
  virtual std::vector<std::string> all_gather(const std::string& bytes, const std::string& what) = 0;
  virtual void broadcast(std::string& bytes, int root, const std::string& what) = 0;
  // Ends every rank of the job at once with exit status `code` (the caller has printed why).
  [[noreturn]] virtual void abort(int code) = 0;

  bool is_root() const { return rank() == 0; }
  void all_reduce_sum(const Tensor& buffer, const std::string& what) {
    start_all_reduce_sum(buffer, what);
    wait_all();
  }
};

// One process alone: rank 0 of 1; sums, gathers and broadcasts return their input.
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  std::string backend() const override { return "single"; }
  std::string host() const override;
  void set_timeout(double) override {}
  void use_device(Device) override {}
  void start_all_reduce_sum(const Tensor&, const std::string&) override {}
  void wait_all() override {}
  void all_reduce_sum(std::vector<double>&, const std::string&) override {}
  std::vector<std::string> all_gather(const std::string& bytes, const std::string&) override { return {bytes}; }
  void broadcast(std::string&, int, const std::string&) override {}
  [[noreturn]] void abort(int code) override;
};

// The job this process belongs to. Single-process unless a World (below) started MPI.
Communicator& world();
// A single-process communicator (for code that must not communicate, e.g. srueval).
Communicator& single_process();

// Starts the job's communication for the life of main(): MPI when this build has it and a launcher
// started the process (mpirun / srun set OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK; SRU_DIST=single
// never starts MPI, SRU_DIST=mpi always does), ended (MPI_Finalize) by the destructor.
class World {
 public:
  World();
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;
};

// Refuses a wrong launch, where a launcher started this process as one of several (OMPI_COMM_WORLD_SIZE
// or PMI_SIZE > 1) but world() is a job of another size: a build without MPI, or an mpirun of another
// MPI library than the one linked. Each process would otherwise train alone and write the same run
// directory. SRU_DIST=single turns the check off (and MPI with it).
void check_launch();

// What this build can do and what this process runs: "MPI built (Open MPI 4.1.4), NCCL built; this
// process: rank 0 of 2 (mpi)".
std::string describe_build();
bool built_with_mpi();
bool built_with_nccl();

// An error every rank of the job raises at the same point with the same message (a bad config, a check
// of identical values, a decision rank 0 made for all): the apps print it on rank 0 only, and no rank
// needs to end the others, which stop by themselves.
class CollectiveError : public Error {
 public:
  using Error::Error;
};
// Throws CollectiveError(message) when cond is false: for checks whose inputs every rank shares.
void check_collective(bool cond, const std::string& message);

// Runs fn on rank 0 and returns its result on every rank; an sru::Error fn throws there is thrown on
// every rank as a CollectiveError with its message. For reading the run directory, which rank 0 owns.
std::string on_root(Communicator& comm, const std::function<std::string()>& fn, const std::string& what);

// The contiguous share of `rows` rows (a batch, a set of streams) that `rank` of `ranks` computes: the
// first rows % ranks ranks take one row more. Empty when rows < ranks and rank >= rows.
struct Rows {
  int64_t first = 0, count = 0;
};
Rows share_of(int64_t rows, int rank, int ranks);

// Every rank's `local` (CPU, same dtype, shapes equal but for dim `dim`) concatenated along `dim` in
// rank order.
Tensor all_gather(Communicator& comm, const Tensor& local, int dim, const std::string& what);

// Every rank's `local` strings, concatenated in rank order (sent as length-prefixed records, so any
// bytes survive).
std::vector<std::string> all_gather(Communicator& comm, const std::vector<std::string>& local, const std::string& what);

}  // namespace sru::dist
