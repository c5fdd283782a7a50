// Host waits: the points where host code stops until the device has caught up, counted so that a
// test can hold a training step to at most one of them. Two counts, kept on every build:
//   value_reads  — tensor values read by host code (Tensor::item, to_vector, a copy of a CUDA tensor
//                  to the CPU, read_scalars): each is a host wait when the tensor lives on a GPU, and
//                  the same calls are made on the CPU, so a CPU run counts what a GPU run would wait on;
//   device_waits — host-blocking CUDA calls (stream and event synchronisation, blocking copies,
//                  cudaFree): only CUDA builds on a GPU make them; their wall time is summed too.
// Also read_scalars: several scalars to the host with one wait (the step's loss and gradient norm).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace sru {

struct HostWaitCounts {
  uint64_t value_reads = 0;
  uint64_t device_waits = 0;
  uint64_t device_wait_ns = 0;  // wall time the host spent blocked in the device waits
};

// Totals since the process started (all threads).
HostWaitCounts host_wait_counts();

// Counts and names the waits between its construction and counts()/events() (all threads). One at a
// time; for tests and benchmarks.
class HostWaitRecorder {
 public:
  HostWaitRecorder();
  ~HostWaitRecorder();
  HostWaitRecorder(const HostWaitRecorder&) = delete;
  HostWaitRecorder& operator=(const HostWaitRecorder&) = delete;
  HostWaitCounts counts() const;
  // "value read: item", "device wait: cudaStreamSynchronize (copy to host)", ... in order.
  std::vector<std::string> events() const;

 private:
  HostWaitCounts start_;
};

// The values of one-element tensors, all on one device, as doubles, with a single host wait (one
// value read). On a CUDA device this is also where kernel-reported input errors surface (see
// cuda::reserve_error_slot): it throws the first one, with the message the CPU kernel would throw.
std::vector<double> read_scalars(const std::vector<Tensor>& scalars);

// read_scalars with named destinations: each one-element tensor's value goes into its double, so that a
// caller reads fields by name instead of by position in a list (one host wait for all of them).
struct ScalarRead {
  Tensor value;
  double* into;
};
void read_scalars(const std::vector<ScalarRead>& reads);

// The same values, read later: construction queues their copies behind the work queued so far (no
// wait), and wait() waits for that point only, so work queued in between keeps the GPU busy (the
// trainer launches step n + 1 before it reads step n's loss and norm: train/step.h). wait() is the one
// value read (counted there). On the CPU the values are taken at construction (later work may
// overwrite the tensors). Dropped without wait(): the values are discarded.
class ScalarsReadLater {
 public:
  explicit ScalarsReadLater(std::vector<ScalarRead> reads);
  ~ScalarsReadLater();
  ScalarsReadLater(const ScalarsReadLater&) = delete;
  ScalarsReadLater& operator=(const ScalarsReadLater&) = delete;
  void wait();  // once: each value into its double

 private:
  std::vector<ScalarRead> reads_;
  std::vector<double> cpu_values_;
  std::vector<DType> dtypes_;
  int device_ = -1;  // CUDA: the device, and the runtime's slot
  int slot_ = -1;
  bool waited_ = false;
};

namespace detail {
void count_value_read(const char* what);
// Counts a device wait and times it: construct right before the blocking CUDA call, in a scope that
// ends right after it. The time goes to HostWaitCounts::device_wait_ns, from which srubench train-epoch
// tells the host's own milliseconds per step (issuing work) from the milliseconds it waited.
class TimedDeviceWait {
 public:
  explicit TimedDeviceWait(const char* what);
  ~TimedDeviceWait();
  TimedDeviceWait(const TimedDeviceWait&) = delete;
  TimedDeviceWait& operator=(const TimedDeviceWait&) = delete;

 private:
  uint64_t start_ns_;
};
}  // namespace detail

}  // namespace sru
