// Device query for builds without the CUDA backend: there is never a device.
#include "core/cuda/device_info.h"

namespace sru::cuda {

bool built_with_cuda() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() { return "this build has no CUDA backend (configured with SRU_CUDA=OFF or no nvcc)"; }
std::string describe() { return "CUDA: not built\n"; }

}  // namespace sru::cuda
