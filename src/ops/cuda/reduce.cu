// CUDA kernels of sum/mean (CPU twins: ops/cpu/reduce.cpp). x is viewed as (outer, n, inner).
// reduce_middle: out (outer, inner) = scale * sum over k of x[o, k, i], in double; with inner == 1 one
// block per output row (SRU_ROW_STRIDE) sums it with a fixed tree, otherwise column_sums
// (ops/cuda/kernel_util.cuh).
// broadcast_middle: out (outer, n, inner) = scale * g (outer, inner), one thread per element.
// bf16: read as float, sums in double, scaling in float, each output rounded once (as the CPU twin).
#include "ops/cuda/kernel_util.cuh"
#include "ops/reduce.h"

namespace sru::cuda {

namespace {

template <typename T>
__global__ void reduce_rows_kernel(const T* x, long long rows, long long n, double scale, T* out) {
  __shared__ double shared[kBlock];
  SRU_ROW_STRIDE(r, rows) {
    const T* row = x + r * n;
    double acc = 0.0;
    for (long long k = threadIdx.x; k < n; k += kBlock) acc += static_cast<double>(compute_t<T>(row[k]));
    acc = block_sum(acc, shared);
    if (threadIdx.x == 0) out[r] = static_cast<T>(acc * scale);
  }
}

template <typename T>
struct MiddleElement {  // x (outer, n, inner) as rows k and columns (o, i)
  const T* x;
  long long n, inner;
  __device__ double operator()(long long k, long long col) const {
    return static_cast<double>(compute_t<T>(x[((col / inner) * n + k) * inner + col % inner]));
  }
};

template <typename T>
__global__ void broadcast_middle_kernel(const T* g, long long outer, long long n, long long inner, compute_t<T> scale,
                                        T* out) {
  SRU_GRID_STRIDE(idx, outer * n * inner) {
    const long long i = idx % inner, o = idx / (n * inner);
    out[idx] = T(scale * compute_t<T>(g[o * inner + i]));
  }
}

}  // namespace

void reduce_middle(const Tensor& x, int64_t outer, int64_t n, int64_t inner, double scale, const Tensor& out) {
  if (outer * inner == 0) return;
  const cudaStream_t s = stream_of(x);
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "reduce", [&]<typename T>() {
    if (inner == 1)
      reduce_rows_kernel<<<rows_grid(outer), kBlock, 0, s>>>(x.data<T>(), outer, n, scale, out.data<T>());
    else
      column_sums(MiddleElement<T>{x.data<T>(), n, inner}, n, outer * inner, scale, out.data<T>(), x.device());
    SRU_CUDA_LAUNCH_CHECK("reduce_middle");
  });
}

void broadcast_middle(const Tensor& g, int64_t outer, int64_t n, int64_t inner, double scale, const Tensor& out) {
  const long long total = outer * n * inner;
  if (total == 0) return;
  SRU_DISPATCH_FLOATING_BF16(g.dtype(), "broadcast", [&]<typename T>() {
    broadcast_middle_kernel<<<grid_for(total), kBlock, 0, stream_of(g)>>>(g.data<T>(), outer, n, inner,
                                                                          static_cast<compute_t<T>>(scale), out.data<T>());
    SRU_CUDA_LAUNCH_CHECK("broadcast_middle_kernel");
  });
}

}  // namespace sru::cuda
