// Selection ops.
//   masked_fill(x, mask, value): y = mask ? value : x, mask of any dtype (nonzero = true) with x's
//     shape or a trailing shape of it (e.g. a (L, L) causal mask on (B, L, L) scores). dx = mask ? 0 : g.
//   where(cond, a, b): y = cond ? a : b, a and b of one shape, cond that shape or a trailing one.
//     da = cond ? g : 0, db = cond ? 0 : g.
#pragma once

#include "core/tensor.h"
#include "ops/kernels.h"

namespace sru {

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/select.cu) have the same contracts, tensors on one
// CUDA device.
SRU_DECLARE_KERNELS(
// out[i] = cond[i % cond.numel()] != 0 ? (a defined ? a[i] : a_value) : (b defined ? b[i] : b_value)
void select(const Tensor& cond, const Tensor& a, double a_value, const Tensor& b, double b_value, const Tensor& out);
)

}  // namespace sru
