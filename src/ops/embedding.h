// Embedding lookup: out[..., :] = weight[indices[...], :].
// Shapes: weight (V, D), indices (...) i64 or i32 -> out (..., D).
// Backward: scatter-add of the output gradient rows into a zeroed (V, D) gradient; rows of
// padding_idx (when >= 0) get no gradient. Deterministic, no atomics: on the CPU each thread owns a
// range of columns; on a GPU each index's positions (sorted) are summed in a fixed order (cuda/embedding.cu).
#pragma once

#include <string>

#include "core/tensor.h"
#include "ops/kernels.h"

namespace sru {

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);
// The message for index k at position i outside [0, V), the same from both kernels (the CUDA forward
// reports it at the next host wait: cuda::reserve_error_slot).
std::string embedding_index_error(int64_t k, int64_t i, int64_t V);

// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/embedding.cu) have the same contracts, tensors on one
// CUDA device.
SRU_DECLARE_KERNELS(
void embedding_forward(const Tensor& weight, const Tensor& indices, const Tensor& out);
// grad_weight += rows of grad scattered by indices (grad_weight must be zeroed by the caller).
void embedding_backward(const Tensor& grad, const Tensor& indices, int64_t padding_idx, const Tensor& grad_weight);
)

}  // namespace sru
