// CUDA kernels of the fused LSTM recurrence (one layer, one direction), the twins of
// ops/cpu/lstm_recurrence.cpp. Shapes, state slots and what is saved: ops/lstm_recurrence.h; math per
// element: ops/lstm_math.h, the same SRU_HD code the CPU runs.
//
// Per step, on the device's stream: one cuBLAS GEMM (h_{t-1} W_hh^T into the step's gate rows, or in
// backward dG_t W_hh added to dL/dh_{t-1}) and one element kernel, one thread per (b, j) of B*H,
// reading and writing the four gate blocks of its unit. Nothing is allocated inside the time loop and
// no value is read back to the host. (nn::LSTM on a GPU uses cuDNN; this op is its CPU twin's twin,
// checked against it by the parity test.)
#include "core/float16.h"
#include "ops/cuda/kernel_util.cuh"
#include "ops/lstm_math.h"
#include "ops/lstm_recurrence.h"

namespace sru::cuda {

namespace {

// Row-major c (M, N) = a (M, K) op(b) + beta c, op(b) = b^T for b (N, K) when b_transposed, else b (K, N);
// as the column-major c^T = op(b)^T a^T (ops/cuda/matmul.cu explains the mapping).
template <typename T>
void gemm_rows(cublasHandle_t handle, int M, int N, int K, const T* a, const T* b, bool b_transposed, T beta, T* c) {
  const T one = T(1);
  const cublasOperation_t opb = b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = b_transposed ? K : N;
  if constexpr (std::is_same_v<T, float>)
    // At the matmul precision, medium as high (TF32): rounding W_hh to bf16 at every step would cost
    // more than it saves and allocate inside the time loop.
    sgemm(handle, opb, CUBLAS_OP_N, N, M, K, one, b, ldb, 0, a, K, 0, beta, c, N, 0, 1, false);
  else
    CUBLAS_CHECK(cublasDgemm(handle, opb, CUBLAS_OP_N, N, M, K, &one, b, ldb, a, K, &beta, c, N));
}

template <typename T>
__global__ void copy_or_zero_kernel(const T* src, T* dst, long long n) {
  SRU_GRID_STRIDE(i, n) dst[i] = src ? src[i] : T(0);
}

// One step's (B, H) elements. padded: this step's B flags (or null); gates: the step's (B, 4H) rows.
// bf16_hidden: h rounded to bfloat16 values (LstmHidden::Bf16Values; float only, as on the CPU).
template <typename T>
struct Step {
  long long B, H;
  const T* padded;
  bool bf16_hidden;
  __device__ bool is_padded(long long b) const { return padded && padded[b] != T(0); }
};

template <typename T>
__global__ void forward_step_kernel(Step<T> s, const T* gx, const T* bias, T* gates, const T* h_prev, const T* c_prev,
                                    T* h, T* c, T* out) {
  SRU_GRID_STRIDE(e, s.B * s.H) {
    const long long b = e / s.H, j = e % s.H, H = s.H;
    T* g = gates + b * 4 * H;
    if (s.is_padded(b)) {
      h[e] = h_prev[e];
      c[e] = c_prev[e];
      out[e] = T(0);
      for (int k = 0; k < 4; ++k) g[k * H + j] = T(0);
      continue;
    }
    const T* x = gx + b * 4 * H;
    T a[4];
    for (int k = 0; k < 4; ++k) a[k] = (x[k * H + j] + (bias ? bias[k * H + j] : T(0))) + g[k * H + j];
    const LstmGates<T> gate = lstm_gates(a[0], a[1], a[2], a[3]);
    lstm_store(g, H, j, gate);
    T h_new;
    c[e] = lstm_step_forward(gate, c_prev[e], h_new);
    if constexpr (std::is_same_v<T, float>)
      if (s.bf16_hidden) h_new = round_to_bf16(h_new);
    h[e] = h_new;
    out[e] = h_new;
  }
}

// grad_h: dL/dh_t on entry, 0 on return at unpadded rows (the GEMM then adds dG_t W_hh).
template <typename T>
__global__ void backward_step_kernel(Step<T> s, const T* gates, const T* c_prev, const T* c, const T* grad_out,
                                     T* grad_h, T* grad_c, T* grad_gates) {
  SRU_GRID_STRIDE(e, s.B * s.H) {
    const long long b = e / s.H, j = e % s.H, H = s.H;
    T* dg = grad_gates + b * 4 * H;
    if (s.is_padded(b)) {
      for (int k = 0; k < 4; ++k) dg[k * H + j] = T(0);
      continue;
    }
    const T gh = grad_out ? grad_h[e] + grad_out[e] : grad_h[e];
    const LstmStepGrads<T> d = lstm_step_backward(lstm_load(gates + b * 4 * H, H, j), c_prev[e], c[e], gh, grad_c[e]);
    lstm_store(dg, H, j, d.a);
    grad_c[e] = d.c_prev;
    grad_h[e] = T(0);
  }
}

template <typename T>
void copy_or_zero(const Tensor& src, T* dst, long long n, cudaStream_t stream) {
  copy_or_zero_kernel<<<grid_for(n), kBlock, 0, stream>>>(data_or_null<T>(src), dst, n);
  SRU_CUDA_LAUNCH_CHECK("lstm copy_or_zero_kernel");
}

// Sizes of one call as the library and the kernels take them.
struct Sizes {
  long long L, B, H;
  int iB, iH, iG;
  LstmStateSlots slots;
  explicit Sizes(const LstmTensors& in)
      : L(in.gates_x.size(0)), B(in.gates_x.size(1)), H(in.gates_x.size(2) / 4),
        iB(checked_int(B, "batch", "lstm_recurrence")), iH(checked_int(H, "hidden size", "lstm_recurrence")),
        iG(checked_int(4 * H, "4 x hidden size", "lstm_recurrence")), slots{in.gates_x.size(0), in.reverse} {}
  long long time_of(long long step) const { return slots.reverse ? L - 1 - step : step; }
};

}  // namespace

void lstm_recurrence_forward(const LstmTensors& in, const Tensor& output, const Tensor& gates, const Tensor& h_states,
                             const Tensor& c_states) {
  const Sizes z(in);
  const long long BH = z.B * z.H, G = 4 * z.H;
  const DeviceContext& ctx = context(in.gates_x.device().index);
  SRU_DISPATCH_FLOATING(in.gates_x.dtype(), "lstm_recurrence", [&]<typename T>() {
    T *hs = h_states.data<T>(), *cs = c_states.data<T>(), *g = gates.data<T>(), *out = output.data<T>();
    const T *gx = in.gates_x.data<T>(), *w = in.weight_hh.data<T>(), *bias = data_or_null<T>(in.bias);
    const T* padded = data_or_null<T>(in.padded);
    copy_or_zero<T>(in.h0, hs + z.slots.initial() * BH, BH, ctx.stream);
    copy_or_zero<T>(in.c0, cs + z.slots.initial() * BH, BH, ctx.stream);
    for (long long step = 0; step < z.L; ++step) {
      const long long t = z.time_of(step), before = z.slots.before(t) * BH, after = z.slots.after(t) * BH;
      gemm_rows<T>(ctx.cublas, z.iB, z.iG, z.iH, hs + before, w, /*b_transposed=*/true, T(0), g + t * z.B * G);
      const Step<T> s{z.B, z.H, padded ? padded + t * z.B : nullptr, in.hidden == LstmHidden::Bf16Values};
      forward_step_kernel<<<grid_for(BH), kBlock, 0, ctx.stream>>>(s, gx + t * z.B * G, bias, g + t * z.B * G,
                                                                   hs + before, cs + before, hs + after, cs + after,
                                                                   out + t * BH);
      SRU_CUDA_LAUNCH_CHECK("lstm forward_step_kernel");
    }
  });
}

void lstm_recurrence_backward(const LstmTensors& in, const Tensor& gates, const Tensor& c_states,
                              const Tensor& grad_output, const Tensor& grad_h_last, const Tensor& grad_c_last,
                              const Tensor& grad_gates, const Tensor& grad_h0, const Tensor& grad_c0) {
  const Sizes z(in);
  const long long BH = z.B * z.H, G = 4 * z.H;
  const DeviceContext& ctx = context(in.gates_x.device().index);
  SRU_DISPATCH_FLOATING(in.gates_x.dtype(), "lstm_recurrence_backward", [&]<typename T>() {
    T *dh = grad_h0.data<T>(), *dc = grad_c0.data<T>(), *dg = grad_gates.data<T>();
    const T *g = gates.data<T>(), *cs = c_states.data<T>(), *w = in.weight_hh.data<T>();
    const T *gout = data_or_null<T>(grad_output), *padded = data_or_null<T>(in.padded);
    copy_or_zero<T>(grad_h_last, dh, BH, ctx.stream);
    copy_or_zero<T>(grad_c_last, dc, BH, ctx.stream);
    for (long long step = z.L - 1; step >= 0; --step) {
      const long long t = z.time_of(step);
      const Step<T> s{z.B, z.H, padded ? padded + t * z.B : nullptr, false};
      backward_step_kernel<<<grid_for(BH), kBlock, 0, ctx.stream>>>(
          s, g + t * z.B * G, cs + z.slots.before(t) * BH, cs + z.slots.after(t) * BH, gout ? gout + t * BH : nullptr,
          dh, dc, dg + t * z.B * G);
      SRU_CUDA_LAUNCH_CHECK("lstm backward_step_kernel");
      gemm_rows<T>(ctx.cublas, z.iB, z.iH, z.iG, dg + t * z.B * G, w, /*b_transposed=*/false, T(1), dh);
    }
  });
}

}  // namespace sru::cuda
