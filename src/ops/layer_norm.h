// Layer normalisation over the last dim.
// Shapes: x (..., D) viewed as rows (N, D); weight, bias (D) optional (undefined = 1 and 0).
//   mean_n = sum_j x_nj / D;  rstd_n = 1 / sqrt(sum_j (x_nj - mean_n)^2 / D + eps)
//   xhat = (x - mean) * rstd;  y = xhat * weight + bias
// Saves mean and rstd (N). Backward, with gh = g * weight:
//   dx = rstd * (gh - mean_j(gh) - xhat * mean_j(gh * xhat));  dweight = sum_n g * xhat;  dbias = sum_n g
#pragma once

#include "core/tensor.h"
#include "ops/kernels.h"

namespace sru {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/layer_norm.cu) have the same contracts, tensors on one
// CUDA device.
SRU_DECLARE_KERNELS(
void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                        const Tensor& mean, const Tensor& rstd);
// Writes dx, and dweight / dbias when defined (overwritten, not accumulated).
void layer_norm_backward(const Tensor& g, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dx, const Tensor& dweight, const Tensor& dbias);
)

}  // namespace sru
