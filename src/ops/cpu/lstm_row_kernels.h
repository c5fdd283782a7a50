// The per-row kernels of the fused LSTM recurrence (ops/cpu/lstm_recurrence.cpp walks time and calls
// them once per batch row and step), as templates included by three translation units:
// cpu/lstm_recurrence.cpp (baseline x86-64), cpu/lstm_recurrence_avx2.cpp (-mavx2) and
// cpu/lstm_recurrence_avx512.cpp (an AVX-512 target region), chosen at run time with the SRU
// recurrence's build (cpu::sru_kernel_isa_in_use). Math per element: ops/lstm_math.h (in float a
// branch-free polynomial sigmoid, so the unit loops vectorise); no fused multiply-adds in any build
// (-ffp-contract=off where the target has FMA), so every build gives the same bits.
//
//   row_forward: gates holds h_{t-1} W_hh^T (4H) on entry and i f g o on return; writes c, h and out
//     (h rounded to bfloat16 values when kBf16Hidden, float only).
//   row_backward: grad_h holds dL/dh_t from later steps on entry and 0 on return (the caller's GEMM then
//     adds dG_t W_hh); grad_c goes from dL/dc_t to dL/dc_{t-1}; grad_out may be null.
// Define SRU_KERNEL_NAMESPACE before including.
#include <cstdint>
#include <type_traits>

#include "core/float16.h"
#include "ops/cpu/lstm_rows.h"
#include "ops/lstm_math.h"

namespace sru::cpu::SRU_KERNEL_NAMESPACE {

namespace {

// The unit loops are out of line with restrict parameters (GCC drops restrict on inlining).
template <typename T, bool kBf16Hidden>
[[gnu::noinline]] void row_forward(int64_t H, const T* __restrict gx, const T* __restrict bias, T* __restrict gates,
                                   const T* __restrict c_prev, T* __restrict c, T* __restrict h, T* __restrict out) {
  for (int64_t j = 0; j < H; ++j) {
    const LstmGates<T> g = lstm_gates((gx[j] + bias[j]) + gates[j], (gx[H + j] + bias[H + j]) + gates[H + j],
                                      (gx[2 * H + j] + bias[2 * H + j]) + gates[2 * H + j],
                                      (gx[3 * H + j] + bias[3 * H + j]) + gates[3 * H + j]);
    lstm_store(gates, H, j, g);
    T h_new;
    c[j] = lstm_step_forward(g, c_prev[j], h_new);
    if constexpr (kBf16Hidden && std::is_same_v<T, float>) h_new = round_to_bf16(h_new);
    h[j] = h_new;
    out[j] = h_new;
  }
}

template <typename T>
[[gnu::noinline]] void row_backward(int64_t H, const T* __restrict gates, const T* __restrict c_prev,
                                    const T* __restrict c, const T* __restrict grad_out, T* __restrict grad_h,
                                    T* __restrict grad_c, T* __restrict grad_gates) {
  for (int64_t j = 0; j < H; ++j) {
    const T gh = grad_out ? grad_h[j] + grad_out[j] : grad_h[j];
    const LstmStepGrads<T> d = lstm_step_backward(lstm_load(gates, H, j), c_prev[j], c[j], gh, grad_c[j]);
    lstm_store(grad_gates, H, j, d.a);
    grad_c[j] = d.c_prev;
    grad_h[j] = T(0);
  }
}

}  // namespace

// This build's row kernels.
LstmRowKernels<float> lstm_row_kernels_f32() {
  return {&row_forward<float, false>, &row_forward<float, true>, &row_backward<float>};
}
LstmRowKernels<double> lstm_row_kernels_f64() {
  return {&row_forward<double, false>, &row_forward<double, false>, &row_backward<double>};
}

}  // namespace sru::cpu::SRU_KERNEL_NAMESPACE
