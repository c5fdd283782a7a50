// CUDA device query: proves the toolchain (nvcc, cudart, cuBLAS, cuDNN all link) and tells the
// rest of the program whether a device is usable.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <sstream>

#include "core/cuda/device_info.h"

namespace sru::cuda {

bool built_with_cuda() { return true; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return 0;
  }
  return n;
}

std::string unavailable_reason(int index) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return cudaGetErrorString(err);
  }
  if (n == 0) return "no CUDA device found";
  return index < n ? "" : "this machine has " + std::to_string(n) + " CUDA device(s)";
}

std::string describe() {
  std::ostringstream os;
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  int cublas_major = 0, cublas_minor = 0;
  cublasGetProperty(MAJOR_VERSION, &cublas_major);
  cublasGetProperty(MINOR_VERSION, &cublas_minor);
  os << "CUDA runtime " << runtime / 1000 << "." << (runtime % 1000) / 10 << ", cuBLAS " << cublas_major << "."
     << cublas_minor << ", cuDNN " << cudnnGetVersion() << "\n";
  const int n = device_count();
  if (n == 0) {
    os << "no usable CUDA device: " << unavailable_reason() << "\n";
    return os.str();
  }
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, i);
    os << "cuda:" << i << " " << prop.name << ", compute " << prop.major << "." << prop.minor << ", "
       << prop.totalGlobalMem / (1024 * 1024) << " MiB, " << prop.multiProcessorCount << " SMs\n";
  }
  return os.str();
}

}  // namespace sru::cuda
