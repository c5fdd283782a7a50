// Dropout with Philox random numbers: out = x * m, m = Bernoulli(1 - p) / (1 - p).
// Shapes: x any; the mask has x's shape (or, for variational dropout, a caller-made mask of a
// trailing shape, e.g. (B, d) shared across time, applied with mul()).
// Element i keeps when uniform(seed, offset, i) >= p, so CPU and CUDA masks agree for a seed.
// Backward: dx = g * m (the mask is saved).
#pragma once

#include "core/rng.h"
#include "core/tensor.h"

namespace sru {

// Returns x itself when !training or p == 0.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen = default_generator());
// A mask of `shape` with entries 0 or 1/(1-p).
Tensor dropout_mask(const Shape& shape, double p, DType dtype = DType::F32, Generator& gen = default_generator(),
                    Device device = Device::cpu());

namespace cpu {
void fill_dropout_mask(uint64_t seed, uint64_t offset, double p, const Tensor& mask);
}  // namespace cpu
// The CUDA twins (ops/cuda/dropout.cu): same contracts, tensors on one CUDA device.
namespace cuda {
void fill_dropout_mask(uint64_t seed, uint64_t offset, double p, const Tensor& mask);
}  // namespace cuda

}  // namespace sru
