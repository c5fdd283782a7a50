// CUDA kernels of softmax, log_softmax and cross-entropy (CPU twins: ops/cpu/softmax.cpp).
// Shapes: x, y, g, gx and the logits (N, C) rows; targets (N).
// f32 and bf16 rows compute in float32 (the CPU twin's arithmetic type): a row of C <= kWarpRowMax
// classes per warp (8 rows a block), longer rows one block each; each thread reads 16 bytes at a time
// (4 floats or 8 bf16) where the rows allow (C * sizeof(T) a multiple of 16, 16-byte aligned data),
// else one element. Forward in two passes over the row: an online max and sum of exps (each thread
// keeps (m, s) and rescales s when m grows; the threads' pairs merge by warp shuffles, then across
// warps in warp order: the same result every run), then the outputs exp(x - m) / s or x - (m + log s).
// exp is CUDA's expf (within 2 ulp), sums in float32. Backward: the row's dot by the same reductions,
// then one pass.
// Cross-entropy: one launch writes each row's logsumexp, loss and (label smoothing) share, then one
// block sums the row losses and counted rows in double into the loss and its scale (fixed tree), so
// no value comes back to the host; an out-of-range target is recorded in the device error log
// (reported at the next host wait, with the CPU's message). Per-row loss: ops/softmax_math.h.
// f64 rows (the gradient checks) keep one block per row with double math and fixed-tree block
// reductions. bf16 outputs are rounded once; the cross-entropy's logsumexps, loss and incoming
// gradient are float32 under bf16 logits (compute_t), as on the CPU.
#include <type_traits>

#include "ops/dispatch.h"
#include "ops/cuda/kernel_util.cuh"
#include "ops/cuda/row_kernels.cuh"
#include "ops/softmax.h"
#include "ops/softmax_math.h"

namespace sru::cuda {

namespace {

// logsumexp of a row, computed by the whole block; every thread gets it.
template <typename T>
__device__ double row_logsumexp(const T* row, long long C, double* shared) {
  double mx = -INFINITY;
  for (long long c = threadIdx.x; c < C; c += kBlock) mx = fmax(mx, static_cast<double>(row[c]));
  mx = block_max(mx, shared);
  if (isinf(mx)) return mx;
  double s = 0.0;
  for (long long c = threadIdx.x; c < C; c += kBlock) s += exp(static_cast<double>(row[c]) - mx);
  s = block_sum(s, shared);
  return mx + log(s);
}

template <typename T>
__global__ void softmax_f64_kernel(const T* x, long long N, long long C, bool log_out, T* y) {
  __shared__ double shared[kBlock];
  SRU_ROW_STRIDE(n, N) {
    const T* row = x + n * C;
    T* out = y + n * C;
    const double lse = row_logsumexp(row, C, shared);
    for (long long c = threadIdx.x; c < C; c += kBlock) {
      const double v = static_cast<double>(row[c]) - lse;
      out[c] = static_cast<T>(log_out ? v : exp(v));
    }
  }
}

template <typename T>
__global__ void softmax_backward_f64_kernel(const T* g, const T* y, long long N, long long C, bool log_in, T* gx) {
  __shared__ double shared[kBlock];
  SRU_ROW_STRIDE(n, N) {
    const T *gr = g + n * C, *yr = y + n * C;
    T* out = gx + n * C;
    double dot = 0.0;
    for (long long c = threadIdx.x; c < C; c += kBlock)
      dot += log_in ? static_cast<double>(gr[c]) : static_cast<double>(gr[c]) * static_cast<double>(yr[c]);
    dot = block_sum(dot, shared);
    for (long long c = threadIdx.x; c < C; c += kBlock) {
      const double gc = static_cast<double>(gr[c]), yc = static_cast<double>(yr[c]);
      out[c] = log_in ? static_cast<T>(gc - exp(yc) * dot) : static_cast<T>(yc * (gc - dot));
    }
  }
}

// Per row: the logsumexp, the row's loss (0 when ignored or bad) and whether it counts; a bad target's
// row goes into the error slot. With label smoothing (eps > 0, the same for every block) the block also
// sums the row's kept logits and counts them, and writes the row's smoothing share.
template <typename T, typename I>
__global__ void cross_entropy_f64_kernel(const T* logits, const I* target, long long N, long long C, long long ignore_index,
                                     double eps, compute_t<T>* lse_out, double* share_out, double* row_loss, int* row_counts,
                                     unsigned long long* bad_row) {
  __shared__ double shared[kBlock];
  SRU_ROW_STRIDE(n, N) {
    const T* row = logits + n * C;
    const double l = row_logsumexp(row, C, shared);
    double kept_sum = 0.0, kept = 0.0;
    if (eps > 0) {
      for (long long c = threadIdx.x; c < C; c += kBlock) {
        const double x = static_cast<double>(row[c]);
        if (smoothing_keeps(x)) {
          kept_sum += x;
          kept += 1.0;
        }
      }
      kept_sum = block_sum(kept_sum, shared);
      kept = block_sum(kept, shared);
    }
    if (threadIdx.x != 0) continue;
    lse_out[n] = static_cast<compute_t<T>>(l);
    if (eps > 0) share_out[n] = smoothing_share(eps, kept);
    const long long k = static_cast<long long>(target[n]);
    const bool bad = k != ignore_index && (k < 0 || k >= C);
    if (bad && bad_row) atomicMin(bad_row, static_cast<unsigned long long>(n));
    row_loss[n] = k == ignore_index || bad ? 0.0 : cross_entropy_row_loss(l, static_cast<double>(row[k]), eps, kept_sum, kept);
    row_counts[n] = k != ignore_index;
  }
}

// One block: the loss = scale * (sum of the row losses) and scale = cross_entropy_scale(counted rows),
// with fixed-tree sums (the same result every run).
template <typename T>
__global__ void cross_entropy_total_kernel(const double* row_loss, const int* row_counts, long long N, bool mean,
                                           T* loss, double* scale) {
  __shared__ double shared[kBlock];
  double total = 0.0, counted = 0.0;
  for (long long n = threadIdx.x; n < N; n += kBlock) {
    total += row_loss[n];
    counted += row_counts[n];
  }
  total = block_sum(total, shared);
  counted = block_sum(counted, shared);
  if (threadIdx.x == 0) {
    const double s = mean ? (counted > 0 ? 1.0 / counted : 0.0) : 1.0;  // cross_entropy_scale
    *scale = s;
    *loss = static_cast<T>(total * s);
  }
}

template <typename T, typename I>
__global__ void cross_entropy_backward_f64_kernel(const T* logits, const I* target, const compute_t<T>* lse, long long N,
                                              long long C, long long ignore_index, double eps, const double* share,
                                              const double* scale, const compute_t<T>* grad, T* gx) {
  const double factor = *scale * static_cast<double>(*grad);
  SRU_ROW_STRIDE(n, N) {
    const long long k = static_cast<long long>(target[n]);
    const double l = lse[n], row_share = eps > 0 ? share[n] : 0.0;
    for (long long c = threadIdx.x; c < C; c += kBlock)
      gx[n * C + c] = k == ignore_index ? T(0)
                                        : cross_entropy_grad<T>(static_cast<double>(logits[n * C + c]), l, c == k, eps,
                                                                row_share, factor);
  }
}


// ---- float32 rows (f32 and bf16 storage) ----

// Running max m and sum s of exp(x - m) (online softmax).
struct MaxSum {
  float m = -INFINITY, s = 0.0f;
  __device__ void add(float x) {
    if (x > m) {
      s = s * expf(m - x) + 1.0f;  // m = -inf: expf(-inf) = 0
      m = x;
    } else if (x != -INFINITY) {  // NaN lands here: s becomes NaN
      s += expf(x - m);
    }
  }
  // Commutative (every lane of a butterfly gets the same pair), and a side at the maximum keeps its sum
  // as it is: two empty sides (m = -inf) add their sums, so a NaN held beside an all -inf row survives,
  // and two +inf maxima never compute inf - inf.
  __device__ void merge(float m2, float s2) {
    const float top = fmaxf(m, m2);
    s = (m == top ? s : s * expf(m - top)) + (m2 == top ? s2 : s2 * expf(m2 - top));
    m = top;
  }
};

template <int TPR>
__device__ MaxSum row_max_sum(MaxSum a, float* shared_m, float* shared_s) {
  for (int lanes = 16; lanes > 0; lanes >>= 1)
    a.merge(__shfl_xor_sync(0xffffffffu, a.m, lanes), __shfl_xor_sync(0xffffffffu, a.s, lanes));
  if constexpr (TPR == 32) {
    return a;
  } else {
    if (threadIdx.x % 32 == 0) {
      shared_m[threadIdx.x / 32] = a.m;
      shared_s[threadIdx.x / 32] = a.s;
    }
    __syncthreads();
    MaxSum total;
    for (int w = 0; w < kBlock / 32; ++w) total.merge(shared_m[w], shared_s[w]);
    __syncthreads();
    return total;
  }
}

template <typename T, int V, int TPR>
__device__ MaxSum row_online(const T* row, long long C, int lane, float* shared_m, float* shared_s) {
  MaxSum acc;
  for (long long c = static_cast<long long>(lane) * V; c < C; c += static_cast<long long>(TPR) * V) {
    Pack<T, V> p;
    p.load(row + c);
#pragma unroll
    for (int k = 0; k < V; ++k) acc.add(p.v[k]);
  }
  return row_max_sum<TPR>(acc, shared_m, shared_s);
}

template <typename T, int V, int TPR>
__global__ void softmax_f32_kernel(const T* x, long long N, long long C, bool log_out, T* y) {
  __shared__ float shared_m[kBlock / 32], shared_s[kBlock / 32];
  const RowThreads<TPR> threads;
  for (long long n = threads.first; n < N; n += threads.step) {
    const T* row = x + n * C;
    T* out = y + n * C;
    const MaxSum r = row_online<T, V, TPR>(row, C, threads.lane, shared_m, shared_s);
    // A row of -inf (m = -inf) or with +inf: x - m and exp(x - m), as the CPU twin.
    const bool finite = !isinf(r.m);
    const float lse = finite ? r.m + logf(r.s) : r.m, inv = finite ? 1.0f / r.s : 1.0f;
    for (long long c = static_cast<long long>(threads.lane) * V; c < C; c += static_cast<long long>(TPR) * V) {
      Pack<T, V> p;
      p.load(row + c);
#pragma unroll
      for (int k = 0; k < V; ++k) p.v[k] = log_out ? p.v[k] - lse : expf(p.v[k] - r.m) * inv;
      p.store(out + c);
    }
  }
}

template <typename T, int V, int TPR>
__global__ void softmax_backward_f32_kernel(const T* g, const T* y, long long N, long long C, bool log_in, T* gx) {
  __shared__ float shared[kBlock / 32];
  const RowThreads<TPR> threads;
  for (long long n = threads.first; n < N; n += threads.step) {
    const T *gr = g + n * C, *yr = y + n * C;
    T* out = gx + n * C;
    float dot = 0.0f;
    for (long long c = static_cast<long long>(threads.lane) * V; c < C; c += static_cast<long long>(TPR) * V) {
      Pack<T, V> pg, py;
      pg.load(gr + c);
      py.load(yr + c);
#pragma unroll
      for (int k = 0; k < V; ++k) dot += log_in ? pg.v[k] : pg.v[k] * py.v[k];
    }
    dot = row_sum<TPR>(dot, shared);
    for (long long c = static_cast<long long>(threads.lane) * V; c < C; c += static_cast<long long>(TPR) * V) {
      Pack<T, V> pg, py;
      pg.load(gr + c);
      py.load(yr + c);
#pragma unroll
      for (int k = 0; k < V; ++k) pg.v[k] = log_in ? pg.v[k] - expf(py.v[k]) * dot : py.v[k] * (pg.v[k] - dot);
      pg.store(out + c);
    }
  }
}

// Per row: the logsumexp, the row's loss (0 when ignored or bad) and whether it counts; a bad target's
// row goes into the error slot. With label smoothing (eps > 0) also the kept classes' logit sum and
// count, and the row's smoothing share.
template <typename T, typename I, int V, int TPR>
__global__ void cross_entropy_f32_kernel(const T* logits, const I* target, long long N, long long C,
                                         long long ignore_index, double eps, float* lse_out, double* share_out,
                                         double* row_loss, int* row_counts, unsigned long long* bad_row) {
  __shared__ float shared_m[kBlock / 32], shared_s[kBlock / 32];
  const RowThreads<TPR> threads;
  for (long long n = threads.first; n < N; n += threads.step) {
    const T* row = logits + n * C;
    // One pass: the online max and sum, and with label smoothing the kept logits' sum and count.
    MaxSum r;
    float kept_sum = 0.0f, kept = 0.0f;
    for (long long c = static_cast<long long>(threads.lane) * V; c < C; c += static_cast<long long>(TPR) * V) {
      Pack<T, V> p;
      p.load(row + c);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        r.add(p.v[k]);
        if (eps > 0 && smoothing_keeps(p.v[k])) {
          kept_sum += p.v[k];
          kept += 1.0f;
        }
      }
    }
    r = row_max_sum<TPR>(r, shared_m, shared_s);
    if (eps > 0) {
      kept_sum = row_sum<TPR>(kept_sum, shared_m);
      kept = row_sum<TPR>(kept, shared_s);
    }
    if (threads.lane != 0) continue;
    const double l = isinf(r.m) ? static_cast<double>(r.m) : static_cast<double>(r.m) + log(static_cast<double>(r.s));
    lse_out[n] = static_cast<float>(l);
    if (eps > 0) share_out[n] = smoothing_share(eps, kept);
    const long long k = static_cast<long long>(target[n]);
    const bool bad = k != ignore_index && (k < 0 || k >= C);
    if (bad && bad_row) atomicMin(bad_row, static_cast<unsigned long long>(n));
    row_loss[n] = k == ignore_index || bad
                      ? 0.0
                      : cross_entropy_row_loss(l, static_cast<float>(row[k]), eps, kept_sum, kept);
    row_counts[n] = k != ignore_index;
  }
}

// (p_c - q_c) factor in float32, as the CPU twin: exp(x - lse) factor minus factor at the target
// (eps = 0), else (exp(x - lse) - q_c) factor.
template <typename T, typename I, int V, int TPR>
__global__ void cross_entropy_backward_f32_kernel(const T* logits, const I* target, const float* lse, long long N,
                                                  long long C, long long ignore_index, double eps, const double* share,
                                                  const double* scale, const float* grad, T* gx) {
  const float f = static_cast<float>(*scale * static_cast<double>(*grad));
  const RowThreads<TPR> threads;
  for (long long n = threads.first; n < N; n += threads.step) {
    const long long k = static_cast<long long>(target[n]);
    const bool ignored = k == ignore_index;
    const float l = lse[n], s = eps > 0 ? static_cast<float>(share[n]) : 0.0f;
    const double row_share = eps > 0 ? share[n] : 0.0;
    for (long long c = static_cast<long long>(threads.lane) * V; c < C; c += static_cast<long long>(TPR) * V) {
      Pack<T, V> p;
      p.load(logits + n * C + c);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float x = p.v[j];
        const bool at_target = c + j == k;
        if (ignored) {
          p.v[j] = 0.0f;
        } else if (eps == 0.0) {
          p.v[j] = expf(x - l) * f;
          if (at_target) p.v[j] -= f;
        } else {
          // At the target the CPU twin's q: (1 - eps + share) rounded once.
          const float q = at_target ? static_cast<float>(1.0 - eps + (smoothing_keeps(x) ? row_share : 0.0))
                                    : (smoothing_keeps(x) ? s : 0.0f);
          p.v[j] = (expf(x - l) - q) * f;
        }
      }
      p.store(gx + n * C + c);
    }
  }
}

}  // namespace

void softmax_forward(const Tensor& x, bool log, const Tensor& y) {
  const int64_t C = x.size(-1), N = C == 0 ? 0 : x.numel() / C;
  if (N == 0) return;
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "softmax", [&]<typename T>() {
    const cudaStream_t s = stream_of(x);
    if constexpr (std::is_same_v<T, double>) {
      softmax_f64_kernel<<<rows_grid(N), kBlock, 0, s>>>(x.data<T>(), N, C, log, y.data<T>());
      SRU_CUDA_LAUNCH_CHECK("softmax_f64_kernel");
    } else {
      const RowLaunch shape = row_launch<T>(N, C, {x.data_ptr(), y.data_ptr()});
      with_row_shape<T>(shape, [&]<int V, int TPR>() {
        softmax_f32_kernel<T, V, TPR><<<shape.blocks, kBlock, 0, s>>>(x.data<T>(), N, C, log, y.data<T>());
      });
      SRU_CUDA_LAUNCH_CHECK("softmax_f32_kernel");
    }
  });
}

void softmax_backward(const Tensor& g, const Tensor& y, bool log, const Tensor& gx) {
  const int64_t C = y.size(-1), N = C == 0 ? 0 : y.numel() / C;
  if (N == 0) return;
  SRU_DISPATCH_FLOATING_BF16(y.dtype(), "softmax_backward", [&]<typename T>() {
    const cudaStream_t s = stream_of(y);
    if constexpr (std::is_same_v<T, double>) {
      softmax_backward_f64_kernel<<<rows_grid(N), kBlock, 0, s>>>(g.data<T>(), y.data<T>(), N, C, log, gx.data<T>());
      SRU_CUDA_LAUNCH_CHECK("softmax_backward_f64_kernel");
    } else {
      const RowLaunch shape = row_launch<T>(N, C, {g.data_ptr(), y.data_ptr(), gx.data_ptr()});
      with_row_shape<T>(shape, [&]<int V, int TPR>() {
        softmax_backward_f32_kernel<T, V, TPR><<<shape.blocks, kBlock, 0, s>>>(g.data<T>(), y.data<T>(), N, C, log,
                                                                               gx.data<T>());
      });
      SRU_CUDA_LAUNCH_CHECK("softmax_backward_f32_kernel");
    }
  });
}

void cross_entropy_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index, Reduction reduction,
                           double label_smoothing, const Tensor& lse, const Tensor& share, const Tensor& loss,
                           const Tensor& scale) {
  const int64_t N = logits.size(0), C = logits.size(1);
  const Device device = logits.device();
  Tensor row_loss = Tensor::empty({N}, DType::F64, device);
  Tensor row_counts = Tensor::empty({N}, DType::I32, device);
  const cudaStream_t s = stream_of(logits);
  SRU_DISPATCH_FLOATING_BF16(logits.dtype(), "cross_entropy", [&]<typename T>() {
    using Acc = compute_t<T>;
    if (N > 0) {
      // The target tensor is kept by the describer until the check, so that the message can name the value.
      unsigned long long* bad = reserve_error_slot(device.index, [target, C, ignore_index](int64_t row) {
        const int64_t k = target.view({-1}).narrow0(row, 1).item<int64_t>();  // error path only
        return cross_entropy_target_error(k, row, C, ignore_index);
      });
      with_index_data(target, [&](const auto* t) {
        if constexpr (std::is_same_v<T, double>) {
          cross_entropy_f64_kernel<<<rows_grid(N), kBlock, 0, s>>>(logits.data<T>(), t, N, C, ignore_index,
                                                                  label_smoothing, lse.data<Acc>(),
                                                                  data_or_null<double>(share), row_loss.data<double>(),
                                                                  row_counts.data<int32_t>(), bad);
          SRU_CUDA_LAUNCH_CHECK("cross_entropy_f64_kernel");
        } else {
          using I = std::remove_cv_t<std::remove_pointer_t<decltype(t)>>;
          const RowLaunch shape = row_launch<T>(N, C, {logits.data_ptr()});
          with_row_shape<T>(shape, [&]<int V, int TPR>() {
            cross_entropy_f32_kernel<T, I, V, TPR><<<shape.blocks, kBlock, 0, s>>>(
                logits.data<T>(), t, N, C, ignore_index, label_smoothing, lse.data<Acc>(), data_or_null<double>(share),
                row_loss.data<double>(), row_counts.data<int32_t>(), bad);
          });
          SRU_CUDA_LAUNCH_CHECK("cross_entropy_f32_kernel");
        }
      });
    }
    cross_entropy_total_kernel<<<1, kBlock, 0, s>>>(row_loss.data<double>(), row_counts.data<int32_t>(), N,
                                                    reduction == Reduction::Mean, loss.data<Acc>(), scale.data<double>());
    SRU_CUDA_LAUNCH_CHECK("cross_entropy_total_kernel");
  });
}

void cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& lse, int64_t ignore_index,
                            double label_smoothing, const Tensor& share, const Tensor& scale, const Tensor& grad,
                            const Tensor& gx) {
  const int64_t N = logits.size(0), C = logits.size(1);
  if (N == 0) return;
  SRU_DISPATCH_FLOATING_BF16(logits.dtype(), "cross_entropy_backward", [&]<typename T>() {
    using Acc = compute_t<T>;
    const cudaStream_t s = stream_of(logits);
    with_index_data(target, [&](const auto* t) {
      if constexpr (std::is_same_v<T, double>) {
        cross_entropy_backward_f64_kernel<<<rows_grid(N), kBlock, 0, s>>>(
            logits.data<T>(), t, lse.data<Acc>(), N, C, ignore_index, label_smoothing, data_or_null<double>(share),
            scale.data<double>(), grad.data<Acc>(), gx.data<T>());
        SRU_CUDA_LAUNCH_CHECK("cross_entropy_backward_f64_kernel");
      } else {
        using I = std::remove_cv_t<std::remove_pointer_t<decltype(t)>>;
        const RowLaunch shape = row_launch<T>(N, C, {logits.data_ptr(), gx.data_ptr()});
        with_row_shape<T>(shape, [&]<int V, int TPR>() {
          cross_entropy_backward_f32_kernel<T, I, V, TPR><<<shape.blocks, kBlock, 0, s>>>(
              logits.data<T>(), t, lse.data<Acc>(), N, C, ignore_index, label_smoothing, data_or_null<double>(share),
              scale.data<double>(), grad.data<Acc>(), gx.data<T>());
        });
        SRU_CUDA_LAUNCH_CHECK("cross_entropy_backward_f32_kernel");
      }
    });
  });
}

}  // namespace sru::cuda
