// CUDA kernels of layer_norm (math in ops/layer_norm.h; CPU twins in ops/cpu/layer_norm.cpp).
// x (N, D). f32 and bf16 rows in float32 (ops/cuda/row_kernels.cuh): a warp per row up to 1,024
// elements, else a block; 16-byte packs where the rows allow; the mean, then the centred sum of squares,
// then y; backward the two row sums (of gh and gh xhat), then dx. A warp per row with packs holds its
// row in registers (row_kernels.cuh, RowPacks): one read of x (of g and x backward) for all passes.
// f64 rows (the gradient checks): one block per row in double with fixed-tree sums. dweight / dbias sum
// over rows per column with column_sums (ops/cuda/kernel_util.cuh: fixed chunks, in double,
// deterministic). bf16 x, y and dx: weight, bias, statistics and weight gradients in float32
// (C = compute_t<T>), each output rounded once, as the CPU twin (whose row statistics accumulate in
// double: the two differ by float32 rounding).
#include <type_traits>

#include "ops/cuda/kernel_util.cuh"
#include "ops/cuda/row_kernels.cuh"
#include "ops/layer_norm.h"

namespace sru::cuda {

namespace {

template <typename T, typename C = compute_t<T>>
__global__ void layer_norm_f64_kernel(const T* x, const C* w, const C* b, long long N, long long D, double eps, T* y, C* mean,
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
__global__ void layer_norm_backward_f64_kernel(const T* g, const T* x, const C* w, const C* mean, const C* rstd, long long N,
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

// y = (x - mean) rstd w + b in float32, and the row's mean and rstd. P > 0: the row held in registers
// (with_row_cache), read once for its three passes.
template <typename T, int V, int TPR, int P>
__global__ void layer_norm_f32_kernel(const T* x, const float* w, const float* b, long long N, long long D, float eps,
                                      T* y, float* mean, float* rstd) {
  __shared__ float shared[kBlock / 32];
  const RowThreads<TPR> threads;
  const long long first = static_cast<long long>(threads.lane) * V, stride = static_cast<long long>(TPR) * V;
  for (long long n = threads.first; n < N; n += threads.step) {
    const RowPacks<T, V, P> packs(x + n * D, first, stride, D);
    float s = 0.0f;
    packs.each([&](const Pack<T, V>& p, long long) {
#pragma unroll
      for (int k = 0; k < V; ++k) s += p.v[k];
    });
    const float mu = row_sum<TPR>(s, shared) / static_cast<float>(D);
    float v = 0.0f;
    packs.each([&](const Pack<T, V>& p, long long) {
#pragma unroll
      for (int k = 0; k < V; ++k) v += (p.v[k] - mu) * (p.v[k] - mu);
    });
    const float r = 1.0f / sqrtf(row_sum<TPR>(v, shared) / static_cast<float>(D) + eps);
    if (threads.lane == 0) {
      mean[n] = mu;
      rstd[n] = r;
    }
    packs.each([&](const Pack<T, V>& p, long long j) {
      Pack<T, V> out;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        float h = (p.v[k] - mu) * r;
        if (w) h *= w[j + k];
        if (b) h += b[j + k];
        out.v[k] = h;
      }
      out.store(y + n * D + j);
    });
  }
}

// dx = rstd (gh - mean(gh) - xhat mean(gh xhat)), gh = g w, in float32. P > 0: g's and x's rows held in
// registers for the two passes.
template <typename T, int V, int TPR, int P>
__global__ void layer_norm_backward_f32_kernel(const T* g, const T* x, const float* w, const float* mean,
                                               const float* rstd, long long N, long long D, T* dx) {
  __shared__ float shared[kBlock / 32];
  const RowThreads<TPR> threads;
  const long long first = static_cast<long long>(threads.lane) * V, stride = static_cast<long long>(TPR) * V;
  for (long long n = threads.first; n < N; n += threads.step) {
    const RowPacks<T, V, P> gs(g + n * D, first, stride, D), xs(x + n * D, first, stride, D);
    const float mu = mean[n], r = rstd[n];
    // f(j, k, gh, xhat) over the thread's elements in order, the two rows' packs side by side.
    const auto pass = [&](auto&& f) {
      if constexpr (P > 0) {
#pragma unroll
        for (int q = 0; q < P; ++q) {
          const long long j = first + q * stride;
          if (j >= D) continue;
#pragma unroll
          for (int k = 0; k < V; ++k) {
            const float gv = gs.held[q].v[k];
            f(j, k, w ? gv * w[j + k] : gv, (xs.held[q].v[k] - mu) * r);
          }
        }
      } else {
        for (long long j = first; j < D; j += stride) {
          Pack<T, V> pg, px;
          pg.load(g + n * D + j);
          px.load(x + n * D + j);
#pragma unroll
          for (int k = 0; k < V; ++k) f(j, k, w ? pg.v[k] * w[j + k] : pg.v[k], (px.v[k] - mu) * r);
        }
      }
    };
    float sum_gh = 0.0f, sum_gh_xhat = 0.0f;
    pass([&](long long, int, float gh, float xhat) {
      sum_gh += gh;
      sum_gh_xhat += gh * xhat;
    });
    const float mean_gh = row_sum<TPR>(sum_gh, shared) / static_cast<float>(D);
    const float mean_gh_xhat = row_sum<TPR>(sum_gh_xhat, shared) / static_cast<float>(D);
    // dx a pack at a time: the pack of j is complete after its k = V - 1.
    Pack<T, V> out;
    pass([&](long long j, int k, float gh, float xhat) {
      out.v[k] = r * (gh - mean_gh - xhat * mean_gh_xhat);
      if (k == V - 1) out.store(dx + n * D + j);
    });
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
    const cudaStream_t s = stream_of(x);
    if constexpr (std::is_same_v<T, double>) {
      layer_norm_f64_kernel<<<rows_grid(N), kBlock, 0, s>>>(x.data<T>(), data_or_null<C>(weight), data_or_null<C>(bias),
                                                           N, D, eps, y.data<T>(), mean.data<C>(), rstd.data<C>());
      SRU_CUDA_LAUNCH_CHECK("layer_norm_f64_kernel");
    } else {
      // The weight and bias are read per element of a pack: only x and y need 16-byte alignment.
      const RowLaunch shape = row_launch<T>(N, D, {x.data_ptr(), y.data_ptr()});
      with_row_shape<T>(shape, [&]<int V, int TPR>() {
        with_row_cache<V, TPR>(D, [&]<int P>() {
          layer_norm_f32_kernel<T, V, TPR, P><<<shape.blocks, kBlock, 0, s>>>(
              x.data<T>(), data_or_null<C>(weight), data_or_null<C>(bias), N, D, static_cast<float>(eps), y.data<T>(),
              mean.data<C>(), rstd.data<C>());
        });
      });
      SRU_CUDA_LAUNCH_CHECK("layer_norm_f32_kernel");
    }
  });
}

void layer_norm_backward(const Tensor& g, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const int64_t D = x.size(-1), N = D == 0 ? 0 : x.numel() / D;
  if (N == 0) {  // no rows: the parameters' gradients are zero (they may be flat slots holding old values)
    for (const Tensor* t : {&dweight, &dbias})
      if (t->defined()) Tensor(*t).zero_();
    return;
  }
  const cudaStream_t s = stream_of(x);
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "layer_norm_backward", [&]<typename T>() {
    using C = compute_t<T>;
    if constexpr (std::is_same_v<T, double>) {
      layer_norm_backward_f64_kernel<<<rows_grid(N), kBlock, 0, s>>>(
          g.data<T>(), x.data<T>(), data_or_null<C>(weight), mean.data<C>(), rstd.data<C>(), N, D, dx.data<T>());
      SRU_CUDA_LAUNCH_CHECK("layer_norm_backward_f64_kernel");
    } else {
      const RowLaunch shape = row_launch<T>(N, D, {g.data_ptr(), x.data_ptr(), dx.data_ptr()});
      with_row_shape<T>(shape, [&]<int V, int TPR>() {
        with_row_cache<V, TPR>(D, [&]<int P>() {
          layer_norm_backward_f32_kernel<T, V, TPR, P><<<shape.blocks, kBlock, 0, s>>>(
              g.data<T>(), x.data<T>(), data_or_null<C>(weight), mean.data<C>(), rstd.data<C>(), N, D, dx.data<T>());
        });
      });
      SRU_CUDA_LAUNCH_CHECK("layer_norm_backward_f32_kernel");
    }
    if (dweight.defined())
      column_sums(WeightGradTerm<T>{g.data<T>(), x.data<T>(), mean.data<C>(), rstd.data<C>(), D}, N, D, 1.0,
                  dweight.data<C>(), x.device());
    if (dbias.defined()) column_sums(BiasGradTerm<T>{g.data<T>(), D}, N, D, 1.0, dbias.data<C>(), x.device());
  });
}

}  // namespace sru::cuda
