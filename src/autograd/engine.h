// Reverse-mode backward engine: runs the graph's nodes in reverse topological order, summing the
// gradients that meet at a node before running it.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace sru::autograd {

// Back-propagates from `root`. `grad` defaults to 1 for a one-element root (a loss) and is required
// otherwise. Gradients accumulate (+=) into the .grad of leaves that require grad. Saved tensors are
// freed as nodes run unless retain_graph is true.
void backward(const Tensor& root, const Tensor& grad = Tensor(), bool retain_graph = false);
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph = false);

}  // namespace sru::autograd
