// Kernel dispatches: every op kernel called through SRU_KERNEL (ops/dispatch.h) and every tensor-level
// fill, copy within a device, conversion and in-place update (core/tensor.cpp), counted on every device,
// so that a training step's count is the same number on the CPU and on a GPU wherever both take the same
// path (not the LSTM: cuDNN on a GPU is outside SRU_KERNEL), and a test here can hold it (metrics.jsonl
// kernels_per_step, srubench train-epoch). On a GPU each is at least one launch (a bf16 GEMM three: its
// two operand roundings and cuBLAS's call); host-device transfers are not counted.
//
// The host profile (srubench train-epoch --host-profile): while on, every dispatch, every cuDNN LSTM call
// and the start and end of every device wait leave a (name, time) mark, and the host time from one mark
// to the next is charged to the first: where a host-bound GPU step spends its issuing time, by op
// (allocation, autograd records and the launch itself included), without a host profiler on the machine.
// SRU_HOST_PROFILE_CONTEXT=NAME also prints NAME's time split by the marks around it (which call site of
// an op holds the host: 2026-11-28's "embedding_forward > unary > copy_to_device" found the host-built
// position table of a translation step).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sru {

// The total since the process started (all threads).
uint64_t kernel_dispatches();

// One line of the host profile: the host time charged to the marks of one name.
struct HostProfileEntry {
  std::string name;
  uint64_t marks = 0;
  double total_us = 0;
};

// Starts recording marks (clearing earlier ones); the marks of all threads go into one list.
void start_host_profile();
// Stops recording and returns the host time per name from the first mark to the last, largest first.
std::vector<HostProfileEntry> stop_host_profile();

namespace detail {
// `name`: the kernel's base name (a string literal: the profile keeps the pointer).
void count_kernel_dispatch(const char* name);
// A mark of the host profile that is no dispatch (a library call, a wait's start or end).
void host_profile_mark(const char* name);
}  // namespace detail

}  // namespace sru
