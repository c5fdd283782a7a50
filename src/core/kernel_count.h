// Kernel dispatches: every op kernel called through SRU_KERNEL (ops/dispatch.h) and every tensor-level
// fill, copy, conversion and in-place update (core/tensor.cpp), counted on every device, so that the
// per-step count of a training step is the same number on the CPU and on a GPU (where each is at least
// one kernel launch or copy: a bf16 GEMM is three, its two operand roundings and cuBLAS's call) and a
// test here can hold it (train metrics kernels_per_step, srubench train-epoch).
#pragma once

#include <cstdint>

namespace sru {

// The total since the process started (all threads).
uint64_t kernel_dispatches();

namespace detail {
void count_kernel_dispatch();
}  // namespace detail

}  // namespace sru
