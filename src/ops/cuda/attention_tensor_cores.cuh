// The fused attention's bf16 tensor-core kernels (ops/cuda/attention_tensor_cores.cu), which
// fused_attention_forward / _backward (ops/cuda/attention.cu) use where they apply, and the switch and
// counter the tests use to run both paths on one card.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "ops/attention.h"

namespace sru::cuda {

// Whether the tensor-core kernels take this call: bf16, dh = dv = 64, at least 16 queries a head,
// compute capability >= 8.0 with kernels built for it, q, k, v and `others` (the call's other operands:
// out; the backward's grad_out and gradients) 4-byte aligned with even strides, and not switched off
// (allow_tensor_core_attention).
bool tensor_core_attention_applies(const AttentionTensors& in, const AttentionShape& s,
                                   std::initializer_list<const Tensor*> others);
void tensor_core_attention_forward(const AttentionTensors& in, const AttentionShape& s, const AttentionDropout& drop,
                                   const Tensor& out, const Tensor& lse);
void tensor_core_attention_backward(const AttentionTensors& in, const AttentionShape& s, const AttentionDropout& drop,
                                    const Tensor& out, const Tensor& lse, const Tensor& grad_out, const Tensor& row_dot,
                                    const Tensor& gq, const Tensor& gk, const Tensor& gv);

}  // namespace sru::cuda
