// How a training step's captured work is replayed (train.cuda_graphs, train/step.h): as a CUDA graph on
// a GPU (core/cuda/graph.h), or through its CPU twin, which keeps the captured function and runs it again
// at each replay. The twin lets the runner's bookkeeping around replays (static inputs, the step's
// scalars and Philox base read from memory, the generator's and the optimiser's counts advanced by the
// host) be checked bit for bit against eager training on a machine without a GPU.
#pragma once

#include <functional>
#include <memory>

#include "core/device.h"

namespace sru::train {

class StepGraph {
 public:
  virtual ~StepGraph() = default;
  // Captures `step`. A CUDA graph runs its host code now, queueing its device work into the graph
  // (none of it executes yet); the twin only keeps it. Throws when the capture fails (then nothing is
  // captured).
  virtual void capture(std::function<void()> step) = 0;
  virtual bool captured() const = 0;
  // Runs the captured work once more: the graph's kernels with one launch and no host code, or the
  // twin's function, host code and all.
  virtual void replay() = 0;
};

// What the CUDA graphs of one run share: one memory pool that they capture into one after another
// (core/cuda/graph.h GraphPool), so that a run's graphs hold about one step's memory.
class StepGraphMemory;
std::shared_ptr<StepGraphMemory> step_graph_memory(Device device);  // an error in a build without CUDA
// A CUDA graph on `device` capturing into `memory` (an error in a build without CUDA).
std::unique_ptr<StepGraph> cuda_step_graph(Device device, const std::shared_ptr<StepGraphMemory>& memory);
// The CPU twin: replay() calls the captured function.
std::unique_ptr<StepGraph> host_step_graph();

}  // namespace sru::train
