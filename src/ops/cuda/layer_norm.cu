// CUDA kernels of layer_norm (math in ops/layer_norm.h; CPU twins in ops/cpu/layer_norm.cpp).
// x (N, D): one block per row (rows beyond the capped grid loop: SRU_ROW_STRIDE) computes mean and rstd
// in double (fixed-tree sums) and writes y; the backward block per row writes dx; dweight / dbias sum over rows per column with column_sums
// (ops/cuda/kernel_util.cuh: fixed chunks, in double, deterministic).
#include "ops/cuda/kernel_util.cuh"
#include "ops/layer_norm.h"

namespace sru::cuda {

namespace {

template <typename T>
__global__ void layer_norm_kernel(const T* x, const T* w, const T* b, long long N, long long D, double eps, T* y, T* mean,
                                  T* rstd) {
  __shared__ double shared[kBlock];
  SRU_ROW_STRIDE(n, N) {
    const T* row = x + n * D;
    double s = 0.0;
    for (long long j = threadIdx.x; j < D; j += kBlock) s += row[j];
    const double mu = block_sum(s, shared) / D;
    double v = 0.0;
    for (long long j = threadIdx.x; j < D; j += kBlock) v += (row[j] - mu) * (row[j] - mu);
    const double r = 1.0 / sqrt(block_sum(v, shared) / D + eps);
    if (threadIdx.x == 0) {
      mean[n] = static_cast<T>(mu);
      rstd[n] = static_cast<T>(r);
    }
    for (long long j = threadIdx.x; j < D; j += kBlock) {
      T h = static_cast<T>((row[j] - mu) * r);
      if (w) h *= w[j];
      if (b) h += b[j];
      y[n * D + j] = h;
    }
  }
}

template <typename T>
__global__ void layer_norm_backward_kernel(const T* g, const T* x, const T* w, const T* mean, const T* rstd, long long N,
                                           long long D, T* dx) {
  __shared__ double shared[kBlock];
  SRU_ROW_STRIDE(n, N) {
    const T *gr = g + n * D, *xr = x + n * D;
    const double mu = mean[n], r = rstd[n];
    double sum_gh = 0.0, sum_gh_xhat = 0.0;
    for (long long j = threadIdx.x; j < D; j += kBlock) {
      const double gh = w ? gr[j] * w[j] : gr[j];
      sum_gh += gh;
      sum_gh_xhat += gh * (xr[j] - mu) * r;
    }
    const double mean_gh = block_sum(sum_gh, shared) / D, mean_gh_xhat = block_sum(sum_gh_xhat, shared) / D;
    for (long long j = threadIdx.x; j < D; j += kBlock) {
      const double gh = w ? gr[j] * w[j] : gr[j];
      const double xhat = (xr[j] - mu) * r;
      dx[n * D + j] = static_cast<T>(r * (gh - mean_gh - xhat * mean_gh_xhat));
    }
  }
}

template <typename T>
struct WeightGradTerm {  // g * (x - mean) * rstd at (row n, column j)
  const T *g, *x, *mean, *rstd;
  long long D;
  __device__ double operator()(long long n, long long j) const {
    return static_cast<double>(g[n * D + j]) * (x[n * D + j] - static_cast<double>(mean[n])) * static_cast<double>(rstd[n]);
  }
};

template <typename T>
struct BiasGradTerm {
  const T* g;
  long long D;
  __device__ double operator()(long long n, long long j) const { return g[n * D + j]; }
};

}  // namespace

void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                        const Tensor& mean, const Tensor& rstd) {
  const int64_t D = x.size(-1), N = D == 0 ? 0 : x.numel() / D;
  if (N == 0) return;
  SRU_DISPATCH_FLOATING(x.dtype(), "layer_norm", [&]<typename T>() {
    layer_norm_kernel<<<rows_grid(N), kBlock, 0, stream_of(x)>>>(
        x.data<T>(), data_or_null<T>(weight), data_or_null<T>(bias), N, D, eps, y.data<T>(), mean.data<T>(),
        rstd.data<T>());
    SRU_CUDA_LAUNCH_CHECK("layer_norm_kernel");
  });
}

void layer_norm_backward(const Tensor& g, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const int64_t D = x.size(-1), N = D == 0 ? 0 : x.numel() / D;
  if (N == 0) return;
  const cudaStream_t s = stream_of(x);
  SRU_DISPATCH_FLOATING(x.dtype(), "layer_norm_backward", [&]<typename T>() {
    layer_norm_backward_kernel<<<rows_grid(N), kBlock, 0, s>>>(
        g.data<T>(), x.data<T>(), data_or_null<T>(weight), mean.data<T>(), rstd.data<T>(), N, D, dx.data<T>());
    SRU_CUDA_LAUNCH_CHECK("layer_norm_backward_kernel");
    if (dweight.defined())
      column_sums(WeightGradTerm<T>{g.data<T>(), x.data<T>(), mean.data<T>(), rstd.data<T>(), D}, N, D, 1.0,
                  dweight.data<T>(), x.device());
    if (dbias.defined()) column_sums(BiasGradTerm<T>{g.data<T>(), D}, N, D, 1.0, dbias.data<T>(), x.device());
  });
}

}  // namespace sru::cuda
