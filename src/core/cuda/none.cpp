// The CUDA entry points for builds without the CUDA backend: the device query says there is no
// device, and the runtime functions throw (no tensor can be created on a CUDA device in such a build,
// so they are reached only through a programming error).
#include "core/cuda/device_busy.h"
#include "core/cuda/device_info.h"
#include "core/cuda/runtime.h"
#include "core/error.h"

namespace sru::cuda {

namespace {
[[noreturn]] void no_backend() {
  SRU_FAIL("this build has no CUDA backend (configured with SRU_CUDA=OFF or without nvcc)");
}
}  // namespace

bool built_with_cuda() { return false; }
std::string built_cuda_architectures() { return "none (no CUDA backend)"; }
int device_count() { return 0; }
int compute_capability(int) { return 0; }
std::string unavailable_reason(int) { return "this build has no CUDA backend (configured with SRU_CUDA=OFF or no nvcc)"; }
std::string describe() { return "CUDA: not built\n"; }

void* allocate(size_t, int, size_t*) { no_backend(); }
void release(void*, size_t, int) { no_backend(); }
AllocatorStats allocator_stats(int) { return {}; }
void reset_peak_stats(int) {}
void empty_cache() {}
int create_graph_pool(int) { no_backend(); }
void set_graph_pool(int, int) { no_backend(); }
void retire_graph_pool(int, int) { no_backend(); }
bool allocator_caches() { return true; }
void copy_bytes(void*, Device, const void*, Device, size_t) { no_backend(); }
void synchronize(int) {}
std::vector<double> read_scalars(int, const std::vector<Tensor>&) { no_backend(); }
int queue_scalar_read(int, const std::vector<Tensor>&) { no_backend(); }
std::vector<double> finish_scalar_read(int, int, const std::vector<DType>&) { no_backend(); }
void release_scalar_read(int, int) {}
size_t scalar_read_slots(int) { return 0; }
unsigned long long* reserve_error_slot(int, ErrorDescriber) { no_backend(); }
double time_on_stream_ms(int, const std::function<void()>&) { no_backend(); }
std::optional<DeviceBusy> measure_device_busy(const std::function<void()>&, std::string* why_not) {
  if (why_not) *why_not = "this build has no CUDA backend";
  return std::nullopt;
}
std::string prepare_device_busy() { return "this build has no CUDA backend"; }
void fill(const Tensor&, double) { no_backend(); }
void add_scaled(const Tensor&, const Tensor&, double) { no_backend(); }
void scale(const Tensor&, double) { no_backend(); }
void clamp(const Tensor&, double, double) { no_backend(); }
void convert(const Tensor&, const Tensor&) { no_backend(); }
void zero(const Tensor&) { no_backend(); }

}  // namespace sru::cuda
