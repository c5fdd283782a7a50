// CUDA kernels of the fused SRU recurrence (paper Algorithm 1), forward and backward, both directions
// in one launch. Math per element: ops/sru_math.h, the same SRU_HD code the CPU twins run
// (ops/cpu/sru_recurrence_kernels.h); shapes and saved state: ops/sru_recurrence.h.
//
// One thread per (batch b, output column col = dir*d + j), B*out threads: it walks time in its
// direction carrying c in a register, loading the inputs of kChunk steps before computing them (more
// loads in flight). U is read at ((t*B + b)*out + col)*k + m, so neighbouring threads read
// neighbouring columns. The backward thread accumulates d vf, d vr, d bf, d br of its
// column in T (float32 for float) over time and writes them per batch row; a second kernel sums the
// B rows per column in order (deterministic, same order as the CPU). Padded steps (mask_pad != 0)
// keep c and output h = 0; the padding mask is first turned into one int per (t, b).
#include "ops/cuda/kernel_util.cuh"
#include "ops/sru_math.h"
#include "ops/sru_recurrence.h"

namespace sru::cuda {

namespace {

template <typename T>
struct Args {
  long long L, B, d, out;
  const T *U, *x, *weight_c, *bias, *c0, *mask_c;
  const int32_t* pad;  // (L, B) or null
  const T* scale_x;    // (1) on the device, or null: then `scale`
  T scale;
  bool has_skip, use_tanh;
};

// One thread's column: batch row b, output column col = dir*d + j, its per-unit parameters, and the
// mapping from processing step (direction 1 runs from t = L-1 down) to time and element position.
template <typename T>
struct Column {
  const Args<T>& a;
  long long idx, b, col, dir;
  T vf, vr, bf, br, mask, c0, scale;

  __device__ Column(const Args<T>& args, long long i)
      : a(args), idx(i), b(i / args.out), col(i % args.out), dir(col / args.d), vf(args.weight_c[col]),
        vr(args.weight_c[args.out + col]), bf(args.bias[col]), br(args.bias[args.out + col]),
        mask(args.mask_c ? args.mask_c[i] : T(1)), c0(args.c0 ? args.c0[i] : T(0)),
        scale(args.scale_x ? args.scale_x[0] : args.scale) {}
  __device__ long long time_of(long long step) const { return dir == 0 ? step : a.L - 1 - step; }
  __device__ long long position_of(long long t) const { return (t * a.B + b) * a.out + col; }
  __device__ bool padded(long long t) const { return a.pad && a.pad[t * a.B + b]; }

  // The step input at element position pos (U row pos*K, x at pos).
  template <int K>
  __device__ SruStepInput<T> input(long long pos) const {
    SruStepInput<T> in;
    const T* u = a.U + pos * K;
    in.u0 = u[0];
    in.u1 = u[1];
    in.u2 = u[2];
    if constexpr (K == 4) in.x_skip = u[3];
    else in.x_skip = a.has_skip ? scale * a.x[pos] : T(0);
    in.vf = vf;
    in.vr = vr;
    in.bf = bf;
    in.br = br;
    in.mask = mask;
    return in;
  }
};

// Steps whose inputs a thread loads before computing any of them. One thread per column leaves few
// warps per SM (B*out threads), so a thread that loaded one step at a time would wait a memory round
// trip per step; loading kChunk steps first keeps kChunk times more loads in flight.
constexpr int kChunk = 8;
// Threads per block of the column kernels: small blocks spread few columns (B*out) over more SMs.
constexpr unsigned kColumnBlock = 64;

template <typename T, int K>
__global__ void forward_kernel(Args<T> a, T* __restrict__ h, T* __restrict__ c_all, T* __restrict__ c_last) {
  SRU_GRID_STRIDE(idx, a.B * a.out) {
    const Column<T> column(a, idx);
    T c = column.c0;
    for (long long first = 0; first < a.L; first += kChunk) {
      SruStepInput<T> in[kChunk];
      bool padded[kChunk];
#pragma unroll
      for (int s = 0; s < kChunk; ++s) {
        const long long step = first + s;
        if (step >= a.L) break;
        const long long t = column.time_of(step);
        padded[s] = column.padded(t);
        in[s] = column.template input<K>(column.position_of(t));
      }
#pragma unroll
      for (int s = 0; s < kChunk; ++s) {
        const long long step = first + s;
        if (step >= a.L) break;
        const long long t = column.time_of(step);
        const long long pos = column.position_of(t);
        if (padded[s]) {
          h[pos] = T(0);
          c_all[pos] = c;
          continue;
        }
        T hv;
        c = sru_step_forward(in[s], c, a.use_tanh, a.has_skip, hv);
        h[pos] = hv;
        c_all[pos] = c;
      }
    }
    c_last[idx] = c;
  }
}

template <typename T, int K>
__global__ void backward_kernel(Args<T> a, const T* __restrict__ c_all, const T* __restrict__ gh,
                                const T* __restrict__ gc_last, T* __restrict__ gU, T* __restrict__ gx,
                                T* __restrict__ gc0, T* __restrict__ part_v, T* __restrict__ part_b /* (B, 2*out) each */) {
  SRU_GRID_STRIDE(idx, a.B * a.out) {
    const Column<T> column(a, idx);
    T gc = gc_last ? gc_last[idx] : T(0);
    T acc_vf = T(0), acc_vr = T(0), acc_bf = T(0), acc_br = T(0);
    // Walks the processing order backwards (step = L-1 .. 0), kChunk steps at a time.
    for (long long last = a.L - 1; last >= 0; last -= kChunk) {
      SruStepInput<T> in[kChunk];
      T c_cur[kChunk], c_prev[kChunk], g_h[kChunk];
      bool padded[kChunk];
#pragma unroll
      for (int s = 0; s < kChunk; ++s) {
        const long long step = last - s;
        if (step < 0) break;
        const long long t = column.time_of(step);
        const long long pos = column.position_of(t);
        padded[s] = column.padded(t);
        in[s] = column.template input<K>(pos);
        c_cur[s] = c_all[pos];
        g_h[s] = gh[pos];
        // The state before this step in processing order.
        c_prev[s] = step == 0 ? column.c0 : c_all[column.position_of(column.dir == 0 ? t - 1 : t + 1)];
      }
#pragma unroll
      for (int s = 0; s < kChunk; ++s) {
        const long long step = last - s;
        if (step < 0) break;
        const long long t = column.time_of(step);
        const long long pos = column.position_of(t);
        if (padded[s]) {  // c passed through unchanged: gc flows on as it is
          for (int k = 0; k < K; ++k) gU[pos * K + k] = T(0);
          if (gx) gx[pos] = T(0);
          continue;
        }
        const SruStepGrads<T> g = sru_step_backward(in[s], c_prev[s], c_cur[s], g_h[s], gc, a.use_tanh, a.has_skip);
        gU[pos * K] = g.u0;
        gU[pos * K + 1] = g.u1;
        gU[pos * K + 2] = g.u2;
        if constexpr (K == 4) gU[pos * K + 3] = g.x_skip;
        if (K == 3 && a.has_skip && gx) gx[pos] = g.x_skip * column.scale;
        acc_vf += g.vf;
        acc_vr += g.vr;
        acc_bf += g.u1;
        acc_br += g.u2;
        gc = g.c_prev;
      }
    }
    if (gc0) gc0[idx] = gc;
    T* pv = part_v + column.b * 2 * a.out;
    T* pb = part_b + column.b * 2 * a.out;
    pv[column.col] = acc_vf;
    pv[a.out + column.col] = acc_vr;
    pb[column.col] = acc_bf;
    pb[a.out + column.col] = acc_br;
  }
}

// grad_weight_c[i] = sum over b of part_v[b, i] (and grad_bias from part_b), b in order.
template <typename T>
__global__ void reduce_batch_kernel(const T* part_v, const T* part_b, long long B, long long width, T* gw, T* gb) {
  SRU_GRID_STRIDE(i, width) {
    T sv = T(0), sb = T(0);
    for (long long b = 0; b < B; ++b) {
      sv += part_v[b * width + i];
      sb += part_b[b * width + i];
    }
    gw[i] = sv;
    gb[i] = sb;
  }
}

template <typename T>
Args<T> args_of(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& pad) {
  const long long D = o.bidirectional ? 2 : 1;
  return {in.U.size(0), in.U.size(1), o.hidden_size, D * o.hidden_size,
          in.U.data<T>(), data_or_null<T>(in.x), in.weight_c.data<T>(), in.bias.data<T>(),
          data_or_null<T>(in.c0), data_or_null<T>(in.mask_c), data_or_null<int32_t>(pad),
          data_or_null<T>(in.scale_x), static_cast<T>(o.scale_x), o.has_skip_term, o.use_tanh};
}

}  // namespace

void sru_recurrence_forward(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& h, const Tensor& c_all,
                            const Tensor& c_last) {
  const Tensor pad = padding_as_int32(in.mask_pad);
  SRU_DISPATCH_FLOATING(in.U.dtype(), "sru_recurrence", [&]<typename T>() {
    const Args<T> a = args_of<T>(in, o, pad);
    const long long threads = a.B * a.out;
    if (threads == 0) return;
    const cudaStream_t s = stream_of(in.U);
    const unsigned grid = grid_for(threads, kColumnBlock);
    if (o.k == 4) forward_kernel<T, 4><<<grid, kColumnBlock, 0, s>>>(a, h.data<T>(), c_all.data<T>(), c_last.data<T>());
    else forward_kernel<T, 3><<<grid, kColumnBlock, 0, s>>>(a, h.data<T>(), c_all.data<T>(), c_last.data<T>());
    SRU_CUDA_LAUNCH_CHECK("sru forward_kernel");
  });
}

void sru_recurrence_backward(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& c_all,
                             const Tensor& grad_h, const Tensor& grad_c_last, const Tensor& grad_U,
                             const Tensor& grad_x, const Tensor& grad_weight_c, const Tensor& grad_bias,
                             const Tensor& grad_c0) {
  const Tensor pad = padding_as_int32(in.mask_pad);
  SRU_DISPATCH_FLOATING(in.U.dtype(), "sru_recurrence_backward", [&]<typename T>() {
    const Args<T> a = args_of<T>(in, o, pad);
      const Shape part_shape{static_cast<int64_t>(a.B), static_cast<int64_t>(2 * a.out)};
    Tensor part_v = Tensor::empty(part_shape, in.U.dtype(), in.U.device());
    Tensor part_b = Tensor::empty(part_shape, in.U.dtype(), in.U.device());
    const cudaStream_t s = stream_of(in.U);
    const long long threads = a.B * a.out;
    if (threads > 0) {
      const unsigned grid = grid_for(threads, kColumnBlock);
      T *gU = grad_U.data<T>(), *gx = data_or_null<T>(grad_x), *gc0 = data_or_null<T>(grad_c0);
      T *pv = part_v.data<T>(), *pb = part_b.data<T>();
      const T *c = c_all.data<T>(), *gh = grad_h.data<T>(), *gc_last = data_or_null<T>(grad_c_last);
      if (o.k == 4) backward_kernel<T, 4><<<grid, kColumnBlock, 0, s>>>(a, c, gh, gc_last, gU, gx, gc0, pv, pb);
      else backward_kernel<T, 3><<<grid, kColumnBlock, 0, s>>>(a, c, gh, gc_last, gU, gx, gc0, pv, pb);
      SRU_CUDA_LAUNCH_CHECK("sru backward_kernel");
    }
    reduce_batch_kernel<<<grid_for(2 * a.out), kBlock, 0, s>>>(part_v.data<T>(), part_b.data<T>(), a.B, 2 * a.out,
                                                              grad_weight_c.data<T>(), grad_bias.data<T>());
    SRU_CUDA_LAUNCH_CHECK("sru reduce_batch_kernel");
  });
}

}  // namespace sru::cuda
