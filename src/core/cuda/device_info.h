// What CUDA devices this process can use. Built from device_info.cu when the CUDA backend is compiled
// and from device_info_none.cpp otherwise; both answer "no device" rather than failing.
#pragma once

#include <string>

namespace sru::cuda {

// True when this build includes the CUDA backend.
bool built_with_cuda();
// The GPU architectures this build holds code for ("sm_75 ... sm_90, PTX compute_90"; core/cuda_arch.h).
std::string built_cuda_architectures();
// Number of usable devices: 0 when the build has no CUDA, when no driver is installed, or when
// cudaGetDeviceCount fails for any reason (on machines without a GPU it reports a driver/runtime
// mismatch rather than returning 0).
int device_count();
// Why CUDA device `index` cannot be used (the CUDA error string, no device, fewer devices than that,
// or a device this build holds no code for, cuda_arch.h), or an empty string when it can.
std::string unavailable_reason(int index = 0);
// Device `index`'s compute capability as 10 * major + minor (e.g. 90), 0 when it cannot be read.
int compute_capability(int index = 0);
// One line per device (name, compute capability, memory) plus runtime, cuBLAS and cuDNN versions.
std::string describe();

}  // namespace sru::cuda
