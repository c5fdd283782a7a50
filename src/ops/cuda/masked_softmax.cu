// CUDA kernels of masked_softmax / masked_log_softmax (ops/masked_softmax.h; CPU twin
// ops/cpu/masked_softmax.cpp). Shapes: x, y, g, gx (N, C) rows; the mask is read in place through
// MaskIndex (broadcast strides). One block of kBlock threads per row, as ops/cuda/softmax.cu: the
// row max and the sums in double with fixed-tree block reductions (the same result every run). The
// per-element math is ops/masked_softmax_math.h, the code the CPU kernel runs. Forward writes y;
// backward writes gx (not accumulated) from g, the saved y and the mask.
#include "ops/cuda/kernel_util.cuh"
#include "ops/dispatch.h"
#include "ops/masked_softmax.h"

namespace sru::cuda {

namespace {

template <typename T, typename M>
__global__ void masked_softmax_kernel(const T* x, const M* mask, MaskIndex index, long long C, bool log_out, T* y) {
  __shared__ double shared[kBlock];
  const T* row = x + blockIdx.x * C;
  T* out = y + blockIdx.x * C;
  const M* m = mask + index.row_offset(blockIdx.x);
  const long long ms = index.column_stride;
  double row_max = -INFINITY;
  for (long long c = threadIdx.x; c < C; c += kBlock) row_max = fmax(row_max, masked_max_term(row[c], m[c * ms] != M(0)));
  row_max = block_max(row_max, shared);
  double lse = row_max;
  if (row_max != -INFINITY) {  // the same for every thread of the block: the sum below syncs them all
    double s = 0.0;
    for (long long c = threadIdx.x; c < C; c += kBlock) s += masked_exp_term(row[c], row_max, m[c * ms] != M(0));
    lse = row_max + log(block_sum(s, shared));
  }
  for (long long c = threadIdx.x; c < C; c += kBlock)
    out[c] = static_cast<T>(masked_softmax_value(row[c], lse, m[c * ms] != M(0), log_out));
}

template <typename T, typename M>
__global__ void masked_softmax_backward_kernel(const T* g, const T* y, const M* mask, MaskIndex index, long long C,
                                               bool log_in, T* gx) {
  __shared__ double shared[kBlock];
  const T *gr = g + blockIdx.x * C, *yr = y + blockIdx.x * C;
  T* out = gx + blockIdx.x * C;
  const M* m = mask + index.row_offset(blockIdx.x);
  const long long ms = index.column_stride;
  double dot = 0.0;
  for (long long c = threadIdx.x; c < C; c += kBlock) dot += masked_softmax_dot_term(gr[c], yr[c], m[c * ms] != M(0), log_in);
  dot = block_sum(dot, shared);
  for (long long c = threadIdx.x; c < C; c += kBlock)
    out[c] = static_cast<T>(masked_softmax_grad(gr[c], yr[c], dot, m[c * ms] != M(0), log_in));
}

// Rows (N) of x viewed as (N, C); 0 when there is nothing to launch.
long long rows_of(const Tensor& x) {
  const int64_t C = x.size(-1), N = C == 0 ? 0 : x.numel() / C;
  SRU_CHECK(N <= 2147483647LL, "masked_softmax: ", N, " rows are more than one launch can take");
  return N;
}

}  // namespace

void masked_softmax_forward(const Tensor& x, const Tensor& mask, const MaskIndex& index, bool log, const Tensor& y) {
  const long long N = rows_of(x);
  if (N == 0) return;
  SRU_DISPATCH_FLOATING(x.dtype(), "masked_softmax", [&]<typename T>() {
    SRU_DISPATCH_ALL(mask.dtype(), "masked_softmax mask", [&]<typename M>() {
      masked_softmax_kernel<<<static_cast<unsigned>(N), kBlock, 0, stream_of(x)>>>(x.data<T>(), mask.data<M>(), index,
                                                                                   x.size(-1), log, y.data<T>());
      SRU_CUDA_LAUNCH_CHECK("masked_softmax_kernel");
    });
  });
}

void masked_softmax_backward(const Tensor& g, const Tensor& y, const Tensor& mask, const MaskIndex& index, bool log,
                             const Tensor& gx) {
  const long long N = rows_of(y);
  if (N == 0) return;
  SRU_DISPATCH_FLOATING(y.dtype(), "masked_softmax_backward", [&]<typename T>() {
    SRU_DISPATCH_ALL(mask.dtype(), "masked_softmax mask", [&]<typename M>() {
      masked_softmax_backward_kernel<<<static_cast<unsigned>(N), kBlock, 0, stream_of(y)>>>(
          g.data<T>(), y.data<T>(), mask.data<M>(), index, y.size(-1), log, gx.data<T>());
      SRU_CUDA_LAUNCH_CHECK("masked_softmax_backward_kernel");
    });
  });
}

}  // namespace sru::cuda
