// CUDA kernels of softmax, log_softmax and cross-entropy (CPU twins: ops/cpu/softmax.cpp). One block of
// kBlock threads per row of C classes (rows beyond the capped grid loop: SRU_ROW_STRIDE); max, sums and
// logsumexp in double with fixed-tree block reductions. Cross-entropy writes each row's logsumexp and
// loss on the device, then one block sums the losses and counted rows into the loss and its scale
// (fixed tree: the same every run), so no value comes back to the host; an out-of-range target is
// recorded in the device error log (reported at the next host wait, with the CPU's message). The
// per-element loss and gradient (label smoothing included) are the CPU's, from ops/softmax_math.h.
// f32, f64 and bf16 rows: bf16 outputs rounded once; the cross-entropy's logsumexps, loss and incoming
// gradient in float32 under bf16 logits (compute_t), as the CPU twin.

#include "ops/dispatch.h"
#include "ops/cuda/kernel_util.cuh"
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
__global__ void softmax_kernel(const T* x, long long N, long long C, bool log_out, T* y) {
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
__global__ void softmax_backward_kernel(const T* g, const T* y, long long N, long long C, bool log_in, T* gx) {
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
__global__ void cross_entropy_kernel(const T* logits, const I* target, long long N, long long C, long long ignore_index,
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
    if (bad) atomicMin(bad_row, static_cast<unsigned long long>(n));
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
__global__ void cross_entropy_backward_kernel(const T* logits, const I* target, const compute_t<T>* lse, long long N,
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

}  // namespace

void softmax_forward(const Tensor& x, bool log, const Tensor& y) {
  const int64_t C = x.size(-1), N = C == 0 ? 0 : x.numel() / C;
  if (N == 0) return;
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "softmax", [&]<typename T>() {
    softmax_kernel<<<rows_grid(N), kBlock, 0, stream_of(x)>>>(x.data<T>(), N, C, log, y.data<T>());
    SRU_CUDA_LAUNCH_CHECK("softmax_kernel");
  });
}

void softmax_backward(const Tensor& g, const Tensor& y, bool log, const Tensor& gx) {
  const int64_t C = y.size(-1), N = C == 0 ? 0 : y.numel() / C;
  if (N == 0) return;
  SRU_DISPATCH_FLOATING_BF16(y.dtype(), "softmax_backward", [&]<typename T>() {
    softmax_backward_kernel<<<rows_grid(N), kBlock, 0, stream_of(y)>>>(g.data<T>(), y.data<T>(), N, C, log, gx.data<T>());
    SRU_CUDA_LAUNCH_CHECK("softmax_backward_kernel");
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
        cross_entropy_kernel<<<rows_grid(N), kBlock, 0, s>>>(logits.data<T>(), t, N, C, ignore_index, label_smoothing,
                                                            lse.data<Acc>(), data_or_null<double>(share),
                                                            row_loss.data<double>(), row_counts.data<int32_t>(), bad);
        SRU_CUDA_LAUNCH_CHECK("cross_entropy_kernel");
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
    with_index_data(target, [&](const auto* t) {
      cross_entropy_backward_kernel<<<rows_grid(N), kBlock, 0, stream_of(logits)>>>(
          logits.data<T>(), t, lse.data<Acc>(), N, C, ignore_index, label_smoothing, data_or_null<double>(share),
          scale.data<double>(), grad.data<Acc>(), gx.data<T>());
      SRU_CUDA_LAUNCH_CHECK("cross_entropy_backward_kernel");
    });
  });
}

}  // namespace sru::cuda
