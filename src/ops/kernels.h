// SRU_DECLARE_KERNELS(declarations...): an op's kernels declared once for both backends. Expands to
// namespace cpu { declarations } namespace cuda { declarations }, so the CPU kernel (ops/cpu/NAME.cpp)
// and its CUDA twin (ops/cuda/NAME.cu) cannot drift apart in signature; SRU_KERNEL (ops/dispatch.h)
// calls one or the other. Builds without the CUDA backend declare the cuda:: functions and never call
// them. Comments inside the argument are fine (they go before the preprocessor sees the macro).
#pragma once

#define SRU_DECLARE_KERNELS(...) \
  namespace cpu {                \
  __VA_ARGS__                    \
  }                              \
  namespace cuda {               \
  __VA_ARGS__                    \
  }
