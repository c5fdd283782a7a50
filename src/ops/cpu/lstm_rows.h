// The fused LSTM recurrence's per-row kernels as a table of function pointers, one table per build
// (baseline x86-64, AVX2, AVX-512: ops/cpu/lstm_row_kernels.h) and element type, so that
// ops/cpu/lstm_recurrence.cpp picks a build once per call and calls its rows directly.
#pragma once

#include <cstdint>

namespace sru::cpu {

template <typename T>
struct LstmRowKernels {
  // One row's forward step (ops/cpu/lstm_row_kernels.h row_forward): exact h, and h rounded to bfloat16
  // values (float only; the double entry is the exact one).
  void (*forward)(int64_t H, const T* gx, const T* bias, T* gates, const T* c_prev, T* c, T* h, T* out);
  void (*forward_bf16_hidden)(int64_t H, const T* gx, const T* bias, T* gates, const T* c_prev, T* c, T* h, T* out);
  void (*backward)(int64_t H, const T* gates, const T* c_prev, const T* c, const T* grad_out, T* grad_h, T* grad_c,
                   T* grad_gates);
};

#define SRU_DECLARE_LSTM_ROWS(isa)                 \
  namespace isa {                                  \
  LstmRowKernels<float> lstm_row_kernels_f32();    \
  LstmRowKernels<double> lstm_row_kernels_f64();   \
  }
SRU_DECLARE_LSTM_ROWS(baseline)
#if defined(SRU_HAVE_AVX2_KERNELS)
SRU_DECLARE_LSTM_ROWS(avx2)
SRU_DECLARE_LSTM_ROWS(avx512)
#endif
#undef SRU_DECLARE_LSTM_ROWS

}  // namespace sru::cpu
