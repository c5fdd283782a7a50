// CUDA kernels of layer_norm (math in ops/layer_norm.h; CPU twins in ops/cpu/layer_norm.cpp).
// x (N, D). f32 and bf16 rows in float32 (ops/cuda/row_kernels.cuh): a warp per row up to 1,024
// elements, else a block; 16-byte packs where the rows allow; the mean, then the centred sum of squares,
// then y; backward the two row sums (of gh and gh xhat), then dx. A warp per row with packs holds its
// row in registers (row_kernels.cuh, RowPacks): one read of x (of g and x backward) for all passes.
// f64 rows (the gradient checks): one block per row in double with fixed-tree sums. dweight / dbias:
// for packed rows up to 512 elements the backward kernel sums them from the rows it holds in registers
// (a lane's columns over its rows in float32, the block's warps in warp order, one row of partials per
// block, at most 512 blocks) and one finish_column_sums adds the blocks' rows in double: two launches
// for the whole backward, g and x read once. Other rows: column_sums (ops/cuda/kernel_util.cuh: fixed
// chunks, in double, deterministic) after the dx kernel. bf16 x, y and dx: weight, bias, statistics and
// weight gradients in float32 (C = compute_t<T>), each output rounded once, as the CPU twin (whose row
// statistics accumulate in double: the two differ by float32 rounding).
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

// f(q, k, j) for each element a lane of a warp-per-row kernel holds in registers (P > 0): element k of
// its pack q, which starts at column j = first + q * stride.
template <int V, int P, typename F>
__device__ void each_held(long long first, long long stride, long long D, F&& f) {
#pragma unroll
  for (int q = 0; q < P; ++q) {
    const long long j = first + q * stride;
    if (j >= D) continue;
#pragma unroll
    for (int k = 0; k < V; ++k) f(q, k, j);
  }
}

// The parameter gradients' partial sums of a block (kParamGrads): each lane of a warp-per-row kernel
// with its row in registers owns the same P x V columns in every row it takes, so it sums g xhat and g
// over its rows in registers; the block's 8 warps then add theirs in warp order in shared memory, and
// the block writes one row of partials (dweight's D, then dbias's D) for finish_column_sum_kernel.
template <int V, int P>
struct ParamGradSums {
  static constexpr int kColumns = 32 * V * P;  // the most columns a warp's lanes hold
  float g_xhat[P * V] = {}, g[P * V] = {};

  __device__ void write_block_partials(long long first, long long stride, long long D, double* partials) const {
    __shared__ float block_sums[2][kColumns];
    const int warp = static_cast<int>(threadIdx.x / 32);
    for (int w = 0; w < kBlock / 32; ++w) {  // warp order: the same sums every run
      if (warp == w)
        each_held<V, P>(first, stride, D, [&](int q, int k, long long j) {
          block_sums[0][j + k] = (w == 0 ? 0.0f : block_sums[0][j + k]) + g_xhat[q * V + k];
          block_sums[1][j + k] = (w == 0 ? 0.0f : block_sums[1][j + k]) + g[q * V + k];
        });
      __syncthreads();
    }
    double* row = partials + static_cast<long long>(blockIdx.x) * 2 * D;
    for (long long j = threadIdx.x; j < D; j += kBlock) {
      row[j] = block_sums[0][j];
      row[D + j] = block_sums[1][j];
    }
  }
};

// dx = rstd (gh - mean(gh) - xhat mean(gh xhat)), gh = g w, in float32. P > 0: g's and x's rows held in
// registers for the two passes. kParamGrads (P > 0 only): also the block's partial sums of dweight =
// sum g xhat and dbias = sum g (ParamGradSums), from the registers: no second read of g and x.
template <typename T, int V, int TPR, int P, bool kParamGrads>
__global__ void layer_norm_backward_f32_kernel(const T* g, const T* x, const float* w, const float* mean,
                                               const float* rstd, long long N, long long D, T* dx,
                                               double* param_partials) {
  static_assert(!kParamGrads || P > 0, "the parameter gradients' sums need the row in registers");
  __shared__ float shared[kBlock / 32];
  const RowThreads<TPR> threads;
  const long long first = static_cast<long long>(threads.lane) * V, stride = static_cast<long long>(TPR) * V;
  ParamGradSums<V, kParamGrads ? P : 1> sums;
  for (long long n = threads.first; n < N; n += threads.step) {
    const RowPacks<T, V, P> gs(g + n * D, first, stride, D), xs(x + n * D, first, stride, D);
    const float mu = mean[n], r = rstd[n];
    if constexpr (kParamGrads)
      each_held<V, P>(first, stride, D, [&](int q, int k, long long) {
        const float gv = gs.held[q].v[k];
        sums.g[q * V + k] += gv;
        sums.g_xhat[q * V + k] += gv * ((xs.held[q].v[k] - mu) * r);
      });
    // f(j, k, gh, xhat) over the thread's elements in order, the two rows' packs side by side.
    const auto pass = [&](auto&& f) {
      if constexpr (P > 0) {
        each_held<V, P>(first, stride, D, [&](int q, int k, long long j) {
          const float gv = gs.held[q].v[k];
          f(j, k, w ? gv * w[j + k] : gv, (xs.held[q].v[k] - mu) * r);
        });
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
  if constexpr (kParamGrads) sums.write_block_partials(first, stride, D, param_partials);
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

// The fused backward (dx and the parameter gradients' block partials in one kernel, then one finish)
// where a lane holds at most this many elements of a row: 16 floats of partial sums a lane beside its
// 2 x 16 held elements (float32 and bf16 rows up to 512 elements, packed); wider rows would
// spill registers, so they keep the column sums.
constexpr int kFusedParamGradElements = 16;
// Blocks of the fused kernel at most: each writes a row of 2 D partials, so the finish reads at most
// 512 x 2 D doubles (4 MB at D 512); a fixed number, so the sums do not depend on the card.
constexpr unsigned kFusedParamGradBlocks = 512;

template <typename T, int V, int TPR, int P>
void fused_backward(const Tensor& g, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                    long long N, long long D, const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                    unsigned row_blocks) {
  using C = compute_t<T>;
  const cudaStream_t s = stream_of(x);
  const unsigned blocks = row_blocks < kFusedParamGradBlocks ? row_blocks : kFusedParamGradBlocks;
  const Tensor partials = Tensor::empty({static_cast<int64_t>(blocks) * 2 * D}, DType::F64, x.device());
  layer_norm_backward_f32_kernel<T, V, TPR, P, true><<<blocks, kBlock, 0, s>>>(
      g.data<T>(), x.data<T>(), data_or_null<C>(weight), mean.data<C>(), rstd.data<C>(), N, D, dx.data<T>(),
      partials.data<double>());
  SRU_CUDA_LAUNCH_CHECK("layer_norm_backward_f32_kernel");
  finish_column_sums(partials.data<double>(), blocks, 2 * D, 1.0,
                     ColumnOutputs<C>{data_or_null<C>(dweight), data_or_null<C>(dbias), D}, s);
}

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
      bool sums_done = false;
      with_row_shape<T>(shape, [&]<int V, int TPR>() {
        with_row_cache<V, TPR>(D, [&]<int P>() {
          if constexpr (P > 0 && P * V <= kFusedParamGradElements) {
            if (dweight.defined() || dbias.defined()) {
              fused_backward<T, V, TPR, P>(g, x, weight, mean, rstd, N, D, dx, dweight, dbias, shape.blocks);
              sums_done = true;
              return;
            }
          }
          layer_norm_backward_f32_kernel<T, V, TPR, P, false><<<shape.blocks, kBlock, 0, s>>>(
              g.data<T>(), x.data<T>(), data_or_null<C>(weight), mean.data<C>(), rstd.data<C>(), N, D, dx.data<T>(),
              nullptr);
          SRU_CUDA_LAUNCH_CHECK("layer_norm_backward_f32_kernel");
        });
      });
      if (sums_done) return;
    }
    if (dweight.defined())
      column_sums(WeightGradTerm<T>{g.data<T>(), x.data<T>(), mean.data<C>(), rstd.data<C>(), D}, N, D, 1.0,
                  dweight.data<C>(), x.device());
    if (dbias.defined()) column_sums(BiasGradTerm<T>{g.data<T>(), D}, N, D, 1.0, dbias.data<C>(), x.device());
  });
}

}  // namespace sru::cuda
