// CUDA kernels of the Embed-SRU / Super-Embed-SRU recurrence, forward and backward. Math per element:
// ops/embed_sru_math.h, the same SRU_HD code the CPU twins run (ops/cpu/embed_sru_recurrence.cpp);
// shapes and saved state: ops/embed_sru_recurrence.h.
//
// One thread per (batch b, unit j), B*d threads: it walks time carrying c in a register; inputs are
// read at (t*B + b)*d + j, so neighbouring threads read neighbouring units. Every gradient belongs to
// one (t, b, j), so each thread writes its own elements: no reduction, no atomics. Padded steps
// (mask_pad != 0) keep c and output h = 0; the padding mask is first turned into one int per (t, b).
#include "ops/cuda/kernel_util.cuh"
#include "ops/embed_sru_math.h"
#include "ops/embed_sru_recurrence.h"

namespace sru::cuda {

namespace {

template <typename T>
struct Args {
  long long L, B, d;
  const T *u, *f, *r, *x, *c0, *mask_c;
  const int32_t* pad;  // (L, B) or null
  bool use_tanh;
};

template <typename T>
__device__ EmbedSruStepInput<T> input_at(const Args<T>& a, long long pos, T mask) {
  return {a.u[pos], a.f[pos], a.r[pos], a.x[pos], mask};
}

template <typename T, bool SUPER>
__global__ void forward_kernel(Args<T> a, T* __restrict__ h, T* __restrict__ c_all, T* __restrict__ c_last) {
  SRU_GRID_STRIDE(idx, a.B * a.d) {
    const long long b = idx / a.d;
    const T mask = a.mask_c ? a.mask_c[idx] : T(1);
    T c = a.c0 ? a.c0[idx] : T(0);
    for (long long t = 0; t < a.L; ++t) {
      const long long pos = t * a.B * a.d + idx;
      if (a.pad && a.pad[t * a.B + b]) {
        h[pos] = T(0);
        c_all[pos] = c;
        continue;
      }
      T hv;
      c = embed_sru_step_forward<T, SUPER>(input_at(a, pos, mask), c, a.use_tanh, hv);
      h[pos] = hv;
      c_all[pos] = c;
    }
    c_last[idx] = c;
  }
}

template <typename T, bool SUPER>
__global__ void backward_kernel(Args<T> a, const T* __restrict__ c_all, const T* __restrict__ gh,
                                const T* __restrict__ gc_last, T* __restrict__ gu, T* __restrict__ gf,
                                T* __restrict__ gr, T* __restrict__ gx, T* __restrict__ gc0) {
  SRU_GRID_STRIDE(idx, a.B * a.d) {
    const long long b = idx / a.d;
    const T mask = a.mask_c ? a.mask_c[idx] : T(1);
    const T c_init = a.c0 ? a.c0[idx] : T(0);
    T gc = gc_last ? gc_last[idx] : T(0);
    for (long long t = a.L - 1; t >= 0; --t) {
      const long long pos = t * a.B * a.d + idx;
      if (a.pad && a.pad[t * a.B + b]) {  // c passed through unchanged: gc flows on as it is
        gu[pos] = gf[pos] = gr[pos] = gx[pos] = T(0);
        continue;
      }
      const T c_prev = t == 0 ? c_init : c_all[pos - a.B * a.d];
      const EmbedSruStepGrads<T> g =
          embed_sru_step_backward<T, SUPER>(input_at(a, pos, mask), c_prev, c_all[pos], gh[pos], gc, a.use_tanh);
      gu[pos] = g.u;
      gf[pos] = g.f;
      gr[pos] = g.r;
      gx[pos] = g.x;
      gc = g.c_prev;
    }
    if (gc0) gc0[idx] = gc;
  }
}

template <typename T>
Args<T> args_of(const EmbedSruTensors& in, const EmbedSruRecurrenceOptions& o, const Tensor& pad) {
  return {in.u.size(0),          in.u.size(1),           in.u.size(2),        in.u.data<T>(),
          in.f.data<T>(),        in.r.data<T>(),         in.x.data<T>(),      data_or_null<T>(in.c0),
          data_or_null<T>(in.mask_c), data_or_null<int32_t>(pad), o.use_tanh};
}

// Threads per block: one thread per column leaves few threads (B*d), so small blocks spread them over
// more SMs, as the SRU kernels do.
constexpr unsigned kColumnBlock = 64;

}  // namespace

void embed_sru_recurrence_forward(const EmbedSruTensors& in, const EmbedSruRecurrenceOptions& o, const Tensor& h,
                                  const Tensor& c_all, const Tensor& c_last) {
  const Tensor pad = padding_as_int32(in.mask_pad);
  SRU_DISPATCH_FLOATING(in.u.dtype(), "embed_sru_recurrence", [&]<typename T>() {
    const Args<T> a = args_of<T>(in, o, pad);
    const long long threads = a.B * a.d;
    if (threads == 0) return;
    const unsigned grid = grid_for(threads, kColumnBlock);
    const cudaStream_t s = stream_of(in.u);
    if (o.super_embed) forward_kernel<T, true><<<grid, kColumnBlock, 0, s>>>(a, h.data<T>(), c_all.data<T>(), c_last.data<T>());
    else forward_kernel<T, false><<<grid, kColumnBlock, 0, s>>>(a, h.data<T>(), c_all.data<T>(), c_last.data<T>());
    SRU_CUDA_LAUNCH_CHECK("embed_sru forward_kernel");
  });
}

void embed_sru_recurrence_backward(const EmbedSruTensors& in, const EmbedSruRecurrenceOptions& o, const Tensor& c_all,
                                   const Tensor& grad_h, const Tensor& grad_c_last, const Tensor& grad_u,
                                   const Tensor& grad_f, const Tensor& grad_r, const Tensor& grad_x,
                                   const Tensor& grad_c0) {
  const Tensor pad = padding_as_int32(in.mask_pad);
  SRU_DISPATCH_FLOATING(in.u.dtype(), "embed_sru_recurrence_backward", [&]<typename T>() {
    const Args<T> a = args_of<T>(in, o, pad);
    const long long threads = a.B * a.d;
    if (threads == 0) return;
    const unsigned grid = grid_for(threads, kColumnBlock);
    const cudaStream_t s = stream_of(in.u);
    const T *c = c_all.data<T>(), *gh = grad_h.data<T>(), *gc_last = data_or_null<T>(grad_c_last);
    T *gu = grad_u.data<T>(), *gf = grad_f.data<T>(), *gr = grad_r.data<T>(), *gx = grad_x.data<T>();
    T* gc0 = data_or_null<T>(grad_c0);
    if (o.super_embed) backward_kernel<T, true><<<grid, kColumnBlock, 0, s>>>(a, c, gh, gc_last, gu, gf, gr, gx, gc0);
    else backward_kernel<T, false><<<grid, kColumnBlock, 0, s>>>(a, c, gh, gc_last, gu, gf, gr, gx, gc0);
    SRU_CUDA_LAUNCH_CHECK("embed_sru backward_kernel");
  });
}

}  // namespace sru::cuda
