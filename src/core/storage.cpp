// CPU storage allocation (the CUDA caching allocator lives with the CUDA backend).
#include "core/storage.h"

#include <cstdlib>
#include <new>

#include "core/error.h"

namespace sru {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  SRU_CHECK(device.is_cpu(), "tensor memory on ", device.str(),
            " needs the CUDA backend, which this build does not provide");
  // aligned_alloc needs a size that is a multiple of the alignment; never allocate 0 bytes.
  const size_t rounded = ((nbytes + kCpuAlignment - 1) / kCpuAlignment) * kCpuAlignment;
  data_ = std::aligned_alloc(kCpuAlignment, rounded == 0 ? kCpuAlignment : rounded);
  SRU_CHECK(data_ != nullptr, "out of memory allocating ", nbytes, " bytes on the CPU");
}

Storage::~Storage() { std::free(data_); }

}  // namespace sru
