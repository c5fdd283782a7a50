// CUDA kernels of masked_softmax / masked_log_softmax and causal_softmax (ops/masked_softmax.h; CPU
// twin ops/cpu/masked_softmax.cpp). Shapes: x, y, g, gx (N, C) rows; the keys a row leaves out come from
// a row provider (ops/masked_softmax_math.h): a mask tensor read in place through MaskIndex (broadcast
// strides), or the causal pattern computed from the row index (no mask tensor). The scores are
// multiplied by `scale` first (1 for masked_softmax). The per-element math is ops/masked_softmax_math.h
// (the CPU twin's f64 path; its f32 / bf16 rows compute the same in float32 with cpu/row_exp.h).
// Rows of C <= kWarpRowMax (attention: C = the key length, tens to hundreds): a warp per row, 8 rows a
// block, or for rows of up to 64 elements 8 or 16 lanes a row (16 or 32 rows a block), in compute_t<T>
// (float for float32 and bf16 rows, double for float64), the row max and sums by butterfly shuffles
// within the row's lanes (fixed order: the same result every run, in every lane), three passes over
// the row (the second and third from L1). Longer rows: one block of kBlock threads per row, max and
// sums in double with fixed-tree block reductions, as ops/cuda/softmax.cu. (The block kernel on the
// attention's short rows left 240 of 256 threads idle and ran at 19 GB/s in the H200 profile of
// 2026-11-27: 2.9 ms of a 71.6 ms translation step; floor of its 57 MB a step: 14 us.)
// Forward writes y; backward writes gx (not accumulated) from g and the saved y: gx = scale * (the
// softmax backward). f32, f64 and bf16 rows (bf16: read as float, each output rounded once).
#include <type_traits>

#include "ops/cuda/kernel_util.cuh"
#include "ops/dispatch.h"
#include "ops/masked_softmax.h"

namespace sru::cuda {

namespace {

constexpr long long kWarpRowMax = 1024;
constexpr long long kShortRowMax = 64;  // rows of up to this many elements: fewer lanes than a warp, several rows a warp

// Rows of C <= kWarpRowMax go to groups of W lanes (W a power of two dividing 32): a warp per row (W = 32),
// or for short rows (C <= kShortRowMax, attention over 15-40 keys) 8 or 16 lanes a row, two to four rows a
// warp, each lane taking about four elements: a warp per row there left most lanes idle (2026-11-28 on the
// H200: ~10 us a launch for under 2 MB). Reductions by butterfly shuffles within the group (xor offsets
// below W stay inside an aligned group; fixed order: the same result every run, in every lane).
template <int W, typename A>
__device__ A group_max(A v) {
  for (int lanes = W / 2; lanes > 0; lanes >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, lanes));
  return v;
}
template <int W, typename A>
__device__ A group_sum(A v) {
  for (int lanes = W / 2; lanes > 0; lanes >>= 1) v += __shfl_xor_sync(0xffffffffu, v, lanes);
  return v;
}

// The row of a thread's group. Every lane of a warp must reach the shuffles: a group past the last row
// works on the last row again and stores nothing (active false); a warp with no row at all leaves.
template <int W>
struct GroupRow {
  static constexpr int kRowsPerBlock = kBlock / W;
  long long n = 0;
  int lane = 0;
  bool active = false, warp_idle = false;
  __device__ explicit GroupRow(long long N) {
    const long long first = static_cast<long long>(blockIdx.x) * kRowsPerBlock + threadIdx.x / W;
    const long long warp_first = static_cast<long long>(blockIdx.x) * kRowsPerBlock + (threadIdx.x / 32) * (32 / W);
    active = first < N;
    warp_idle = warp_first >= N;  // the same in the whole warp
    n = active ? first : N - 1;
    lane = static_cast<int>(threadIdx.x % W);
  }
};

template <int W, typename T, typename Rows>
__global__ void softmax_rows_warp_kernel(const T* x, Rows rows, long long N, long long C, double scale, bool log_out,
                                         T* y) {
  using A = compute_t<T>;
  const GroupRow<W> group(N);
  if (group.warp_idle) return;
  const T* row = x + group.n * C;
  const auto mask = rows.row(group.n);
  const A s = static_cast<A>(scale);
  A row_max = A(-INFINITY);
  for (long long c = group.lane; c < C; c += W)
    row_max = fmax(row_max, masked_max_term<A>(s * compute_t<T>(row[c]), mask.hidden(c)));
  row_max = group_max<W>(row_max);
  // A row with nothing visible (max -inf) still sums, exp(score - 0) over no finite visible score: 0, so
  // that every lane reaches the shuffles; its lse stays -inf.
  const bool empty = row_max == A(-INFINITY);
  const A shift = empty ? A(0) : row_max;
  A sum = A(0);
  for (long long c = group.lane; c < C; c += W) sum += masked_exp_term<A>(s * compute_t<T>(row[c]), shift, mask.hidden(c));
  sum = group_sum<W>(sum);
  const A lse = empty ? row_max : row_max + log(sum);
  if (!group.active) return;
  T* out = y + group.n * C;
  for (long long c = group.lane; c < C; c += W)
    out[c] = static_cast<T>(masked_softmax_value<A>(s * compute_t<T>(row[c]), lse, mask.hidden(c), log_out));
}

template <int W, typename T, typename Rows>
__global__ void softmax_rows_warp_backward_kernel(const T* g, const T* y, Rows rows, long long N, long long C,
                                                  double scale, bool log_in, T* gx) {
  using A = compute_t<T>;
  const GroupRow<W> group(N);
  if (group.warp_idle) return;
  const T *gr = g + group.n * C, *yr = y + group.n * C;
  const auto mask = rows.row(group.n);
  A dot = A(0);
  for (long long c = group.lane; c < C; c += W)
    dot += masked_softmax_dot_term<A>(compute_t<T>(gr[c]), compute_t<T>(yr[c]), mask.hidden(c), log_in);
  dot = group_sum<W>(dot);
  if (!group.active) return;
  T* out = gx + group.n * C;
  const A s = static_cast<A>(scale);
  for (long long c = group.lane; c < C; c += W)
    out[c] = static_cast<T>(s * masked_softmax_grad<A>(compute_t<T>(gr[c]), compute_t<T>(yr[c]), dot, mask.hidden(c), log_in));
}

// Calls f.template operator()<W>() with the lanes a row of C <= kWarpRowMax elements gets: 8 up to 32
// elements, 16 up to 64, else a warp. Float64 rows (the gradient checks) always take a warp.
template <typename T, typename F>
void with_row_lanes(long long C, F&& f) {
  if constexpr (!std::is_same_v<T, double>) {
    if (C <= 32) return f.template operator()<8>();
    if (C <= kShortRowMax) return f.template operator()<16>();
  }
  f.template operator()<32>();
}

template <typename T, typename Rows>
__global__ void softmax_rows_kernel(const T* x, Rows rows, long long C, double scale, bool log_out, T* y) {
  __shared__ double shared[kBlock];
  const T* row = x + blockIdx.x * C;
  T* out = y + blockIdx.x * C;
  const auto mask = rows.row(blockIdx.x);
  double row_max = -INFINITY;
  for (long long c = threadIdx.x; c < C; c += kBlock) row_max = fmax(row_max, masked_max_term(scale * row[c], mask.hidden(c)));
  row_max = block_max(row_max, shared);
  double lse = row_max;
  if (row_max != -INFINITY) {  // the same for every thread of the block: the sum below syncs them all
    double s = 0.0;
    for (long long c = threadIdx.x; c < C; c += kBlock) s += masked_exp_term(scale * row[c], row_max, mask.hidden(c));
    lse = row_max + log(block_sum(s, shared));
  }
  for (long long c = threadIdx.x; c < C; c += kBlock)
    out[c] = static_cast<T>(masked_softmax_value(scale * row[c], lse, mask.hidden(c), log_out));
}

template <typename T, typename Rows>
__global__ void softmax_rows_backward_kernel(const T* g, const T* y, Rows rows, long long C, double scale, bool log_in,
                                             T* gx) {
  __shared__ double shared[kBlock];
  const T *gr = g + blockIdx.x * C, *yr = y + blockIdx.x * C;
  T* out = gx + blockIdx.x * C;
  const auto mask = rows.row(blockIdx.x);
  double dot = 0.0;
  for (long long c = threadIdx.x; c < C; c += kBlock) dot += masked_softmax_dot_term(gr[c], yr[c], mask.hidden(c), log_in);
  dot = block_sum(dot, shared);
  for (long long c = threadIdx.x; c < C; c += kBlock)
    out[c] = static_cast<T>(scale * masked_softmax_grad(gr[c], yr[c], dot, mask.hidden(c), log_in));
}

// Rows (N) of x viewed as (N, C); 0 when there is nothing to launch.
long long rows_of(const Tensor& x, const char* op) {
  const int64_t C = x.size(-1), N = C == 0 ? 0 : x.numel() / C;
  SRU_CHECK(N <= 2147483647LL, op, ": ", N, " rows are more than one launch can take");
  return N;
}

template <typename T, typename Rows>
void launch_forward(const Tensor& x, const Rows& rows, double scale, bool log, const Tensor& y, const char* op) {
  const long long N = rows_of(x, op), C = x.size(-1);
  if (N == 0) return;
  if (C <= kWarpRowMax) {
    with_row_lanes<T>(C, [&]<int W>() {
      const long long rows_per_block = GroupRow<W>::kRowsPerBlock;
      softmax_rows_warp_kernel<W><<<static_cast<unsigned>((N + rows_per_block - 1) / rows_per_block), kBlock, 0,
                                    stream_of(x)>>>(x.data<T>(), rows, N, C, scale, log, y.data<T>());
      SRU_CUDA_LAUNCH_CHECK("softmax_rows_warp_kernel");
    });
    return;
  }
  softmax_rows_kernel<<<static_cast<unsigned>(N), kBlock, 0, stream_of(x)>>>(x.data<T>(), rows, C, scale, log,
                                                                              y.data<T>());
  SRU_CUDA_LAUNCH_CHECK("softmax_rows_kernel");
}

template <typename T, typename Rows>
void launch_backward(const Tensor& g, const Tensor& y, const Rows& rows, double scale, bool log, const Tensor& gx,
                     const char* op) {
  const long long N = rows_of(y, op), C = y.size(-1);
  if (N == 0) return;
  if (C <= kWarpRowMax) {
    with_row_lanes<T>(C, [&]<int W>() {
      const long long rows_per_block = GroupRow<W>::kRowsPerBlock;
      softmax_rows_warp_backward_kernel<W><<<static_cast<unsigned>((N + rows_per_block - 1) / rows_per_block), kBlock, 0,
                                             stream_of(y)>>>(g.data<T>(), y.data<T>(), rows, N, C, scale, log,
                                                             gx.data<T>());
      SRU_CUDA_LAUNCH_CHECK("softmax_rows_warp_backward_kernel");
    });
    return;
  }
  softmax_rows_backward_kernel<<<static_cast<unsigned>(N), kBlock, 0, stream_of(y)>>>(
      g.data<T>(), y.data<T>(), rows, C, scale, log, gx.data<T>());
  SRU_CUDA_LAUNCH_CHECK("softmax_rows_backward_kernel");
}

}  // namespace

void masked_softmax_forward(const Tensor& x, const Tensor& mask, const MaskIndex& index, bool log, const Tensor& y) {
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "masked_softmax", [&]<typename T>() {
    SRU_DISPATCH_ALL(mask.dtype(), "masked_softmax mask", [&]<typename M>() {
      launch_forward<T>(x, TensorMaskRows<M>{mask.data<M>(), index}, 1.0, log, y, "masked_softmax");
    });
  });
}

void masked_softmax_backward(const Tensor& g, const Tensor& y, const Tensor& mask, const MaskIndex& index, bool log,
                             const Tensor& gx) {
  SRU_DISPATCH_FLOATING_BF16(y.dtype(), "masked_softmax_backward", [&]<typename T>() {
    SRU_DISPATCH_ALL(mask.dtype(), "masked_softmax mask", [&]<typename M>() {
      launch_backward<T>(g, y, TensorMaskRows<M>{mask.data<M>(), index}, 1.0, log, gx, "masked_softmax");
    });
  });
}

void causal_softmax_forward(const Tensor& x, const CausalMask& causal, double scale, const Tensor& y) {
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "causal_softmax", [&]<typename T>() {
    launch_forward<T>(x, causal, scale, false, y, "causal_softmax");
  });
}

void causal_softmax_backward(const Tensor& g, const Tensor& y, const CausalMask& causal, double scale, const Tensor& gx) {
  SRU_DISPATCH_FLOATING_BF16(y.dtype(), "causal_softmax_backward", [&]<typename T>() {
    launch_backward<T>(g, y, causal, scale, false, gx, "causal_softmax");
  });
}

void causal_masked_softmax_forward(const Tensor& x, const CausalMask& causal, const Tensor& mask, const MaskIndex& index,
                                   double scale, const Tensor& y) {
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "causal_softmax", [&]<typename T>() {
    SRU_DISPATCH_ALL(mask.dtype(), "causal_softmax mask", [&]<typename M>() {
      launch_forward<T>(x, CausalTensorMaskRows<M>{causal, TensorMaskRows<M>{mask.data<M>(), index}}, scale, false, y, "causal_softmax");
    });
  });
}

void causal_masked_softmax_backward(const Tensor& g, const Tensor& y, const CausalMask& causal, const Tensor& mask,
                                    const MaskIndex& index, double scale, const Tensor& gx) {
  SRU_DISPATCH_FLOATING_BF16(y.dtype(), "causal_softmax_backward", [&]<typename T>() {
    SRU_DISPATCH_ALL(mask.dtype(), "causal_softmax mask", [&]<typename M>() {
      launch_backward<T>(g, y, CausalTensorMaskRows<M>{causal, TensorMaskRows<M>{mask.data<M>(), index}}, scale, false, gx, "causal_softmax");
    });
  });
}

}  // namespace sru::cuda
