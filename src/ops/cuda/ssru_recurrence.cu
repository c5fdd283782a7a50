// CUDA kernels of the SSRU recurrence, forward and backward. Math per element: ops/ssru_math.h, the same
// SRU_HD code the CPU twins run (ops/cpu/ssru_recurrence.cpp); shapes and saved state:
// ops/ssru_recurrence.h.
//
// One thread per (batch b, unit j), B*d threads: it walks time carrying c in a register; z is read at
// (t*B + b)*2d + j and u_f d further, h and c at (t*B + b)*d + j, so neighbouring threads read
// neighbouring units. Every gradient belongs to one (t, b, j), so each thread writes its own elements:
// no reduction, no atomics. Padded steps (mask_pad != 0) keep c and output h = 0; the padding mask is
// first turned into one int per (t, b). Bytes per (t, b, j): forward 16 at float32 (U 8, h 4, c 4),
// backward 24 (U, c, grad h, grad U 8).
#include "ops/cuda/kernel_util.cuh"
#include "ops/ssru_math.h"
#include "ops/ssru_recurrence.h"

namespace sru::cuda {

namespace {

template <typename T>
struct Args {
  long long L, B, d;
  const T *U, *bias, *c0;
  const int32_t* pad;  // (L, B) or null
};

template <typename T>
__global__ void forward_kernel(Args<T> a, T* __restrict__ h, T* __restrict__ c_all, T* __restrict__ c_last) {
  SRU_GRID_STRIDE(idx, a.B * a.d) {
    const long long b = idx / a.d, j = idx % a.d;
    T c = a.c0 ? a.c0[idx] : T(0);
    const T bf = a.bias ? a.bias[j] : T(0);
    for (long long t = 0; t < a.L; ++t) {
      const long long pos = t * a.B * a.d + idx, at_u = (t * a.B + b) * 2 * a.d + j;
      if (a.pad && a.pad[t * a.B + b]) {
        h[pos] = T(0);
        c_all[pos] = c;
        continue;
      }
      T hv;
      c = ssru_step_forward<T>(a.U[at_u], a.U[at_u + a.d], bf, c, hv);
      h[pos] = hv;
      c_all[pos] = c;
    }
    c_last[idx] = c;
  }
}

template <typename T>
__global__ void backward_kernel(Args<T> a, const T* __restrict__ c_all, const T* __restrict__ gh,
                                const T* __restrict__ gc_last, T* __restrict__ gU, T* __restrict__ gc0) {
  SRU_GRID_STRIDE(idx, a.B * a.d) {
    const long long b = idx / a.d, j = idx % a.d;
    const T c_init = a.c0 ? a.c0[idx] : T(0);
    const T bf = a.bias ? a.bias[j] : T(0);
    T gc = gc_last ? gc_last[idx] : T(0);
    for (long long t = a.L - 1; t >= 0; --t) {
      const long long pos = t * a.B * a.d + idx, at_u = (t * a.B + b) * 2 * a.d + j;
      if (a.pad && a.pad[t * a.B + b]) {  // c passed through unchanged: gc flows on as it is
        gU[at_u] = gU[at_u + a.d] = T(0);
        continue;
      }
      const T c_prev = t == 0 ? c_init : c_all[pos - a.B * a.d];
      const SsruStepGrads<T> g = ssru_step_backward<T>(a.U[at_u], a.U[at_u + a.d], bf, c_prev, c_all[pos], gh[pos], gc);
      gU[at_u] = g.z;
      gU[at_u + a.d] = g.u_f;
      gc = g.c_prev;
    }
    if (gc0) gc0[idx] = gc;
  }
}

template <typename T>
Args<T> args_of(const SsruTensors& in, const Tensor& pad) {
  return {in.U.size(0),          in.U.size(1),           in.U.size(2) / 2,          in.U.data<T>(),
          data_or_null<T>(in.forget_bias), data_or_null<T>(in.c0), data_or_null<int32_t>(pad)};
}

// Threads per block: one thread per column leaves few threads (B*d), so small blocks spread them over
// more SMs, as the SRU kernels do.
constexpr unsigned kColumnBlock = 64;

}  // namespace

void ssru_recurrence_forward(const SsruTensors& in, const Tensor& h, const Tensor& c_all, const Tensor& c_last) {
  const Tensor pad = padding_as_int32(in.mask_pad);
  SRU_DISPATCH_FLOATING(in.U.dtype(), "ssru_recurrence", [&]<typename T>() {
    const Args<T> a = args_of<T>(in, pad);
    const long long threads = a.B * a.d;
    if (threads == 0) return;
    forward_kernel<T><<<grid_for(threads, kColumnBlock), kColumnBlock, 0, stream_of(in.U)>>>(
        a, h.data<T>(), c_all.data<T>(), c_last.data<T>());
    SRU_CUDA_LAUNCH_CHECK("ssru forward_kernel");
  });
}

void ssru_recurrence_backward(const SsruTensors& in, const Tensor& c_all, const Tensor& grad_h,
                              const Tensor& grad_c_last, const Tensor& grad_U, const Tensor& grad_c0) {
  const Tensor pad = padding_as_int32(in.mask_pad);
  SRU_DISPATCH_FLOATING(in.U.dtype(), "ssru_recurrence_backward", [&]<typename T>() {
    const Args<T> a = args_of<T>(in, pad);
    const long long threads = a.B * a.d;
    if (threads == 0) return;
    backward_kernel<T><<<grid_for(threads, kColumnBlock), kColumnBlock, 0, stream_of(in.U)>>>(
        a, c_all.data<T>(), grad_h.data<T>(), data_or_null<T>(grad_c_last), grad_U.data<T>(), data_or_null<T>(grad_c0));
    SRU_CUDA_LAUNCH_CHECK("ssru backward_kernel");
  });
}

}  // namespace sru::cuda
