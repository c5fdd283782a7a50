// The backward engine: dependency counting, then a ready queue ordered by node creation (newest first).
#include "autograd/engine.h"

#include <cstring>
#include <queue>
#include <unordered_map>

#include "autograd/node.h"

namespace sru::autograd {

namespace {

// Whether t is the place node offers for its gradient (Node::gradient_destination: a parameter's flat
// slot), which the pass owns until the node runs: gradients may be added into it in place.
bool is_destination_of(const Node& node, const Tensor& t) {
  const Tensor d = node.gradient_destination();
  return d.defined() && t.same_data(d);
}

// a + b for gradient buffers (same shape and dtype); keeps the engine free of the ops layer. When the
// buffer a is this slot's alone (sole_owner, or the node's destination), b is added into it: one
// dispatch instead of a copy and an add, the same values.
Tensor add_buffers(Tensor& a, const Tensor& b, bool owned) {
  check_same_shape(a, b, "gradient accumulation");
  if (owned || sole_owner(a)) return a.add_(b);
  Tensor sum = a.clone();
  sum.add_(b);
  return sum;
}

// Gradients waiting for each node, one slot per output of it, until the node runs.
using Buffers = std::unordered_map<Node*, std::vector<Tensor>>;

// Sums g into the slot of edge e's node.
void deliver(Buffers& buffers, const Edge& e, const Tensor& g) {
  auto& slots = buffers[e.fn.get()];
  slots.resize(e.fn->outputs.size());
  Tensor& slot = slots[e.input_nr];
  slot = slot.defined() ? add_buffers(slot, g, is_destination_of(*e.fn, slot)) : g;
}

// The gradient buffered for edge e's node so far, or null when there is none.
template <typename B>
auto* buffered_gradient(B& buffers, const Edge& e) {
  const auto waiting = buffers.find(e.fn.get());
  auto* slot = waiting != buffers.end() && e.input_nr < static_cast<int>(waiting->second.size())
                   ? &waiting->second[e.input_nr]
                   : nullptr;
  return slot && slot->defined() ? slot : nullptr;
}

// What a folding node may add its gradients into (autograd/node.h FoldingBackwardFn), per input:
// the gradient other consumers already sent, moved out of the buffers where the buffer is its only
// handle; or, for a leaf that has a .grad from earlier passes and gets no other gradient in this one
// (this edge is the last one into its accumulator, nothing buffered), that .grad, borrowed: AccumulateGrad
// then finds the sum already in place. Undefined elsewhere.
struct PendingGradients {
  std::vector<Tensor> tensors;
  std::vector<bool> borrowed;  // a leaf's .grad: never handed back to the buffers
};

PendingGradients take_pending_gradients(const Node& node, Buffers& buffers,
                                        const std::unordered_map<Node*, int>& dependencies) {
  PendingGradients pending{std::vector<Tensor>(node.next_edges.size()), std::vector<bool>(node.next_edges.size())};
  for (size_t i = 0; i < node.next_edges.size(); ++i) {
    const Edge& e = node.next_edges[i];
    if (!e.fn) continue;
    if (Tensor* slot = buffered_gradient(buffers, e)) {
      if (sole_owner(*slot) || is_destination_of(*e.fn, *slot)) pending.tensors[i] = std::move(*slot);
      continue;
    }
    const auto count = dependencies.find(e.fn.get());
    if (count != dependencies.end() && count->second == 1) {
      pending.tensors[i] = e.fn->existing_gradient();
      pending.borrowed[i] = pending.tensors[i].defined();
    }
  }
  return pending;
}

// The places offered for the node's input gradients (Node::gradient_destination): for each input whose
// node has no gradient buffered yet, that node's destination, to the first of this node's edges into it
// only (two writes would overwrite each other). Later gradients for it are added into the place
// (deliver, or a folding node's pending gradient).
std::vector<Tensor> gradient_destinations(const Node& node, const Buffers& buffers) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < node.next_edges.size(); ++i) {
    const Edge& e = node.next_edges[i];
    if (!e.fn) continue;
    const Tensor d = e.fn->gradient_destination();
    if (!d.defined()) continue;
    bool earlier_edge = false;
    for (size_t j = 0; j < i; ++j) earlier_edge = earlier_edge || node.next_edges[j].fn == e.fn;
    if (earlier_edge || buffered_gradient(buffers, e)) continue;
    out.resize(node.next_edges.size());
    out[i] = d;
  }
  return out;
}

// Runs one node on its summed output gradients and delivers the gradients it returns to its inputs'
// nodes, readying those whose last dependency this was.
template <typename Ready>
void run_node(Node* node, Buffers& buffers, std::unordered_map<Node*, int>& dependencies, Ready& ready,
              bool retain_graph) {
  std::vector<Tensor> grad_outputs = std::move(buffers[node]);
  buffers.erase(node);
  grad_outputs.resize(node->outputs.size());
  for (size_t i = 0; i < grad_outputs.size(); ++i)
    if (!grad_outputs[i].defined() && !node->outputs[i].takes_undefined_grad)
      grad_outputs[i] = Tensor::zeros(node->outputs[i].shape, node->outputs[i].dtype, node->outputs[i].device);

  // Destinations first: an input whose gradient is buffered (and may be handed over as pending) gets none.
  const std::vector<Tensor> destinations = gradient_destinations(*node, buffers);
  PendingGradients pending;
  if (node->folds_pending()) pending = take_pending_gradients(*node, buffers, dependencies);
  std::vector<Tensor> grad_inputs;
  {
    const DestinationScope offered(destinations.empty() ? nullptr : &destinations);
    grad_inputs = node->folds_pending() ? node->apply(std::move(grad_outputs), pending.tensors)
                                        : node->apply(std::move(grad_outputs));
  }
  if (!retain_graph) node->release_saved();
  SRU_CHECK(grad_inputs.empty() || grad_inputs.size() == node->next_edges.size(), node->name(), " returned ",
            grad_inputs.size(), " gradients for ", node->next_edges.size(), " inputs");
  // A place offered for input j is that input's alone: returned for another input, its accumulator
  // would add into a buffer the other one also holds.
  for (size_t j = 0; j < destinations.size(); ++j) {
    if (!destinations[j].defined()) continue;
    for (size_t i = 0; i < grad_inputs.size(); ++i)
      SRU_CHECK(i == j || !grad_inputs[i].defined() || !is_destination_of(*node->next_edges[j].fn, grad_inputs[i]),
                "internal: ", node->name(), " returned the gradient place of input ", j, " for input ", i);
  }

  for (size_t i = 0; i < node->next_edges.size(); ++i) {
    const Edge& e = node->next_edges[i];
    if (!e.fn) continue;
    // Handed over and not folded: a buffered gradient goes back; a borrowed .grad stays where it is.
    // Folded into a borrowed .grad: its accumulator is told, so that it does not add the sum again.
    Tensor unfolded = take_pending(pending.tensors, i);
    if (i < pending.borrowed.size() && pending.borrowed[i]) {
      if (!unfolded.defined()) e.fn->gradient_folded_into_existing();
    } else if (unfolded.defined()) {
      deliver(buffers, e, unfolded);
    }
    if (i < grad_inputs.size() && grad_inputs[i].defined()) {
      const OutputMeta& meta = e.fn->outputs[e.input_nr];
      SRU_CHECK(grad_inputs[i].shape() == meta.shape, node->name(), ": gradient for input ", i, " has shape ",
                shape_str(grad_inputs[i].shape()), ", expected ", shape_str(meta.shape));
      SRU_CHECK(grad_inputs[i].dtype() == meta.dtype, node->name(), ": gradient for input ", i, " is ",
                dtype_name(grad_inputs[i].dtype()), ", the input is ", dtype_name(meta.dtype));
      deliver(buffers, e, grad_inputs[i]);
    }
    if (--dependencies[e.fn.get()] == 0) ready.push(e.fn.get());
  }
}

struct ByNewest {
  bool operator()(const Node* x, const Node* y) const { return x->sequence_nr < y->sequence_nr; }
};

}  // namespace

void backward(const Tensor& root, const Tensor& grad, bool retain_graph) {
  backward(std::vector<Tensor>{root}, std::vector<Tensor>{grad}, retain_graph);
}

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph) {
  SRU_CHECK(roots.size() == grads.size(), "backward: ", roots.size(), " roots but ", grads.size(), " gradients");
  NoGradGuard no_grad;

  // Seed gradients, keyed by the node each root flows into.
  Buffers buffers;
  std::vector<std::shared_ptr<Node>> seeds;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    SRU_CHECK(root.requires_grad(), "backward: tensor ", root.str(),
              " does not require grad (no input of the computation was marked requires_grad)");
    Tensor g = grads[i];
    if (!g.defined()) {
      SRU_CHECK(root.numel() == 1, "backward: a gradient must be given for the non-scalar tensor ", root.str());
      g = Tensor::ones(root.shape(), root.dtype(), root.device());
    }
    check_same_shape(root, g, "backward seed");
    check_same_dtype(root, g, "backward seed");
    Edge edge = gradient_edge(root);
    deliver(buffers, edge, g);
    seeds.push_back(edge.fn);
  }

  // Count, for every reachable node, how many edges point at it.
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> unique_seeds;
  std::unordered_map<Node*, bool> seen;
  for (auto& s : seeds)
    if (!seen[s.get()]) { seen[s.get()] = true; unique_seeds.push_back(s.get()); }
  std::vector<Node*> stack = unique_seeds;
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& e : node->next_edges) {
      if (!e.fn) continue;
      ++dependencies[e.fn.get()];
      if (!seen[e.fn.get()]) { seen[e.fn.get()] = true; stack.push_back(e.fn.get()); }
    }
  }

  std::priority_queue<Node*, std::vector<Node*>, ByNewest> ready;
  for (Node* s : unique_seeds)
    if (dependencies[s] == 0) ready.push(s);

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    run_node(node, buffers, dependencies, ready, retain_graph);
  }
}

}  // namespace sru::autograd
