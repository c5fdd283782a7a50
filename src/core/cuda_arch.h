// Which GPUs a build's CUDA code runs on. A build holds machine code (SASS) for some architectures
// and PTX for some (CMAKE_CUDA_ARCHITECTURES, cmake/Cuda.cmake, recorded in the binary as
// SRU_CUDA_ARCHITECTURES); a device of compute capability M.m runs
//   SASS sm_Xy   when X = M and y <= m   (machine code is compatible within a major version, upwards);
//   PTX compute_Xy when Xy <= Mm        (the driver compiles it for the device when loading);
// arch-specific targets (sm_90a) only on exactly that capability, family-specific ones (sm_100f) on
// that major version from that minor up. Plain C++, so the rule is tested
// without a GPU; core/cuda/device_info.cu applies it to the devices present.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace sru::cuda {

struct CudaArch {
  int capability = 0;  // 10 * major + minor, e.g. 86
  char suffix = 0;     // 'a': arch-specific ("90a", that capability only); 'f': family-specific ("100f")
};

struct CudaArchs {
  std::vector<CudaArch> sass, ptx;
  std::string unparsed;   // entries CMake resolves itself ("native", "all", "all-major"), if any
};

// Parses a CMAKE_CUDA_ARCHITECTURES list ("75-real;80-real;90", spaces or semicolons): NN gives SASS
// and PTX, NN-real SASS, NN-virtual PTX.
CudaArchs parse_cuda_architectures(const std::string& list);
// "sm_75 sm_80 ..., PTX compute_90" (what --device-info prints).
std::string describe_cuda_architectures(const CudaArchs& archs);
// How a device of capability major.minor runs this build's code ("sm_86 machine code", "PTX
// compute_90, compiled by the driver"), or nothing when it cannot (entries CMake resolved itself are
// assumed to fit the build machine's device).
std::optional<std::string> cuda_image_for(const CudaArchs& archs, int major, int minor);

}  // namespace sru::cuda
