// Error checks for CUDA runtime, cuBLAS and cuDNN calls and kernel launches: each failure becomes an
// sru::Error naming the call, the library's error string and file:line. Include from .cu files only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "core/error.h"

namespace sru::cuda::detail {
const char* cublas_status_name(cublasStatus_t status);
// Throws sru::Error for a failed CUDA runtime call: the call, the error string, file:line, and for the
// errors a faulting kernel leaves behind (illegal address, launch failure, ...), which kernel was
// launched last — kernels run asynchronously, so the fault surfaces at a later, unrelated call.
[[noreturn]] void fail_cuda(const char* call, cudaError_t err, const char* file, int line);
// After a launch: records `kernel` as the last one launched and reports a failed launch by its name.
// Builds without NDEBUG also wait for the kernel (not counted as a host wait), so that a fault is
// reported at its own launch.
void check_launch(const char* kernel, const char* file, int line);
// The kernel most recently launched by this process ("none" before the first).
const char* last_kernel();
// Whether err is one of the errors that a faulting kernel leaves in the context (sticky).
bool is_sticky_error(cudaError_t err);
}  // namespace sru::cuda::detail

#define CUDA_CHECK(call)                                                                              \
  do {                                                                                                \
    const cudaError_t sru_err_ = (call);                                                              \
    if (sru_err_ != cudaSuccess) [[unlikely]]                                                         \
      ::sru::cuda::detail::fail_cuda(#call, sru_err_, __FILE__, __LINE__);                            \
  } while (0)

#define CUBLAS_CHECK(call)                                                                            \
  do {                                                                                                \
    const cublasStatus_t sru_status_ = (call);                                                        \
    if (sru_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                            \
      SRU_FAIL("cuBLAS error in ", #call, ": ", ::sru::cuda::detail::cublas_status_name(sru_status_)); \
  } while (0)

#define CUDNN_CHECK(call)                                                                             \
  do {                                                                                                \
    const cudnnStatus_t sru_status_ = (call);                                                         \
    if (sru_status_ != CUDNN_STATUS_SUCCESS) [[unlikely]]                                             \
      SRU_FAIL("cuDNN error in ", #call, ": ", cudnnGetErrorString(sru_status_));                     \
  } while (0)

// After every kernel launch, with the kernel's name (see check_launch).
#define SRU_CUDA_LAUNCH_CHECK(name) ::sru::cuda::detail::check_launch((name), __FILE__, __LINE__)
