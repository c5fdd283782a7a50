// CPU storage: memory comes from the caching allocator (core/allocator.h).
#include "core/storage.h"

#include "core/allocator.h"
#include "core/error.h"

namespace sru {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  SRU_CHECK(device.is_cpu(), "tensor memory on ", device.str(),
            " needs the CUDA backend, which this build does not provide");
  data_ = CpuAllocator::instance().allocate(nbytes, &reserved_);
}

Storage::~Storage() { CpuAllocator::instance().release(data_, reserved_); }

}  // namespace sru
