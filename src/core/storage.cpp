// Storage: memory from the CPU caching allocator (core/allocator.h) or, for CUDA devices, from the
// CUDA backend's caching allocator (core/cuda/runtime.h).
#include "core/storage.h"

#include "core/allocator.h"
#include "core/cuda/runtime.h"
#include "core/error.h"

namespace sru {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = device.is_cuda() ? cuda::allocate(nbytes, device.index, &reserved_)
                           : CpuAllocator::instance().allocate(nbytes, &reserved_);
}

Storage::~Storage() {
  if (device_.is_cuda()) cuda::release(data_, reserved_, device_.index);
  else CpuAllocator::instance().release(data_, reserved_);
}

}  // namespace sru
