// Autograd graph nodes. Each differentiable op's result points (grad_fn, output_nr) at a Node whose
// next_edges lead to the nodes of its inputs; leaves that require grad are reached through an
// AccumulateGrad node. Saved tensors are detached copies of handles, so no node owns itself, and
// they are released right after the node runs (unless the caller retains the graph).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace sru::autograd {

class Node;

struct Edge {
  std::shared_ptr<Node> fn;  // null: the input needs no gradient
  int input_nr = 0;          // which output slot of fn receives the gradient
};

struct OutputMeta {
  Shape shape;
  DType dtype = DType::F32;
  Device device;
  // The node's backward takes an undefined gradient here as zero: the engine passes it undefined
  // instead of filling a zero tensor (a dispatch and a buffer saved, e.g. for a recurrence's last
  // state that nothing downstream used).
  bool takes_undefined_grad = false;
};

class Node {
 public:
  Node();
  // Frees the chain of nodes this one solely owns iteratively, so destroying a graph thousands of
  // nodes deep (a long unrolled recurrence) cannot overflow the stack.
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Given a defined gradient for every output (the engine zero-fills outputs no gradient reached, except
  // those marked takes_undefined_grad, which stay undefined), returns one gradient per next edge; an
  // undefined tensor means "no gradient".
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) = 0;
  // Nodes whose backward can fold the gradient already waiting for an input (FoldingBackwardFn below)
  // say so here, and the engine calls the second apply with those gradients.
  virtual bool folds_pending() const { return false; }
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs, std::vector<Tensor>& pending) {
    (void)pending;
    return apply(std::move(grad_outputs));
  }
  virtual std::string name() const = 0;
  virtual void release_saved() {}
  // A leaf's accumulator: the leaf's .grad from earlier backward passes (undefined for other nodes and
  // leaves without one), which a folding node may add into in place when it sends the leaf's last
  // gradient of this pass (the engine checks); AccumulateGrad then finds its gradient already there.
  virtual Tensor existing_gradient() const { return Tensor(); }
  // The engine's word that a folding node added this pass's gradient into existing_gradient() in place.
  virtual void gradient_folded_into_existing() {}
  // A leaf's accumulator: where the leaf's gradient lives when it has none yet in this pass (its slot in a
  // flat gradient buffer, TensorImpl::grad_home), which the node sending its only gradient may write
  // (overwrite) instead of a new buffer (autograd::gradient_destination); undefined elsewhere.
  virtual Tensor gradient_destination() const { return Tensor(); }

  std::vector<Edge> next_edges;
  std::vector<OutputMeta> outputs;
  // Creation order: the engine runs later nodes first, which frees activations early.
  const uint64_t sequence_nr;
};

// Sums incoming gradients into a leaf tensor's .grad (allocating it the first time).
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  std::string name() const override { return "AccumulateGrad"; }
  Tensor existing_gradient() const override { return variable_.grad(); }
  void gradient_folded_into_existing() override { folded_ = true; }
  Tensor gradient_destination() const override;

 private:
  Tensor variable_;
  bool folded_ = false;  // this pass's gradient is already in .grad: apply adds nothing
};

// Called after a leaf's gradient for the running backward pass is complete: the engine runs each node
// once, after summing every gradient that reaches it, so AccumulateGrad runs once per leaf. Data-parallel
// training uses it to start reducing finished gradients while backward goes on. Set for a scope, on
// the thread that runs backward.
using LeafGradientHook = std::function<void(const Tensor& leaf)>;
class LeafGradientHookScope {
 public:
  explicit LeafGradientHookScope(LeafGradientHook hook);
  ~LeafGradientHookScope();
  LeafGradientHookScope(const LeafGradientHookScope&) = delete;
  LeafGradientHookScope& operator=(const LeafGradientHookScope&) = delete;

 private:
  LeafGradientHook hook_;
  const LeafGradientHook* previous_;
};

using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs)>;
// A backward that may add its gradient for an input into the gradient another consumer of that input
// already sent, which the engine holds until every consumer has run: pending[i] is that gradient when
// the engine's buffer is its only handle (sole_owner), or, for a leaf whose .grad holds earlier passes'
// sum (gradient accumulation) and which this node sends its last gradient of the pass, that .grad;
// else undefined. For such an input the function
// may write its gradient into pending[i] in place (a GEMM with beta 1 instead of a product and an add:
// one dispatch and one pass less), return it as the input's gradient and leave pending[i] undefined;
// a pending gradient it leaves defined is summed by the engine as usual. The sum is the same either way
// up to the order of the float additions.
using FoldingBackwardFn =
    std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs, std::vector<Tensor>& pending)>;
// pending[i] moved out (undefined when there is none): for FoldingBackwardFn bodies.
inline Tensor take_pending(std::vector<Tensor>& pending, size_t i) {
  return i < pending.size() ? std::move(pending[i]) : Tensor();
}

// For the backward of the node the engine is running: the place it offers for input i's gradient, to be
// overwritten and returned as that gradient (no copy then follows): a parameter's slot in its flat
// gradient buffer when this node sends the parameter's only gradient of the pass and it has no .grad yet
// (Node::gradient_destination). Undefined when there is none (or outside backward).
Tensor gradient_destination(size_t input);
// gradient_destination(input) when it is one of shape, dtype and device, else a new uninitialised tensor:
// what a backward allocates an input's gradient with when its kernel writes every element.
Tensor gradient_buffer(size_t input, const Shape& shape, DType dtype, Device device);
// Where a folding backward writes input i's gradient: into the pending gradient, adding (take_pending),
// else into the engine's destination, overwriting (gradient_destination), else nowhere (`into`
// undefined: a new buffer).
struct GradientTarget {
  Tensor into;
  bool accumulate = false;
};
GradientTarget gradient_target(std::vector<Tensor>& pending, size_t input);
// The engine's side: sets the places gradient_destination offers (one per input of the running node)
// for a scope.
class DestinationScope {
 public:
  explicit DestinationScope(const std::vector<Tensor>* destinations);
  ~DestinationScope();
  DestinationScope(const DestinationScope&) = delete;
  DestinationScope& operator=(const DestinationScope&) = delete;

 private:
  const std::vector<Tensor>* previous_;
};

// A node whose backward is a closure; the closure holds the saved tensors and is destroyed on release.
class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, BackwardFn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  FunctionNode(std::string name, FoldingBackwardFn fn) : name_(std::move(name)), folding_fn_(std::move(fn)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  bool folds_pending() const override { return folding_fn_ != nullptr; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs, std::vector<Tensor>& pending) override;
  std::string name() const override { return name_; }
  void release_saved() override {
    fn_ = nullptr;
    folding_fn_ = nullptr;
  }

 private:
  std::string name_;
  BackwardFn fn_;
  FoldingBackwardFn folding_fn_;
};

// ---- gradient mode ----
bool grad_enabled();
void set_grad_enabled(bool on);

// Disables graph recording in its scope (evaluation, optimiser updates, backward itself).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// ---- helpers for op implementations ----
// True when grad mode is on and any defined input requires grad.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);
// Whether t is the only handle of its data: one handle of its TensorImpl and no other TensorImpl (a
// view, a detached copy, a saved tensor) over its storage. The engine then uses a gradient buffer in
// place (accumulating into it, or making it a leaf's .grad) instead of copying it first.
inline bool sole_owner(const Tensor& t) { return t.impl().use_count() == 1 && t.impl()->storage.use_count() == 1; }
// The edge through which a gradient for t flows: its grad_fn, or its leaf accumulator, or none.
Edge gradient_edge(const Tensor& t);
// Makes `outputs` results of a FunctionNode named `name` over `inputs` with backward `fn`.
// The closure must capture saved tensors detached (Tensor::detach) and return one gradient per input.
// undefined_grad_outputs: the outputs (by index) whose gradient fn takes undefined for zero
// (OutputMeta::takes_undefined_grad); the others always reach fn defined.
void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, BackwardFn fn,
            const std::vector<int>& undefined_grad_outputs = {});
// The same with a backward that folds pending gradients (FoldingBackwardFn).
void record_folding(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                    FoldingBackwardFn fn);

}  // namespace sru::autograd
