// Error checks for CUDA runtime, cuBLAS and cuDNN calls and kernel launches: each failure becomes an
// sru::Error naming the call, the library's error string and file:line. Include from .cu files only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "core/error.h"

namespace sru::cuda::detail {
const char* cublas_status_name(cublasStatus_t status);
}  // namespace sru::cuda::detail

#define CUDA_CHECK(call)                                                                              \
  do {                                                                                                \
    const cudaError_t sru_err_ = (call);                                                              \
    if (sru_err_ != cudaSuccess) [[unlikely]]                                                         \
      SRU_FAIL("CUDA error in ", #call, ": ", cudaGetErrorString(sru_err_));                          \
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

// After every kernel launch: a bad launch configuration is reported here. Debug builds also wait for
// the kernel, so a fault inside it is reported at its launch site rather than at a later call.
#if defined(NDEBUG)
#define SRU_CUDA_LAUNCH_CHECK(name) CUDA_CHECK(cudaGetLastError())
#else
#define SRU_CUDA_LAUNCH_CHECK(name)                                \
  do {                                                             \
    CUDA_CHECK(cudaGetLastError());                                \
    CUDA_CHECK(cudaDeviceSynchronize());                           \
  } while (0)
#endif
