// CUDA kernels of the fused SRU recurrence (paper Algorithm 1), forward and backward, both directions
// in one launch. Math per element: ops/sru_math.h, the same SRU_HD code the CPU twins run
// (ops/cpu/sru_recurrence_kernels.h); shapes and saved state: ops/sru_recurrence.h.
//
// One thread per (batch b, output column col = dir*d + j), B*out threads: it walks time in its
// direction carrying c in a register, loading the inputs of the next kChunk steps while it computes
// the current ones (two register buffers), so its loads stay in flight behind the arithmetic. U is
// read at ((t*B + b)*out + col)*k + m, so neighbouring threads read neighbouring columns. The
// backward thread accumulates d vf, d vr, d bf, d br of its column in T (float32 for float) over time
// and writes them per batch row; a second kernel sums the B rows per column in order (deterministic,
// same order as the CPU). Padded steps (mask_pad != 0) keep c and output h = 0; the padding mask is
// first turned into one int per (t, b).
//
// bf16 I/O: the kernels take the compute type T (float) and the storage type S of U, x, h and their
// gradients (bf16); every load widens S to T and every store of those rounds T to S once (core/float16.h,
// the CPU twin's rounding); c, the parameters and the weight_c / bias partial sums stay T. Bytes per
// (t, b, unit), forward + backward: 64 at float32, 36 with bf16 I/O (U 3 + x + h + grad h + grad U 3 +
// grad x at 2 bytes, c written and read at 4). Where d is even and the tensors aligned, bf16 I/O runs
// the kernels of two neighbouring columns a thread instead (ops/sru_recurrence_pairs.h: 4-byte bf16
// words, 8-byte c pairs; their thread bodies are also run on the CPU by the tests).
#include "ops/cuda/kernel_util.cuh"
#include "ops/sru_math.h"
#include "ops/sru_recurrence.h"
#include "ops/sru_recurrence_pairs.h"

#include <type_traits>

namespace sru::cuda {

namespace {

using sru_kernels::Args;
using sru_kernels::StepWalk;

// One step's inputs as stored (S: float, double or bf16), before widening.
template <typename S>
struct RawStep {
  S u0, u1, u2, x_skip;
};

// One thread's column: batch row b, output column col = dir*d + j, its per-unit parameters, and the
// mapping from processing step (direction 1 runs from t = L-1 down) to time and element position.
template <typename T, typename S>
struct Column {
  const Args<T, S>& a;
  long long idx, b, col, dir;
  T vf, vr, bf, br, mask, c0, scale;

  __device__ Column(const Args<T, S>& args, long long i)
      : a(args), idx(i), b(i / args.out), col(i % args.out), dir(col / args.d), vf(args.weight_c[col]),
        vr(args.weight_c[args.out + col]), bf(args.bias[col]), br(args.bias[args.out + col]),
        mask(args.mask_c ? args.mask_c[i] : args.mask_draw.on ? args.mask_draw.template value<T>(i) : T(1)),
        c0(args.c0 ? args.c0[i] : T(0)),
        scale(args.scale_x ? args.scale_x[0] : args.scale) {}
  // A loaded step ready for the step math: widened to T, with the column's parameters, and
  // x' = scale * x (k = 3; with k = 4 x' is U's 4th column).
  template <int K>
  __device__ SruStepInput<T> widened(const RawStep<S>& raw) const {
    SruStepInput<T> in;
    in.u0 = static_cast<T>(raw.u0);
    in.u1 = static_cast<T>(raw.u1);
    in.u2 = static_cast<T>(raw.u2);
    in.x_skip = static_cast<T>(raw.x_skip);
    if constexpr (K == 3) in.x_skip *= scale;
    in.vf = vf;
    in.vr = vr;
    in.bf = bf;
    in.br = br;
    in.mask = mask;
    return in;
  }
  __device__ long long time_of(long long step) const { return dir == 0 ? step : a.L - 1 - step; }
  __device__ long long position_of(long long t) const { return (t * a.B + b) * a.out + col; }

  // The step's stored values at element position pos (U row pos*K, x at pos), as loaded: any
  // arithmetic on them here (scaling x, or widening bf16 to float, a shift) would wait for the load
  // at once, making each step's loads wait a round trip before the next step's are issued (the stall
  // ncu showed, docs/gpu-notes.md); widened() does both when the step is computed.
  template <int K>
  __device__ RawStep<S> input(long long pos) const {
    RawStep<S> in;
    const S* u = a.U + pos * K;
    in.u0 = u[0];
    in.u1 = u[1];
    in.u2 = u[2];
    if constexpr (K == 4) in.x_skip = u[3];
    else in.x_skip = a.has_skip ? a.x[pos] : static_cast<S>(T(0));
    return in;
  }
};

// The inputs of kChunk consecutive processing steps of one column. Loads go chunk by chunk, one chunk
// ahead of the arithmetic (two buffers): one thread per column leaves few warps per SM (B*out
// threads), so a thread must keep its own loads in flight while it computes; a thread that loaded a
// chunk and then computed it waited a memory round trip per chunk (the profile in docs/gpu-notes.md).
// Float64 columns take half the steps per chunk: eight doubles per buffer spilled to local memory.
// 16-bit storage keeps 8 steps: 16 left the bf16 forward kernel's time unchanged (62 vs 63 us at L 256,
// d 1024, B 32; docs/gpu-notes.md) for 58 more registers.
template <typename T>
constexpr int kChunk = sizeof(T) == 8 ? 4 : 8;
// Threads per block of the column kernels: small blocks spread few columns (B*out) over more SMs.
constexpr unsigned kColumnBlock = 64;

template <typename T, typename S>
struct ForwardChunk {
  RawStep<S> in[kChunk<T>];
  bool padded[kChunk<T>];
};

template <typename T, typename S, int K, bool Pad>
__device__ __forceinline__ void load_forward(const Column<T, S>& column, long long first, ForwardChunk<T, S>& chunk) {
  const StepWalk<Column<T, S>> w(column, first);
#pragma unroll
  for (int s = 0; s < kChunk<T>; ++s) {
    if (first + s >= column.a.L) break;
    chunk.in[s] = column.template input<K>(w.pos + s * w.stride);
    chunk.padded[s] = Pad && column.a.pad[w.pad_at + s * w.pad_stride];
  }
}

template <typename T, typename S, int K, bool Pad>
__device__ __forceinline__ void compute_forward(const Column<T, S>& column, long long first, const ForwardChunk<T, S>& chunk,
                                                T& c, S* __restrict__ h, T* __restrict__ c_all) {
  const StepWalk<Column<T, S>> w(column, first);
#pragma unroll
  for (int s = 0; s < kChunk<T>; ++s) {
    if (first + s >= column.a.L) break;
    const long long pos = w.pos + s * w.stride;
    if (Pad && chunk.padded[s]) {
      h[pos] = static_cast<S>(T(0));
      c_all[pos] = c;
      continue;
    }
    T hv;
    c = sru_step_forward(column.template widened<K>(chunk.in[s]), c, column.a.use_tanh, column.a.has_skip, hv);
    h[pos] = static_cast<S>(hv);
    c_all[pos] = c;
  }
}

template <typename T, typename S, int K, bool Pad>
__global__ void forward_kernel(Args<T, S> a, S* __restrict__ h, T* __restrict__ c_all, T* __restrict__ c_last) {
  SRU_GRID_STRIDE(idx, a.B * a.out) {
    const Column<T, S> column(a, idx);
    T c = column.c0;
    ForwardChunk<T, S> even, odd;  // chunks 0, 2, 4, ... and 1, 3, 5, ...
    if (a.L > 0) load_forward<T, S, K, Pad>(column, 0, even);
    for (long long first = 0; first < a.L; first += 2 * kChunk<T>) {
      if (first + kChunk<T> < a.L) load_forward<T, S, K, Pad>(column, first + kChunk<T>, odd);
      compute_forward<T, S, K, Pad>(column, first, even, c, h, c_all);
      if (first + kChunk<T> >= a.L) break;
      if (first + 2 * kChunk<T> < a.L) load_forward<T, S, K, Pad>(column, first + 2 * kChunk<T>, even);
      compute_forward<T, S, K, Pad>(column, first + kChunk<T>, odd, c, h, c_all);
    }
    c_last[idx] = c;
  }
}

// Processing steps last, last-1, ..., last-kChunk+1 (backwards); c_edge is c at step last-kChunk, the
// state before the chunk's earliest step (c0 when that is step 0), so every step's c_prev is at hand.
template <typename T, typename S>
struct BackwardChunk {
  RawStep<S> in[kChunk<T>];
  T c_cur[kChunk<T>], c_edge;
  S g_h[kChunk<T>];
  bool padded[kChunk<T>];
};

template <typename T, typename S, int K, bool Pad>
__device__ __forceinline__ void load_backward(const Column<T, S>& column, long long last, const T* __restrict__ c_all,
                                              const S* __restrict__ gh, BackwardChunk<T, S>& chunk) {
  const StepWalk<Column<T, S>> w(column, last);
#pragma unroll
  for (int s = 0; s < kChunk<T>; ++s) {
    if (last - s < 0) break;
    const long long pos = w.pos - s * w.stride;
    chunk.in[s] = column.template input<K>(pos);
    chunk.c_cur[s] = c_all[pos];
    chunk.g_h[s] = gh[pos];
    chunk.padded[s] = Pad && column.a.pad[w.pad_at - s * w.pad_stride];
  }
  chunk.c_edge = last - kChunk<T> >= 0 ? c_all[w.pos - kChunk<T> * w.stride] : column.c0;
}

template <typename T, typename S, int K, bool Pad>
__device__ __forceinline__ void compute_backward(const Column<T, S>& column, long long last, const BackwardChunk<T, S>& chunk,
                                                 T& gc, T (&acc)[4], S* __restrict__ gU, S* __restrict__ gx) {
  const StepWalk<Column<T, S>> w(column, last);
  const Args<T, S>& a = column.a;
#pragma unroll
  for (int s = 0; s < kChunk<T>; ++s) {
    if (last - s < 0) break;
    const long long pos = w.pos - s * w.stride;
    if (Pad && chunk.padded[s]) {  // c passed through unchanged: gc flows on as it is
      for (int k = 0; k < K; ++k) gU[pos * K + k] = static_cast<S>(T(0));
      if (gx) gx[pos] = static_cast<S>(T(0));
      continue;
    }
    const T c_prev = last - s == 0 ? column.c0 : (s + 1 < kChunk<T> ? chunk.c_cur[s + 1] : chunk.c_edge);
    const SruStepGrads<T> g =
        sru_step_backward(column.template widened<K>(chunk.in[s]), c_prev, chunk.c_cur[s], static_cast<T>(chunk.g_h[s]), gc,
                          a.use_tanh, a.has_skip);
    gU[pos * K] = static_cast<S>(g.u0);
    gU[pos * K + 1] = static_cast<S>(g.u1);
    gU[pos * K + 2] = static_cast<S>(g.u2);
    if constexpr (K == 4) gU[pos * K + 3] = static_cast<S>(g.x_skip);
    if (K == 3 && a.has_skip && gx) gx[pos] = static_cast<S>(g.x_skip * column.scale);
    acc[0] += g.vf;
    acc[1] += g.vr;
    acc[2] += g.u1;
    acc[3] += g.u2;
    gc = g.c_prev;
  }
}

template <typename T, typename S, int K, bool Pad>
__global__ void backward_kernel(Args<T, S> a, const T* __restrict__ c_all, const S* __restrict__ gh,
                                const T* __restrict__ gc_last, S* __restrict__ gU, S* __restrict__ gx,
                                T* __restrict__ gc0, T* __restrict__ part_v, T* __restrict__ part_b /* (B, 2*out) each */) {
  SRU_GRID_STRIDE(idx, a.B * a.out) {
    const Column<T, S> column(a, idx);
    T gc = gc_last ? gc_last[idx] : T(0);
    T acc[4] = {T(0), T(0), T(0), T(0)};  // d vf, d vr, d bf, d br of this column and batch row
    // Walks the processing order backwards (step = L-1 .. 0), kChunk steps at a time, loading a chunk ahead.
    BackwardChunk<T, S> even, odd;
    if (a.L > 0) load_backward<T, S, K, Pad>(column, a.L - 1, c_all, gh, even);
    for (long long last = a.L - 1; last >= 0; last -= 2 * kChunk<T>) {
      if (last - kChunk<T> >= 0) load_backward<T, S, K, Pad>(column, last - kChunk<T>, c_all, gh, odd);
      compute_backward<T, S, K, Pad>(column, last, even, gc, acc, gU, gx);
      if (last - kChunk<T> < 0) break;
      if (last - 2 * kChunk<T> >= 0) load_backward<T, S, K, Pad>(column, last - 2 * kChunk<T>, c_all, gh, even);
      compute_backward<T, S, K, Pad>(column, last - kChunk<T>, odd, gc, acc, gU, gx);
    }
    if (gc0) gc0[idx] = gc;
    T* pv = part_v + column.b * 2 * a.out;
    T* pb = part_b + column.b * 2 * a.out;
    pv[column.col] = acc[0];
    pv[a.out + column.col] = acc[1];
    pb[column.col] = acc[2];
    pb[a.out + column.col] = acc[3];
  }
}

// bf16 I/O, two neighbouring columns a thread (ops/sru_recurrence_pairs.h): B * out / 2 threads. The
// forward kernel is held to 96 registers without padding (ptxas: no spills; the padded variant spilled
// there and gets 128): 20 warps an SM put the paper's char-LM layer (B 128, out 1,312: 2,624 warps) in
// one wave on an H200's 132 SMs, where 120 registers gave 16 warps and 1.24 waves.
template <int K, bool Pad>
__global__ void __launch_bounds__(kColumnBlock, Pad ? 8 : 10) pair_forward_kernel(Args<float, bf16> a, bf16* __restrict__ h, float* __restrict__ c_all,
                                    float* __restrict__ c_last) {
  SRU_GRID_STRIDE(pair, a.B * a.out / 2) sru_kernels::pair_forward_thread<K, Pad>(a, pair, h, c_all, c_last);
}

template <int K, bool Pad>
__global__ void pair_backward_kernel(Args<float, bf16> a, sru_kernels::PairBackwardOutputs o) {
  SRU_GRID_STRIDE(pair, a.B * a.out / 2) sru_kernels::pair_backward_thread<K, Pad>(a, pair, o);
}

// grad_weight_c[i] = sum over b of part_v[b, i] (and grad_bias from part_b). A block per tile of 32
// columns x 32 lanes (grid-stride over tiles): lane y adds rows y, y + 32, ... of its column, then lane
// 0 adds the 32 lane sums in lane order (fixed, so every run gives the same bits; the CPU twin adds b in
// order, within float rounding of this). One thread per column looping over every b ran 2 * out
// threads (2,624 at the paper's d 1312) through B dependent loads each: 87 GB/s, 0.25 ms of an 8.75 ms
// enwik8 step at bf16 on an H200 (2026-11-28); floor of its 2 x B x 2 out x 4 bytes: ~1 us. With 8
// lanes (16 loads a thread at B 128, 82 blocks of 256 threads: under one block an SM) it took 13 us a
// launch (203 GB/s, H200, 2026-11-28 afternoon): latency of the loads in sequence, hence 32 lanes.
constexpr int kReduceColumns = 32, kReduceLanes = 32;

template <typename T>
__global__ void reduce_batch_kernel(const T* part_v, const T* part_b, long long B, long long width, T* gw, T* gb) {
  __shared__ T lane_v[kReduceLanes][kReduceColumns], lane_b[kReduceLanes][kReduceColumns];
  for (long long tile = blockIdx.x; tile * kReduceColumns < width; tile += gridDim.x) {
    const long long i = tile * kReduceColumns + threadIdx.x;
    T sv = T(0), sb = T(0);
    if (i < width)
#pragma unroll 4
      for (long long b = threadIdx.y; b < B; b += kReduceLanes) {
        sv += part_v[b * width + i];
        sb += part_b[b * width + i];
      }
    lane_v[threadIdx.y][threadIdx.x] = sv;
    lane_b[threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y == 0 && i < width) {
      T tv = lane_v[0][threadIdx.x], tb = lane_b[0][threadIdx.x];
      for (int y = 1; y < kReduceLanes; ++y) {
        tv += lane_v[y][threadIdx.x];
        tb += lane_b[y][threadIdx.x];
      }
      gw[i] = tv;
      gb[i] = tb;
    }
    __syncthreads();  // the lane sums are reused by the next tile
  }
}

// Calls launch(K, Pad) with the kernels' compile-time variant for k (3 or 4) and whether there is
// padding, as std::integral_constant values, so that both launches choose their kernel in one place.
template <typename Launch>
void with_variant(int k, bool pad, Launch&& launch) {
  using K3 = std::integral_constant<int, 3>;
  using K4 = std::integral_constant<int, 4>;
  if (k == 4 && pad) launch(K4{}, std::true_type{});
  else if (k == 4) launch(K4{}, std::false_type{});
  else if (pad) launch(K3{}, std::true_type{});
  else launch(K3{}, std::false_type{});
}

template <typename T, typename S>
Args<T, S> args_of(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& pad) {
  return sru_kernels::kernel_args<T, S>(in, o, data_or_null<int32_t>(pad));
}

// Calls run.template operator()<T, S>() with the compute type T and the storage type S of U (float and
// bf16 under bf16 I/O, else both U's dtype).
template <typename Run>
void with_types(DType io, const char* op, Run&& run) {
  if (io == DType::BF16) return run.template operator()<float, bf16>();
  SRU_DISPATCH_FLOATING(io, op, [&]<typename T>() { run.template operator()<T, T>(); });
}

}  // namespace

void sru_recurrence_forward(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& h, const Tensor& c_all,
                            const Tensor& c_last) {
  const Tensor pad = padding_as_int32(in.mask_pad);
  with_types(in.U.dtype(), "sru_recurrence", [&]<typename T, typename S>() {
    const Args<T, S> a = args_of<T, S>(in, o, pad);
    const long long threads = a.B * a.out;
    if (threads == 0) return;
    const cudaStream_t s = stream_of(in.U);
    S* hp = h.data<S>();
    T *cp = c_all.data<T>(), *lp = c_last.data<T>();
    if constexpr (std::is_same_v<S, bf16>) {
      const void* const bf16_tensors[] = {a.U, a.x, hp};
      if (sru_column_pairs() && sru_kernels::column_pairs_fit(a, bf16_tensors, cp)) {
        with_variant(o.k, a.pad != nullptr, [&](auto k, auto pad) {
          pair_forward_kernel<k(), pad()><<<grid_for(threads / 2, kColumnBlock), kColumnBlock, 0, s>>>(a, hp, cp, lp);
        });
        SRU_CUDA_LAUNCH_CHECK("sru pair_forward_kernel");
        return;
      }
    }
    const unsigned grid = grid_for(threads, kColumnBlock);
    with_variant(o.k, a.pad != nullptr, [&](auto k, auto pad) {
      forward_kernel<T, S, k(), pad()><<<grid, kColumnBlock, 0, s>>>(a, hp, cp, lp);
    });
    SRU_CUDA_LAUNCH_CHECK("sru forward_kernel");
  });
}

void sru_recurrence_backward(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& c_all,
                             const Tensor& grad_h, const Tensor& grad_c_last, const Tensor& grad_U,
                             const Tensor& grad_x, const Tensor& grad_weight_c, const Tensor& grad_bias,
                             const Tensor& grad_c0) {
  const Tensor pad = padding_as_int32(in.mask_pad);
  with_types(in.U.dtype(), "sru_recurrence_backward", [&]<typename T, typename S>() {
    const Args<T, S> a = args_of<T, S>(in, o, pad);
    const Shape part_shape{static_cast<int64_t>(a.B), static_cast<int64_t>(2 * a.out)};
    Tensor part_v = Tensor::empty(part_shape, in.weight_c.dtype(), in.U.device());
    Tensor part_b = Tensor::empty(part_shape, in.weight_c.dtype(), in.U.device());
    const cudaStream_t s = stream_of(in.U);
    const long long threads = a.B * a.out;
    if (threads > 0) {
      const unsigned grid = grid_for(threads, kColumnBlock);
      S *gU = grad_U.data<S>(), *gx = data_or_null<S>(grad_x);
      T* gc0 = data_or_null<T>(grad_c0);
      T *pv = part_v.data<T>(), *pb = part_b.data<T>();
      const T *c = c_all.data<T>(), *gc_last = data_or_null<T>(grad_c_last);
      const S* gh = grad_h.data<S>();
      bool paired = false;
      if constexpr (std::is_same_v<S, bf16>) {
        const void* const bf16_tensors[] = {a.U, a.x, gh, gU, gx};
        paired = sru_column_pairs() && sru_kernels::column_pairs_fit(a, bf16_tensors, c);
        if (paired) {
          const sru_kernels::PairBackwardOutputs out{c, gh, gc_last, gU, gx, gc0, pv, pb};
          with_variant(o.k, a.pad != nullptr, [&](auto k, auto pad) {
            pair_backward_kernel<k(), pad()><<<grid_for(threads / 2, kColumnBlock), kColumnBlock, 0, s>>>(a, out);
          });
          SRU_CUDA_LAUNCH_CHECK("sru pair_backward_kernel");
        }
      }
      if (!paired) {
        with_variant(o.k, a.pad != nullptr, [&](auto k, auto pad) {
          backward_kernel<T, S, k(), pad()><<<grid, kColumnBlock, 0, s>>>(a, c, gh, gc_last, gU, gx, gc0, pv, pb);
        });
        SRU_CUDA_LAUNCH_CHECK("sru backward_kernel");
      }
    }
    const long long tiles = (2 * a.out + kReduceColumns - 1) / kReduceColumns;
    reduce_batch_kernel<<<grid_for(tiles, 1), dim3(kReduceColumns, kReduceLanes), 0, s>>>(
        part_v.data<T>(), part_b.data<T>(), a.B, 2 * a.out, grad_weight_c.data<T>(), grad_bias.data<T>());
    SRU_CUDA_LAUNCH_CHECK("sru reduce_batch_kernel");
  });
}

}  // namespace sru::cuda
