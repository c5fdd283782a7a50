// The SRU recurrence composed from basic autograd ops, one time step at a time. It computes what
// ops/sru_recurrence computes (same arguments, same results) but shares no code with the fused
// kernel: it is the test oracle for the kernel's forward and gradients, and a benchmark baseline.
#pragma once

#include <utility>

#include "core/tensor.h"
#include "ops/sru_recurrence.h"

namespace sru::nn {

std::pair<Tensor, Tensor> sru_recurrence_composed(const Tensor& U, const Tensor& x, const Tensor& weight_c,
                                                  const Tensor& bias, const Tensor& c0, const Tensor& mask_c,
                                                  const Tensor& mask_pad, const SruRecurrenceOptions& options);

}  // namespace sru::nn
