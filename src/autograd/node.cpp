// Autograd nodes, gradient mode and the recording helper used by every op.
#include "autograd/node.h"

#include <algorithm>
#include <atomic>

namespace sru::autograd {

namespace {
std::atomic<uint64_t> next_sequence_nr{0};
thread_local bool grad_mode_enabled = true;
thread_local const LeafGradientHook* leaf_gradient_hook = nullptr;
}  // namespace

LeafGradientHookScope::LeafGradientHookScope(LeafGradientHook hook)
    : hook_(std::move(hook)), previous_(leaf_gradient_hook) {
  leaf_gradient_hook = &hook_;
}

LeafGradientHookScope::~LeafGradientHookScope() { leaf_gradient_hook = previous_; }

Node::Node() : sequence_nr(next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

Node::~Node() {
  std::vector<std::shared_ptr<Node>> pending;
  for (Edge& e : next_edges)
    if (e.fn) pending.push_back(std::move(e.fn));
  while (!pending.empty()) {
    std::shared_ptr<Node> node = std::move(pending.back());
    pending.pop_back();
    // Last owner: take its edges before it dies, so its destructor finds nothing to recurse into.
    if (node.use_count() == 1)
      for (Edge& e : node->next_edges)
        if (e.fn) pending.push_back(std::move(e.fn));
  }
}

AccumulateGrad::AccumulateGrad(Tensor variable) : variable_(std::move(variable)) {
  outputs.push_back({variable_.shape(), variable_.dtype(), variable_.device()});
}

Tensor AccumulateGrad::gradient_destination() const {
  return variable_.grad().defined() ? Tensor() : Tensor(variable_.impl()->grad_home);
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grad_outputs) {
  Tensor& g = grad_outputs[0];
  Tensor existing = variable_.grad();
  const Tensor home(variable_.impl()->grad_home);
  if (folded_) {
    folded_ = false;  // a folding node already added this pass's gradient into .grad (FoldingBackwardFn)
  } else if (!existing.defined() && home.defined()) {
    // Flat storage: the gradient lives in its slot of the flat buffer. Written there by the node that
    // sent it (gradient_destination), or copied there now.
    if (!g.same_data(home)) home.view(g.shape()).copy_(g);
    variable_.set_grad(home);
  } else if (!existing.defined()) {
    // The incoming buffer may alias a tensor still used elsewhere in the graph: keep a private copy,
    // unless nothing else holds it (then it becomes the gradient as it is: no copy kernel per parameter).
    variable_.set_grad(sole_owner(g) ? g : g.clone());
  } else {
    existing.add_(g);
  }
  if (leaf_gradient_hook) (*leaf_gradient_hook)(variable_);
  return {};
}

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>&& grad_outputs) {
  std::vector<Tensor> none;
  return apply(std::move(grad_outputs), none);
}

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>&& grad_outputs, std::vector<Tensor>& pending) {
  SRU_CHECK(fn_ != nullptr || folding_fn_ != nullptr, "backward through ", name_,
            " a second time: its saved tensors were already freed (pass retain_graph=true to the first backward)");
  return folding_fn_ ? folding_fn_(grad_outputs, pending) : fn_(grad_outputs);
}

namespace {
thread_local const std::vector<Tensor>* running_destinations = nullptr;
}  // namespace

DestinationScope::DestinationScope(const std::vector<Tensor>* destinations) : previous_(running_destinations) {
  running_destinations = destinations;
}

DestinationScope::~DestinationScope() { running_destinations = previous_; }

Tensor gradient_destination(size_t input) {
  return running_destinations && input < running_destinations->size() ? (*running_destinations)[input] : Tensor();
}

GradientTarget gradient_target(std::vector<Tensor>& pending, size_t input) {
  Tensor into = take_pending(pending, input);
  if (into.defined()) return {into, true};
  return {gradient_destination(input), false};
}

Tensor gradient_buffer(size_t input, const Shape& shape, DType dtype, Device device) {
  const Tensor d = gradient_destination(input);
  return d.matches(shape, dtype, device) ? d : Tensor::empty(shape, dtype, device);
}

bool grad_enabled() { return grad_mode_enabled; }
void set_grad_enabled(bool on) { grad_mode_enabled = on; }

bool needs_grad(std::initializer_list<Tensor> inputs) {
  if (!grad_mode_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!grad_mode_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  if (t.grad_fn()) return {t.grad_fn(), t.output_nr()};
  // A leaf: share one accumulator among all graphs built from it while any is alive.
  std::shared_ptr<Node> acc = t.impl()->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    t.impl()->grad_accumulator = acc;
  }
  return {acc, 0};
}

namespace {

void connect(const std::shared_ptr<FunctionNode>& node, const std::vector<Tensor>& inputs,
             const std::vector<Tensor>& outputs, const std::vector<int>& undefined_grad_outputs) {
  node->next_edges.reserve(inputs.size());
  for (const Tensor& t : inputs) node->next_edges.push_back(gradient_edge(t));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const bool takes_undefined = std::find(undefined_grad_outputs.begin(), undefined_grad_outputs.end(),
                                           static_cast<int>(i)) != undefined_grad_outputs.end();
    node->outputs.push_back({outputs[i].shape(), outputs[i].dtype(), outputs[i].device(), takes_undefined});
    Tensor out = outputs[i];
    out.set_history(node, static_cast<int>(i));
  }
}

}  // namespace

void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, BackwardFn fn,
            const std::vector<int>& undefined_grad_outputs) {
  connect(std::make_shared<FunctionNode>(name, std::move(fn)), inputs, outputs, undefined_grad_outputs);
}

void record_folding(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                    FoldingBackwardFn fn) {
  connect(std::make_shared<FunctionNode>(name, std::move(fn)), inputs, outputs, {});
}

}  // namespace sru::autograd
