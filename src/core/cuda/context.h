// Per-device CUDA state: one stream on which every kernel, copy, cuBLAS and cuDNN call of that device
// is queued (so work is ordered and freed memory can be reused at once), with the cuBLAS and cuDNN
// handles bound to it (cuBLASLt takes the stream per call). Created on first use, kept for the life of the process. Also the launch size and
// grid-stride loop every kernel uses. Include from .cu only.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

namespace sru::cuda {

struct DeviceContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t cublas_lt = nullptr;  // GEMMs with epilogues (the Linear's bias, ops/cuda/matmul.cu)
  cudnnHandle_t cudnn = nullptr;
  void* cublas_workspace = nullptr;  // kCublasWorkspaceBytes, cuBLAS's for the context's life
};
inline constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

// Makes `device` current for this thread and returns its context.
DeviceContext& context(int device);

constexpr int kBlock = 256;  // threads per block of the element-wise and row kernels

// for (i = global thread index; i < n; i += total threads)
#define SRU_GRID_STRIDE(i, n) \
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

// Grid size for a one-thread-per-element kernel over n elements (grid-stride loops cover the rest).
inline unsigned grid_for(long long n, unsigned block = kBlock) {
  const long long blocks = (n + block - 1) / block;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535LL * 16 ? 65535LL * 16 : blocks));
}

}  // namespace sru::cuda
