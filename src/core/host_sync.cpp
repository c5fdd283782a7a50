// Host-wait counters and read_scalars (see host_sync.h).
#include "core/host_sync.h"

#include "core/kernel_count.h"

#include <atomic>
#include <chrono>
#include <mutex>

#include "core/cuda/runtime.h"

namespace sru {

namespace {

std::atomic<uint64_t> value_reads{0}, device_waits{0}, device_wait_ns{0};
std::mutex recorder_mutex;
std::atomic<bool> recording{false};  // checked before taking the mutex: counting stays cheap
std::vector<std::string> recorded;

void note(const char* kind, const char* what) {
  if (!recording.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(recorder_mutex);
  if (recording) recorded.push_back(std::string(kind) + ": " + what);
}

}  // namespace

namespace detail {
void count_value_read(const char* what) {
  value_reads.fetch_add(1, std::memory_order_relaxed);
  note("value read", what);
}
static uint64_t steady_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}
TimedDeviceWait::TimedDeviceWait(const char* what) {
  device_waits.fetch_add(1, std::memory_order_relaxed);
  note("device wait", what);
  host_profile_mark(what);
  start_ns_ = steady_ns();
}
TimedDeviceWait::~TimedDeviceWait() {
  device_wait_ns.fetch_add(steady_ns() - start_ns_, std::memory_order_relaxed);
  host_profile_mark("(host work after a device wait)");
}
}  // namespace detail

HostWaitCounts host_wait_counts() { return {value_reads.load(), device_waits.load(), device_wait_ns.load()}; }

HostWaitRecorder::HostWaitRecorder() {
  std::lock_guard<std::mutex> lock(recorder_mutex);
  SRU_CHECK(!recording, "HostWaitRecorder: another recorder is active");
  recording = true;
  recorded.clear();
  start_ = {value_reads.load(), device_waits.load(), device_wait_ns.load()};
}

HostWaitRecorder::~HostWaitRecorder() {
  std::lock_guard<std::mutex> lock(recorder_mutex);
  recording = false;
}

HostWaitCounts HostWaitRecorder::counts() const {
  return {value_reads.load() - start_.value_reads, device_waits.load() - start_.device_waits,
          device_wait_ns.load() - start_.device_wait_ns};
}

std::vector<std::string> HostWaitRecorder::events() const {
  std::lock_guard<std::mutex> lock(recorder_mutex);
  return recorded;
}

namespace {

// read_scalars' and ScalarsReadLater's rule: one-element tensors, all on one device.
void check_scalars(const std::vector<Tensor>& scalars, const char* who) {
  for (const Tensor& t : scalars) {
    SRU_CHECK(t.numel() == 1, who, ": ", t.str(), " has ", t.numel(), " elements, expected 1");
    SRU_CHECK(t.device() == scalars[0].device(), who, ": tensors on ", scalars[0].device().str(), " and ",
              t.device().str(), "; read each device's scalars separately");
  }
}

// The values of one-element CPU tensors.
std::vector<double> cpu_values(const std::vector<Tensor>& scalars) {
  std::vector<double> out;
  for (const Tensor& t : scalars)
    SRU_DISPATCH_ALL(t.dtype(), "read_scalars", [&]<typename T>() { out.push_back(static_cast<double>(*t.data<T>())); });
  return out;
}

}  // namespace

std::vector<double> read_scalars(const std::vector<Tensor>& scalars) {
  check_scalars(scalars, "read_scalars");
  detail::count_value_read("read_scalars");
  if (!scalars.empty() && scalars[0].device().is_cuda()) return cuda::read_scalars(scalars[0].device().index, scalars);
  return cpu_values(scalars);
}

void read_scalars(const std::vector<ScalarRead>& reads) {
  std::vector<Tensor> scalars;
  for (const ScalarRead& r : reads) scalars.push_back(r.value);
  const std::vector<double> values = read_scalars(scalars);
  for (size_t i = 0; i < reads.size(); ++i) *reads[i].into = values[i];
}

ScalarsReadLater::ScalarsReadLater(std::vector<ScalarRead> reads) : reads_(std::move(reads)) {
  std::vector<Tensor> scalars;
  for (const ScalarRead& r : reads_) {
    scalars.push_back(r.value);
    dtypes_.push_back(r.value.dtype());
  }
  check_scalars(scalars, "ScalarsReadLater");
  if (!scalars.empty() && scalars[0].device().is_cuda()) {
    device_ = scalars[0].device().index;
    slot_ = cuda::queue_scalar_read(device_, scalars);
    return;
  }
  cpu_values_ = cpu_values(scalars);
}

ScalarsReadLater::~ScalarsReadLater() {
  if (slot_ >= 0 && !waited_) cuda::release_scalar_read(device_, slot_);
}

void ScalarsReadLater::wait() {
  SRU_CHECK(!waited_, "ScalarsReadLater::wait: the values were read already");
  detail::count_value_read("ScalarsReadLater");
  // Marked read first: finish_scalar_read frees the slot before it may throw (an input error in the
  // device's error log), and the destructor must not then release a slot another read has taken.
  waited_ = true;
  const std::vector<double> values = slot_ >= 0 ? cuda::finish_scalar_read(device_, slot_, dtypes_) : cpu_values_;
  for (size_t i = 0; i < reads_.size(); ++i) *reads_[i].into = values[i];
}

}  // namespace sru
