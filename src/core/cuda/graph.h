// A CUDA graph of the work one function queues on a device's stream: captured once, replayed many
// times with one launch (the lean step's item 5, issue 38: a training step of repeating shapes as one
// graph, forward, backward, norm and update, instead of one launch per kernel).
//
// Capture runs the function on the host with the device's stream in capture mode (thread-local: other
// threads' CUDA calls are not affected), so nothing it queues executes then: the results appear at the
// first replay. Memory the function allocates comes from a private pool of the caching allocator
// (core/pool_router.h) that keeps those addresses for the graph until it is destroyed, including blocks
// freed again during the capture; tensors allocated during the capture and kept by the caller (a loss, a
// parameter's new .grad) are the graph's outputs: each replay writes them again, in place.
//
// What the captured function must not do (CUDA or our runtime refuses, and capture() reports the
// error naming the graph): wait on the host (a value read, read_scalars, a copy to the host, a
// synchronisation), copy from the host (the runtime's staging copies), run a kernel that reports
// input errors through the device error log, or change its shapes between replays. Per-replay inputs
// are tensors allocated before the capture whose contents the caller overwrites before each replay
// (static inputs); they, and every other tensor made before the capture that the captured work reads
// or writes, must outlive the graph (freed, their memory could go to other work while replays still
// use it). Scalars passed to kernels are frozen at their captured values: per-step ones (a learning
// rate) must be read from device memory, and Philox offsets come relative to a base in device
// memory (core/rng.h PhiloxOffset, Generator::set_offset_base). One capturing thread per device:
// allocations of other threads during a capture would land in the graph's pool.
#pragma once

#include <functional>
#include <memory>

#include "core/device.h"

namespace sru::cuda {

// A private memory pool that several graphs capture into one after another (PyTorch's
// graph_pool_handle): what one capture freed, the next may take, so a run's graphs of different batch
// shapes hold about one step's memory, not one each. Safe when their replays never overlap (one
// stream) and each replay writes its intermediate buffers before reading them; the blocks a graph's
// caller keeps (its outputs) stay allocated and are never handed out again. Retired when the last
// graph holding it is destroyed.
class GraphPool {
 public:
  explicit GraphPool(Device device);
  ~GraphPool();
  GraphPool(const GraphPool&) = delete;
  GraphPool& operator=(const GraphPool&) = delete;
  int device() const { return device_; }
  int id() const { return id_; }

 private:
  int device_ = 0, id_ = 0;
};

class CapturedGraph {
 public:
  // pool: capture into this shared pool (null: a private pool of this graph's own).
  explicit CapturedGraph(Device device, std::shared_ptr<GraphPool> pool = nullptr);
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // Captures what `work` queues on the device's stream (once; throws if already captured, or if the
  // capture fails: then nothing is captured, the shared pool is active again, and capture may be
  // called again).
  void capture(const std::function<void()>& work);
  bool captured() const;
  // Queues the whole graph on the device's stream: one launch, no host wait.
  void replay();
  // Replays since the capture.
  long long replays() const;

 private:
  void abandon_capture();
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace sru::cuda
