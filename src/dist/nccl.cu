// NCCL sums of CUDA buffers for the MPI communicator (builds with CUDA, MPI and NCCL; dist/backends.h).
// One NCCL communicator per process, on its device (cuda:local_rank), created from a unique id that
// rank 0 makes and MPI broadcasts. The sums run on a stream of their own: start() records an event on
// the device's stream (after the packing of the bucket), makes the NCCL stream wait for it, queues
// ncclAllReduce in place, and records `done`; wait_all() makes the device's stream wait for `done`.
// So the sums of early buckets overlap the rest of the backward pass, and nothing waits on the host.
// The buckets live for the whole run (dist/grad_sync.h), so the caching allocator's single-stream
// reuse rule (core/cuda/allocator.cu) holds: nothing the NCCL stream touches is ever freed under it.
// await() polls an event and ncclCommGetAsyncError until the device is done or the caller's deadline
// passes; it then aborts the NCCL communicator, so a lost rank ends the job instead of hanging it.
//
// Status: compiled here; NOT RUN yet — it needs a machine with two or more GPUs (scripts/gpu_check.sh
// runs the data-parallel tests with NCCL when it finds more than one).
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "dist/backends.h"

#define NCCL_CHECK(call)                                                                      \
  do {                                                                                        \
    const ncclResult_t sru_nccl_ = (call);                                                    \
    if (sru_nccl_ != ncclSuccess) [[unlikely]]                                                \
      SRU_FAIL("NCCL error in ", #call, ": ", ncclGetErrorString(sru_nccl_));                 \
  } while (0)

namespace sru::dist::detail {

namespace {

ncclDataType_t nccl_type(DType dtype) {
  if (dtype == DType::F32) return ncclFloat32;
  if (dtype == DType::F64) return ncclFloat64;
  SRU_FAIL("NCCL: sums of ", dtype_name(dtype), " tensors are not supported (f32 or f64)");
}

class NcclReducer final : public DeviceReducer {
 public:
  NcclReducer(int device, int rank, int size, const std::string& unique_id) : device_(device) {
    SRU_CHECK(unique_id.size() == sizeof(ncclUniqueId), "NCCL: the unique id has ", unique_id.size(),
              " bytes, expected ", sizeof(ncclUniqueId));
    ncclUniqueId id;
    std::memcpy(&id, unique_id.data(), sizeof(id));
    stream_ = cuda::context(device).stream;  // also makes `device` current
    CUDA_CHECK(cudaStreamCreateWithFlags(&nccl_stream_, cudaStreamNonBlocking));
    for (cudaEvent_t* e : {&ready_, &done_, &idle_}) CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    NCCL_CHECK(ncclCommInitRank(&comm_, size, id, rank));
  }

  ~NcclReducer() override {
    if (comm_) ncclCommDestroy(comm_);
    for (cudaEvent_t e : {ready_, done_, idle_}) cudaEventDestroy(e);
    cudaStreamDestroy(nccl_stream_);
  }

  void start(const Tensor& buffer) override {
    SRU_CHECK(comm_, "NCCL: the communicator was aborted");
    SRU_CHECK(buffer.device().index == device_, "NCCL: a buffer on ", buffer.device().str(), ", this rank uses cuda:",
              device_);
    cuda::context(device_);
    CUDA_CHECK(cudaEventRecord(ready_, stream_));
    CUDA_CHECK(cudaStreamWaitEvent(nccl_stream_, ready_, 0));
    NCCL_CHECK(ncclAllReduce(buffer.data_ptr(), buffer.data_ptr(), static_cast<size_t>(buffer.numel()),
                             nccl_type(buffer.dtype()), ncclSum, comm_, nccl_stream_));
    CUDA_CHECK(cudaEventRecord(done_, nccl_stream_));
    started_ = true;
  }

  void wait_all() override {
    if (!started_) return;
    cuda::context(device_);
    CUDA_CHECK(cudaStreamWaitEvent(stream_, done_, 0));  // the last sum; the NCCL stream runs them in order
    started_ = false;
  }

  bool await(const std::function<bool()>& keep_waiting, std::string& error) override {
    cuda::context(device_);
    CUDA_CHECK(cudaEventRecord(idle_, stream_));
    for (;;) {
      const cudaError_t query = cudaEventQuery(idle_);
      if (query == cudaSuccess) return true;
      if (query != cudaErrorNotReady) {
        error = cudaGetErrorString(query);
        return false;
      }
      ncclResult_t async = ncclSuccess;
      if (comm_ && ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress) {
        error = ncclGetErrorString(async);
        abort_comm();
        return false;
      }
      if (!keep_waiting()) {
        abort_comm();
        return false;
      }
    }
  }

 private:
  void abort_comm() {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  int device_ = 0;
  cudaStream_t stream_ = nullptr, nccl_stream_ = nullptr;
  cudaEvent_t ready_ = nullptr, done_ = nullptr, idle_ = nullptr;
  ncclComm_t comm_ = nullptr;
  bool started_ = false;
};

}  // namespace

std::string nccl_unique_id() {
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));
  return std::string(reinterpret_cast<const char*>(&id), sizeof(id));
}

std::unique_ptr<DeviceReducer> make_nccl_reducer(int device, int rank, int size, const std::string& unique_id) {
  return std::make_unique<NcclReducer>(device, rank, size, unique_id);
}

}  // namespace sru::dist::detail
