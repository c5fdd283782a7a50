// Owned, aligned memory behind one or more tensors (views share a Storage).
#pragma once

#include <cstddef>
#include <memory>

#include "core/device.h"

namespace sru {

class Storage {
 public:
  // Allocates nbytes on `device`, 64-byte aligned on the CPU (a cache line, and AVX-512 friendly),
  // through the caching allocator. The memory is not initialised.
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  size_t reserved_ = 0;  // the allocator's rounded size
  Device device_;
};

constexpr size_t kCpuAlignment = 64;  // = CpuAllocator::kAlignment

}  // namespace sru
