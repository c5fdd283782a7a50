// Helpers for recurrences written as per-time-step loops of ops (composed SRU, CPU LSTM).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace sru::nn {

// Rows [t, t+1) of a (L, B, n) sequence as (B, n); differentiable.
Tensor time_step(const Tensor& seq, int64_t t);
// The padded flags of mask_pad (L, B) on the host, 1 = padded. A mask on the CPU is read as it is; one
// on a device is copied back (a host wait), so callers that need the flags take masks made on the CPU.
std::vector<uint8_t> padded_flags(const Tensor& mask_pad);
// For each step t, a constant (B, width) mask that is 1 in the rows of padded sequences
// (mask_pad (L, B), nonzero = padded). Empty when mask_pad is undefined.
std::vector<Tensor> padding_masks(const Tensor& mask_pad, int64_t width, DType dtype);

}  // namespace sru::nn
