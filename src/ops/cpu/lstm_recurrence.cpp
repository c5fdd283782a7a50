// CPU kernels of the fused LSTM recurrence (one layer, one direction). Shapes, state slots and what is
// saved: ops/lstm_recurrence.h; math per element: ops/lstm_math.h.
//
// Forward, per step t (in the direction's order): one sgemm writes h_{t-1} W_hh^T (B, 4H) straight
// into the step's row of the gates buffer, then one pass per batch row adds x_t W_ih^T and the bias,
// applies the nonlinearities in place, and writes c_t, h_t and the output. Backward, per step in
// reverse: one pass per row turns (dL/dh_t + dL/d output_t, dL/dc_t) into dG_t and dL/dc_{t-1}, then
// one sgemm adds dG_t W_hh to dL/dh_{t-1}. Nothing is allocated inside the time loop. Padded rows
// copy the state through (forward) or leave the state gradients alone (backward) and write zeros.
//
// The per-row kernels (ops/cpu/lstm_row_kernels.h) are compiled for the baseline, AVX2 and AVX-512 and
// picked at run time with the SRU recurrence's build; they vectorise (restrict parameters,
// -fno-trapping-math) and give the same bits in every build. Rows are split over threads only when a
// step has enough elements to pay for it; every element's arithmetic is the same for any thread count.

#include <algorithm>
#include <type_traits>
#include <vector>

#define SRU_KERNEL_NAMESPACE baseline
#include "ops/cpu/lstm_row_kernels.h"
#undef SRU_KERNEL_NAMESPACE

#include "core/parallel.h"
#include "ops/cpu/blas.h"
#include "ops/lstm_recurrence.h"
#include "ops/sru_recurrence.h"

namespace sru::cpu {

namespace {

// c = alpha a b^T-or-b + beta c for row-major float/double matrices: a (M, K), b (N, K) when
// b_transposed else (K, N), c (M, N).
template <typename T>
void gemm_rows(int64_t M, int64_t N, int64_t K, const T* a, const T* b, bool b_transposed, T beta, T* c) {
  blas_gemm<T>(false, b_transposed, M, N, K, T(1), a, K, b, b_transposed ? K : N, beta, c, N);
}

// The row kernels of the widest build the processor runs (the SRU recurrence's choice: every build
// gives the same bits).
template <typename T>
LstmRowKernels<T> row_kernels() {
  constexpr bool f32 = std::is_same_v<T, float>;
#if defined(SRU_HAVE_AVX2_KERNELS)
  switch (sru_kernel_isa_in_use()) {
    case SruKernelIsa::Avx512:
      if constexpr (f32) return avx512::lstm_row_kernels_f32();
      else return avx512::lstm_row_kernels_f64();
    case SruKernelIsa::Avx2:
      if constexpr (f32) return avx2::lstm_row_kernels_f32();
      else return avx2::lstm_row_kernels_f64();
    case SruKernelIsa::Baseline: break;
  }
#endif
  if constexpr (f32) return baseline::lstm_row_kernels_f32();
  else return baseline::lstm_row_kernels_f64();
}

template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// dst[0, n) = src's n elements, or zeros when src is undefined.
template <typename T>
void copy_or_zero(const Tensor& src, T* dst, int64_t n) {
  if (src.defined()) std::copy(src.data<T>(), src.data<T>() + n, dst);
  else std::fill(dst, dst + n, T(0));
}

// Sizes and raw pointers of one call.
template <typename T>
struct Shapes {
  int64_t L, B, H;
  const T* padded;  // (L, B) or null
  LstmStateSlots slots;

  explicit Shapes(const LstmTensors& in)
      : L(in.gates_x.size(0)), B(in.gates_x.size(1)), H(in.gates_x.size(2) / 4), padded(data_or_null<T>(in.padded)),
        slots{in.gates_x.size(0), in.reverse} {}
  bool is_padded(int64_t t, int64_t b) const { return padded && padded[t * B + b] != T(0); }
  int64_t time_of(int64_t step) const { return slots.reverse ? L - 1 - step : step; }
  // Runs fn(b) for every batch row, over threads when the step is large enough.
  template <typename F>
  void for_rows(const F& fn) const {
    parallel_for(0, B, std::max<int64_t>(1, kParallelGrain / (4 * H)), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) fn(b);
    });
  }
};

template <typename T>
void forward_impl(const LstmTensors& in, const Tensor& output, const Tensor& gates_t, const Tensor& h_states,
                  const Tensor& c_states) {
  const Shapes<T> s(in);
  const int64_t B = s.B, H = s.H, G = 4 * H, BH = B * H;
  const bool bf16_hidden = in.hidden == LstmHidden::Bf16Values;  // float only: the op checks
  const T* gx = in.gates_x.data<T>();
  const T* w = in.weight_hh.data<T>();
  std::vector<T> zero_bias;
  const T* bias = data_or_null<T>(in.bias);
  if (!bias) zero_bias.assign(static_cast<size_t>(G), T(0)), bias = zero_bias.data();
  T *out = output.data<T>(), *gates = gates_t.data<T>(), *hs = h_states.data<T>(), *cs = c_states.data<T>();
  const LstmRowKernels<T> rows = row_kernels<T>();
  auto* const row_fn = bf16_hidden ? rows.forward_bf16_hidden : rows.forward;
  const int64_t init = s.slots.initial() * BH;
  copy_or_zero<T>(in.h0, hs + init, BH);
  copy_or_zero<T>(in.c0, cs + init, BH);
  for (int64_t step = 0; step < s.L; ++step) {
    const int64_t t = s.time_of(step);
    const T* h_prev = hs + s.slots.before(t) * BH;
    const T* c_prev = cs + s.slots.before(t) * BH;
    T* h = hs + s.slots.after(t) * BH;
    T* c = cs + s.slots.after(t) * BH;
    T* g = gates + t * B * G;
    gemm_rows<T>(B, G, H, h_prev, w, /*b_transposed=*/true, T(0), g);
    s.for_rows([&](int64_t b) {
      const int64_t row = b * H;
      if (s.is_padded(t, b)) {
        std::copy(h_prev + row, h_prev + row + H, h + row);
        std::copy(c_prev + row, c_prev + row + H, c + row);
        std::fill(out + t * BH + row, out + t * BH + row + H, T(0));
        std::fill(g + b * G, g + (b + 1) * G, T(0));
        return;
      }
      row_fn(H, gx + (t * B + b) * G, bias, g + b * G, c_prev + row, c + row, h + row, out + t * BH + row);
    });
  }
}

template <typename T>
void backward_impl(const LstmTensors& in, const Tensor& gates_t, const Tensor& c_states, const Tensor& grad_output,
                   const Tensor& grad_h_last, const Tensor& grad_c_last, const Tensor& grad_gates_t,
                   const Tensor& grad_h0, const Tensor& grad_c0) {
  const Shapes<T> s(in);
  const int64_t B = s.B, H = s.H, G = 4 * H, BH = B * H;
  const T* w = in.weight_hh.data<T>();
  const T *gates = gates_t.data<T>(), *cs = c_states.data<T>(), *gout = data_or_null<T>(grad_output);
  T *grad_gates = grad_gates_t.data<T>(), *dh = grad_h0.data<T>(), *dc = grad_c0.data<T>();
  auto* const row_backward = row_kernels<T>().backward;
  copy_or_zero<T>(grad_h_last, dh, BH);
  copy_or_zero<T>(grad_c_last, dc, BH);
  for (int64_t step = s.L - 1; step >= 0; --step) {
    const int64_t t = s.time_of(step);
    const T* c_prev = cs + s.slots.before(t) * BH;
    const T* c = cs + s.slots.after(t) * BH;
    T* dg = grad_gates + t * B * G;
    s.for_rows([&](int64_t b) {
      if (s.is_padded(t, b)) {  // the state passed through unchanged: so do its gradients
        std::fill(dg + b * G, dg + (b + 1) * G, T(0));
        return;
      }
      const int64_t row = b * H;
      row_backward(H, gates + (t * B + b) * G, c_prev + row, c + row, gout ? gout + t * BH + row : nullptr,
                      dh + row, dc + row, dg + b * G);
    });
    gemm_rows<T>(B, H, G, dg, w, /*b_transposed=*/false, T(1), dh);  // dL/dh_{t-1} += dG_t W_hh
  }
}

}  // namespace

void lstm_recurrence_forward(const LstmTensors& in, const Tensor& output, const Tensor& gates, const Tensor& h_states,
                             const Tensor& c_states) {
  adapt_threads();  // the load is also checked inside, at most every 200 ms (results never depend on it)
  SRU_DISPATCH_FLOATING(in.gates_x.dtype(), "lstm_recurrence", [&]<typename T>() {
    forward_impl<T>(in, output, gates, h_states, c_states);
  });
}

void lstm_recurrence_backward(const LstmTensors& in, const Tensor& gates, const Tensor& c_states,
                              const Tensor& grad_output, const Tensor& grad_h_last, const Tensor& grad_c_last,
                              const Tensor& grad_gates, const Tensor& grad_h0, const Tensor& grad_c0) {
  adapt_threads();
  SRU_DISPATCH_FLOATING(in.gates_x.dtype(), "lstm_recurrence_backward", [&]<typename T>() {
    backward_impl<T>(in, gates, c_states, grad_output, grad_h_last, grad_c_last, grad_gates, grad_h0, grad_c0);
  });
}

}  // namespace sru::cpu
