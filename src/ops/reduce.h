// Reductions: sum and mean over one dim (optionally keeping it as size 1) or over all elements.
// Shapes: x viewed as (outer, n, inner) around the reduced dim -> (outer, inner).
// Backward: the incoming gradient is broadcast back along the reduced dim (divided by n for mean).
#pragma once

#include "core/tensor.h"
#include "ops/kernels.h"

namespace sru {

Tensor sum(const Tensor& x, int dim, bool keepdim = false);
Tensor mean(const Tensor& x, int dim, bool keepdim = false);
// sum(x, dim) written over `into` when that is a tensor of the result's shape, dtype and device (a
// backward's autograd::gradient_destination), else sum's new tensor.
Tensor sum_into(const Tensor& x, int dim, const Tensor& into);
Tensor sum(const Tensor& x);   // all elements -> shape ()
Tensor mean(const Tensor& x);  // all elements -> shape ()

// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/reduce.cu) have the same contracts, tensors on one
// CUDA device.
SRU_DECLARE_KERNELS(
// out (outer, inner) = scale * sum over the middle axis of x (outer, n, inner); accumulates in double.
void reduce_middle(const Tensor& x, int64_t outer, int64_t n, int64_t inner, double scale, const Tensor& out);
// out (outer, n, inner) = scale * g (outer, inner) repeated along the middle axis.
void broadcast_middle(const Tensor& g, int64_t outer, int64_t n, int64_t inner, double scale, const Tensor& out);
)

}  // namespace sru
