// CUDA kernels of layer_norm (math in ops/layer_norm.h; CPU twins in ops/cpu/layer_norm.cpp).
// x (N, D): one block per row (rows beyond the capped grid loop: SRU_ROW_STRIDE) computes mean and rstd
// in double (fixed-tree sums) and writes y; the backward block per row writes dx; dweight / dbias sum over rows per column with column_sums
// (ops/cuda/kernel_util.cuh: fixed chunks, in double, deterministic). bf16 x, y and dx: weight, bias,
// statistics and weight gradients in float32 (C = compute_t<T>), each output rounded once, as the CPU twin.
#include "ops/cuda/kernel_util.cuh"
#include "ops/layer_norm.h"

namespace sru::cuda {

namespace {

template <typename T, typename C = compute_t<T>>
__global__ void layer_norm_kernel(const T* x, const C* w, const C* b, long long N, long long D, double eps, T* y, C* mean,
                                  C* rstd) {
  __shared__ double shared[kBlock];
  SRU_ROW_STRIDE(n, N) {
    const T* row = x + n * D;
    double s = 0.0;
    for (long long j = threadIdx.x; j < D; j += kBlock) s += static_cast<double>(row[j]);
    const double mu = block_sum(s, shared) / D;
    double v = 0.0;
    for (long long j = threadIdx.x; j < D; j += kBlock) {
      const double xj = static_cast<double>(row[j]);
      v += (xj - mu) * (xj - mu);
    }
    const double r = 1.0 / sqrt(block_sum(v, shared) / D + eps);
    if (threadIdx.x == 0) {
      mean[n] = static_cast<C>(mu);
      rstd[n] = static_cast<C>(r);
    }
    for (long long j = threadIdx.x; j < D; j += kBlock) {
      C h = static_cast<C>((static_cast<double>(row[j]) - mu) * r);
      if (w) h *= w[j];
      if (b) h += b[j];
      y[n * D + j] = T(h);
    }
  }
}

template <typename T, typename C = compute_t<T>>
__global__ void layer_norm_backward_kernel(const T* g, const T* x, const C* w, const C* mean, const C* rstd, long long N,
                                           long long D, T* dx) {
  __shared__ double shared[kBlock];
  SRU_ROW_STRIDE(n, N) {
    const T *gr = g + n * D, *xr = x + n * D;
    const double mu = mean[n], r = rstd[n];
    double sum_gh = 0.0, sum_gh_xhat = 0.0;
    for (long long j = threadIdx.x; j < D; j += kBlock) {
      const double gh = w ? C(gr[j]) * w[j] : C(gr[j]);
      sum_gh += gh;
      sum_gh_xhat += gh * (static_cast<double>(xr[j]) - mu) * r;
    }
    const double mean_gh = block_sum(sum_gh, shared) / D, mean_gh_xhat = block_sum(sum_gh_xhat, shared) / D;
    for (long long j = threadIdx.x; j < D; j += kBlock) {
      const double gh = w ? C(gr[j]) * w[j] : C(gr[j]);
      const double xhat = (static_cast<double>(xr[j]) - mu) * r;
      dx[n * D + j] = static_cast<T>(r * (gh - mean_gh - xhat * mean_gh_xhat));
    }
  }
}

template <typename T, typename C = compute_t<T>>
struct WeightGradTerm {  // g * (x - mean) * rstd at (row n, column j)
  const T *g, *x;
  const C *mean, *rstd;
  long long D;
  __device__ double operator()(long long n, long long j) const {
    return static_cast<double>(g[n * D + j]) * (static_cast<double>(x[n * D + j]) - static_cast<double>(mean[n])) *
           static_cast<double>(rstd[n]);
  }
};

template <typename T>
struct BiasGradTerm {
  const T* g;
  long long D;
  __device__ double operator()(long long n, long long j) const { return static_cast<double>(g[n * D + j]); }
};

}  // namespace

void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                        const Tensor& mean, const Tensor& rstd) {
  const int64_t D = x.size(-1), N = D == 0 ? 0 : x.numel() / D;
  if (N == 0) return;
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "layer_norm", [&]<typename T>() {
    using C = compute_t<T>;
    layer_norm_kernel<<<rows_grid(N), kBlock, 0, stream_of(x)>>>(
        x.data<T>(), data_or_null<C>(weight), data_or_null<C>(bias), N, D, eps, y.data<T>(), mean.data<C>(),
        rstd.data<C>());
    SRU_CUDA_LAUNCH_CHECK("layer_norm_kernel");
  });
}

void layer_norm_backward(const Tensor& g, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const int64_t D = x.size(-1), N = D == 0 ? 0 : x.numel() / D;
  if (N == 0) return;
  const cudaStream_t s = stream_of(x);
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "layer_norm_backward", [&]<typename T>() {
    using C = compute_t<T>;
    layer_norm_backward_kernel<<<rows_grid(N), kBlock, 0, s>>>(
        g.data<T>(), x.data<T>(), data_or_null<C>(weight), mean.data<C>(), rstd.data<C>(), N, D, dx.data<T>());
    SRU_CUDA_LAUNCH_CHECK("layer_norm_backward_kernel");
    if (dweight.defined())
      column_sums(WeightGradTerm<T>{g.data<T>(), x.data<T>(), mean.data<C>(), rstd.data<C>(), D}, N, D, 1.0,
                  dweight.data<C>(), x.device());
    if (dbias.defined()) column_sums(BiasGradTerm<T>{g.data<T>(), D}, N, D, 1.0, dbias.data<C>(), x.device());
  });
}

}  // namespace sru::cuda
