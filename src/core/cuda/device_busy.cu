// The GPU's busy time from CUPTI's activity records (see device_busy.h). libcupti is opened with
// dlopen and its five entry points looked up by name, so that the library is needed only where this
// measurement is asked for; the record layouts come from the toolkit's cupti_activity.h, which matches
// the libcupti of the same CUDA major version.
#include "core/cuda/device_busy.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

#include <cupti_activity.h>

namespace sru::cuda {

namespace {

struct Cupti {
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*flush_all)(uint32_t) = nullptr;
  CUptiResult (*next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*timestamp)(uint64_t*) = nullptr;
  CUptiResult (*dropped)(CUcontext, uint32_t, size_t*) = nullptr;
  std::string error;  // why it could not be loaded, or ""
};

const Cupti& cupti() {
  static const Cupti loaded = [] {
    Cupti c;
    void* lib = nullptr;
    for (const char* name : {"libcupti.so", "libcupti.so.13", "libcupti.so.12"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (!lib) {
      c.error = "libcupti could not be loaded (put the CUDA toolkit's lib64 on LD_LIBRARY_PATH)";
      return c;
    }
    const auto find = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
      if (!fn && c.error.empty()) c.error = std::string("libcupti has no ") + symbol;
    };
    find(c.enable, "cuptiActivityEnable");
    find(c.disable, "cuptiActivityDisable");
    find(c.register_callbacks, "cuptiActivityRegisterCallbacks");
    find(c.flush_all, "cuptiActivityFlushAll");
    find(c.next_record, "cuptiActivityGetNextRecord");
    find(c.timestamp, "cuptiGetTimestamp");
    find(c.dropped, "cuptiActivityGetNumDroppedRecords");
    return c;
  }();
  return loaded;
}

// The records' [start, end) intervals, in CUPTI's nanoseconds, gathered by the completion callback.
std::mutex intervals_mutex;
std::vector<std::pair<uint64_t, uint64_t>> intervals;
int64_t records_seen = 0;

constexpr size_t kBufferBytes = 8 << 20;
constexpr size_t kRecordAlignment = 8;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kRecordAlignment, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

template <typename Record>
void keep_interval(const CUpti_Activity* r) {
  const auto* a = reinterpret_cast<const Record*>(r);
  if (a->end > a->start) intervals.emplace_back(a->start, a->end);
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  {
    const std::lock_guard<std::mutex> lock(intervals_mutex);
    CUpti_Activity* record = nullptr;
    while (cupti().next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
      ++records_seen;
      switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL: keep_interval<CUpti_ActivityKernel10>(record); break;
        case CUPTI_ACTIVITY_KIND_MEMCPY: keep_interval<CUpti_ActivityMemcpy6>(record); break;
        case CUPTI_ACTIVITY_KIND_MEMSET: keep_interval<CUpti_ActivityMemset4>(record); break;
        default: --records_seen; break;
      }
    }
  }
  std::free(buffer);
}

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};

// Loads libcupti and registers the buffer callbacks, once; "" or why not (remembered for later calls).
std::string prepared_cupti() {
  static const std::string error = [] {
    const Cupti& c = cupti();
    if (!c.error.empty()) return c.error;
    const CUptiResult status = c.register_callbacks(buffer_requested, buffer_completed);
    if (status != CUPTI_SUCCESS) return "cuptiActivityRegisterCallbacks failed (" + std::to_string(status) + ")";
    // One enable and disable cycle, so that CUPTI has hooked the driver before any CUDA graph of the
    // run is made (graphs instantiated before CUPTI was set up may go unrecorded).
    for (CUpti_ActivityKind kind : kKinds) c.enable(kind);
    for (CUpti_ActivityKind kind : kKinds) c.disable(kind);
    return std::string();
  }();
  return error;
}

}  // namespace

std::string prepare_device_busy() { return prepared_cupti(); }

std::optional<DeviceBusy> measure_device_busy(const std::function<void()>& work, std::string* why_not) {
  const auto refuse = [&](const std::string& why) -> std::optional<DeviceBusy> {
    if (why_not) *why_not = why;
    return std::nullopt;
  };
  if (const std::string error = prepared_cupti(); !error.empty()) return refuse(error);
  const Cupti& c = cupti();
  CUptiResult status = CUPTI_SUCCESS;
  {
    const std::lock_guard<std::mutex> lock(intervals_mutex);
    intervals.clear();
    records_seen = 0;
  }
  for (CUpti_ActivityKind kind : kKinds)
    if ((status = c.enable(kind)) != CUPTI_SUCCESS) {
      for (CUpti_ActivityKind k : kKinds) c.disable(k);
      return refuse("cuptiActivityEnable failed (" + std::to_string(status) + "; another profiler attached?)");
    }
  uint64_t from = 0, to = 0;
  c.timestamp(&from);
  work();
  c.timestamp(&to);
  // Every record of work's activity to buffer_completed, then no more recording.
  const CUptiResult flushed = c.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind kind : kKinds) c.disable(kind);
  if (flushed != CUPTI_SUCCESS) return refuse("cuptiActivityFlushAll failed (" + std::to_string(flushed) + ")");
  size_t dropped = 0;
  if (c.dropped(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0)
    return refuse(std::to_string(dropped) + " activity records were dropped (the busy time would be short)");
  const std::lock_guard<std::mutex> lock(intervals_mutex);
  DeviceBusy out;
  out.busy_ms = static_cast<double>(union_length(intervals, from, to)) / 1e6;
  out.wall_ms = static_cast<double>(to - from) / 1e6;
  out.records = records_seen;
  return out;
}

}  // namespace sru::cuda
