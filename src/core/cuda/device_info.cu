// CUDA device query: proves the toolchain (nvcc, cudart, cuBLAS, cuDNN all link) and tells the
// rest of the program whether a device is usable.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <optional>
#include <sstream>

#include "core/cuda/device_info.h"
#include "core/cuda_arch.h"

namespace sru::cuda {

namespace {

const CudaArchs& built_architectures() {
  static const CudaArchs archs = parse_cuda_architectures(SRU_CUDA_ARCHITECTURES);
  return archs;
}

// Device `index`'s properties, or none when they cannot be read (the error is cleared).
std::optional<cudaDeviceProp> properties(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  return prop;
}

// Why device `index` with these properties cannot run this build's kernels, or "".
std::string architecture_mismatch(int index, const cudaDeviceProp& prop) {
  if (cuda_image_for(built_architectures(), prop.major, prop.minor)) return "";
  const std::string cc = std::to_string(prop.major) + std::to_string(prop.minor);
  return "cuda:" + std::to_string(index) + " (" + prop.name + ", compute capability " + std::to_string(prop.major) +
         "." + std::to_string(prop.minor) + ") cannot run this build's CUDA code, which is for " +
         describe_cuda_architectures(built_architectures()) + ": rebuild with cmake -DCMAKE_CUDA_ARCHITECTURES=" + cc +
         " using a CUDA toolkit whose `nvcc --list-gpu-arch` lists compute_" + cc;
}

}  // namespace

bool built_with_cuda() { return true; }
std::string built_cuda_architectures() { return describe_cuda_architectures(built_architectures()); }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return 0;
  }
  return n;
}

int compute_capability(int index) {
  const auto prop = properties(index);
  return prop ? 10 * prop->major + prop->minor : 0;
}

std::string unavailable_reason(int index) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return cudaGetErrorString(err);
  }
  if (n == 0) return "no CUDA device found";
  if (index >= n) return "this machine has " + std::to_string(n) + " CUDA device(s)";
  const auto prop = properties(index);
  return prop ? architecture_mismatch(index, *prop) : "";  // unreadable: the runtime says why at the first call
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
  os << "CUDA code built for: " << built_cuda_architectures() << "\n";
  const int n = device_count();
  if (n == 0) {
    os << "no usable CUDA device: " << unavailable_reason() << "\n";
    return os.str();
  }
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, i);
    const auto image = cuda_image_for(built_architectures(), prop.major, prop.minor);
    os << "cuda:" << i << " " << prop.name << ", compute " << prop.major << "." << prop.minor << ", "
       << prop.totalGlobalMem / (1024 * 1024) << " MiB, " << prop.multiProcessorCount << " SMs, "
       << (image ? "runs " + *image : "CANNOT run this build: " + architecture_mismatch(i, prop)) << "\n";
  }
  return os.str();
}

}  // namespace sru::cuda
