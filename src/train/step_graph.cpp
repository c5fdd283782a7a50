// The replays of a captured training step: a CUDA graph, or the CPU twin (see step_graph.h).
#include "train/step_graph.h"

#include <utility>

#include "core/error.h"
#if SRU_WITH_CUDA
#include "core/cuda/graph.h"
#include "core/cuda/runtime.h"
#endif

namespace sru::train {

namespace {

class HostStepGraph final : public StepGraph {
 public:
  void capture(std::function<void()> step) override {
    SRU_CHECK(!step_, "host_step_graph: already captured");
    step_ = std::move(step);
  }
  bool captured() const override { return static_cast<bool>(step_); }
  void replay() override {
    SRU_CHECK(step_, "host_step_graph: replay before capture");
    step_();
  }

 private:
  std::function<void()> step_;
};

}  // namespace

#if SRU_WITH_CUDA
class StepGraphMemory {
 public:
  explicit StepGraphMemory(Device device) : pool(std::make_shared<cuda::GraphPool>(device)) {}
  std::shared_ptr<cuda::GraphPool> pool;
};
#else
class StepGraphMemory {};
#endif

namespace {

#if SRU_WITH_CUDA
class CudaStepGraph final : public StepGraph {
 public:
  CudaStepGraph(Device device, const std::shared_ptr<StepGraphMemory>& memory)
      : graph_(device, memory ? memory->pool : nullptr) {}
  // The shared pool's cached blocks go back to the driver first (one synchronisation): the graph's
  // private pool cannot use them, so it would otherwise hold a second step's worth of memory.
  void capture(std::function<void()> step) override {
    cuda::empty_cache();
    graph_.capture(step);
  }
  bool captured() const override { return graph_.captured(); }
  void replay() override { graph_.replay(); }

 private:
  cuda::CapturedGraph graph_;
};
#endif

}  // namespace

std::shared_ptr<StepGraphMemory> step_graph_memory(Device device) {
#if SRU_WITH_CUDA
  return std::make_shared<StepGraphMemory>(device);
#else
  SRU_FAIL("CUDA graphs on ", device.str(), ": this build has no CUDA");
#endif
}

std::unique_ptr<StepGraph> cuda_step_graph(Device device, const std::shared_ptr<StepGraphMemory>& memory) {
#if SRU_WITH_CUDA
  return std::make_unique<CudaStepGraph>(device, memory);
#else
  (void)memory;
  SRU_FAIL("CUDA graphs on ", device.str(), ": this build has no CUDA");
#endif
}

std::unique_ptr<StepGraph> host_step_graph() { return std::make_unique<HostStepGraph>(); }

}  // namespace sru::train
