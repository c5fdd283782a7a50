// Kernel dispatches: every op kernel called through SRU_KERNEL (ops/dispatch.h) and every tensor-level
// fill, copy within a device, conversion and in-place update (core/tensor.cpp), counted on every device,
// so that a training step's count is the same number on the CPU and on a GPU wherever both take the same
// path (not the LSTM: cuDNN on a GPU is outside SRU_KERNEL), and a test here can hold it (metrics.jsonl
// kernels_per_step, srubench train-epoch). On a GPU each is at least one launch (a bf16 GEMM three: its
// two operand roundings and cuBLAS's call); host-device transfers are not counted.
#pragma once

#include <cstdint>

namespace sru {

// The total since the process started (all threads).
uint64_t kernel_dispatches();

namespace detail {
void count_kernel_dispatch();
}  // namespace detail

}  // namespace sru
