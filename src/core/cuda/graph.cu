// CUDA graph capture and replay on a device's stream, with a private memory pool (see graph.h).
#include "core/cuda/graph.h"

#include <cuda_runtime.h>

#include <exception>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/runtime.h"
#include "core/error.h"
#include "core/kernel_count.h"

namespace sru::cuda {

struct CapturedGraph::State {
  int device = 0;
  int pool = 0;  // the private pool: allocated at the capture, retired with the graph
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  long long replays = 0;
  std::shared_ptr<GraphPool> shared_pool;  // set: pool is its id, which other graphs use too
};

GraphPool::GraphPool(Device device) {
  SRU_CHECK(device.is_cuda(), "GraphPool: needs a CUDA device, got ", device.str());
  device_ = device.index;
  id_ = create_graph_pool(device_);
}

// Its memory returns to the driver once the graphs' outputs from it are freed too.
GraphPool::~GraphPool() { retire_graph_pool(device_, id_); }

CapturedGraph::CapturedGraph(Device device, std::shared_ptr<GraphPool> pool) : state_(std::make_unique<State>()) {
  SRU_CHECK(device.is_cuda(), "CapturedGraph: a CUDA graph needs a CUDA device, got ", device.str());
  SRU_CHECK(!pool || pool->device() == device.index, "CapturedGraph on ", device.str(), ": its pool is cuda:",
            pool ? pool->device() : 0, "'s");
  state_->device = device.index;
  state_->shared_pool = std::move(pool);
}

CapturedGraph::~CapturedGraph() {
  if (state_->exec) cudaGraphExecDestroy(state_->exec);
  if (state_->graph) cudaGraphDestroy(state_->graph);
  // The graph's memory returns to the driver once the caller's outputs from it are freed too (a shared
  // pool: when its last graph is gone).
  if (state_->pool != 0 && !state_->shared_pool) retire_graph_pool(state_->device, state_->pool);
}

bool CapturedGraph::captured() const { return state_->exec != nullptr; }

long long CapturedGraph::replays() const { return state_->replays; }

void CapturedGraph::capture(const std::function<void()>& work) {
  SRU_CHECK(!captured() && state_->pool == 0, "CapturedGraph: already captured");
  State& s = *state_;
  const cudaStream_t stream = context(s.device).stream;
  // The pool first: a failure here leaves the stream out of capture mode.
  s.pool = s.shared_pool ? s.shared_pool->id() : create_graph_pool(s.device);
  set_graph_pool(s.device, s.pool);
  const cudaError_t began = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (began != cudaSuccess) {
    cudaGetLastError();
    abandon_capture();
    SRU_FAIL("CUDA graph capture on cuda:", s.device, ": cudaStreamBeginCapture failed: ", cudaGetErrorString(began));
  }
  cudaGraph_t graph = nullptr;
  auto end_failed_capture = [&] {
    cudaStreamEndCapture(stream, &graph);  // ends the capture whatever state the work left it in
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    abandon_capture();
  };
  try {
    work();
  } catch (const std::exception& e) {
    end_failed_capture();
    SRU_FAIL("CUDA graph capture on cuda:", s.device, " failed: ", e.what(),
             " (a captured function may not wait on the host or copy from it: core/cuda/graph.h)");
  } catch (...) {
    end_failed_capture();
    throw;
  }
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (ended != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    abandon_capture();
    SRU_FAIL("CUDA graph capture on cuda:", s.device, " failed: ", cudaGetErrorString(ended),
             " (the captured work waited on the host, copied from the host or used another stream: "
             "core/cuda/graph.h lists what a capture may not do)");
  }
  set_graph_pool(s.device, 0);
  const cudaError_t made = cudaGraphInstantiate(&s.exec, graph, 0);
  if (made != cudaSuccess) {
    cudaGraphDestroy(graph);
    cudaGetLastError();
    s.exec = nullptr;
    abandon_capture();
    SRU_FAIL("CUDA graph capture on cuda:", s.device, ": cudaGraphInstantiate failed: ", cudaGetErrorString(made));
  }
  s.graph = graph;
}

// After a failed capture: the shared pool active again, a private pool of this graph's own retired (its
// memory returns as the failed work's tensors go; a GraphPool's stays for its other graphs), so that
// capture() may be tried again.
void CapturedGraph::abandon_capture() {
  set_graph_pool(state_->device, 0);
  if (!state_->shared_pool) retire_graph_pool(state_->device, state_->pool);
  state_->pool = 0;
}

void CapturedGraph::replay() {
  SRU_CHECK(captured(), "CapturedGraph: replay before capture");
  ::sru::detail::count_kernel_dispatch("cuda_graph_replay");
  CUDA_CHECK(cudaGraphLaunch(state_->exec, context(state_->device).stream));
  ++state_->replays;
}

}  // namespace sru::cuda
