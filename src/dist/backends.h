// The backends behind dist::world(), for dist/communicator.cpp: MPI from dist/mpi.cpp in builds with
// MPI, or the stand-ins of dist/no_mpi.cpp; NCCL's device sums from dist/nccl.cu in builds with NCCL.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "dist/communicator.h"

namespace sru::dist::detail {

// MPI_Init and the job's communicator (nullptr in builds without MPI); finish_mpi() ends it.
std::unique_ptr<Communicator> start_mpi();
void finish_mpi();
// "Open MPI v4.1.4, ..." (empty without MPI).
std::string mpi_library_version();

// In-place sums of CUDA buffers on one device (NCCL), queued on a stream of their own that is ordered
// after the device's stream, so they overlap the kernels queued after them.
class DeviceReducer {
 public:
  virtual ~DeviceReducer() = default;
  virtual void start(const Tensor& buffer) = 0;
  // Makes the device's stream wait for every started sum.
  virtual void wait_all() = 0;
  // Waits until the device's stream has run everything queued so far: true; false on an asynchronous
  // error (described in `error`) or when keep_waiting() says the time is up (then the reducer is aborted).
  virtual bool await(const std::function<bool()>& keep_waiting, std::string& error) = 0;
};

// NCCL (builds with NCCL only): a unique id made on one rank, and a reducer for the ranks sharing it.
std::string nccl_unique_id();
std::unique_ptr<DeviceReducer> make_nccl_reducer(int device, int rank, int size, const std::string& unique_id);

}  // namespace sru::dist::detail
