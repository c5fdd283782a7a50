// CUDA kernels of softmax, log_softmax and cross-entropy (CPU twins: ops/cpu/softmax.cpp). One block of
// kBlock threads per row of C classes; max, sums and logsumexp in double with fixed-tree block
// reductions. Cross-entropy writes each row's logsumexp and loss on the device; the host sums the row
// losses in row order (as the CPU does) after one copy, and reports an out-of-range target by row.
#include <vector>

#include "ops/dispatch.h"
#include "ops/cuda/kernel_util.cuh"
#include "ops/softmax.h"

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
__global__ void softmax_kernel(const T* x, long long C, bool log_out, T* y) {
  __shared__ double shared[kBlock];
  const T* row = x + blockIdx.x * C;
  T* out = y + blockIdx.x * C;
  const double lse = row_logsumexp(row, C, shared);
  for (long long c = threadIdx.x; c < C; c += kBlock) {
    const double v = static_cast<double>(row[c]) - lse;
    out[c] = static_cast<T>(log_out ? v : exp(v));
  }
}

template <typename T>
__global__ void softmax_backward_kernel(const T* g, const T* y, long long C, bool log_in, T* gx) {
  __shared__ double shared[kBlock];
  const T *gr = g + blockIdx.x * C, *yr = y + blockIdx.x * C;
  T* out = gx + blockIdx.x * C;
  double dot = 0.0;
  for (long long c = threadIdx.x; c < C; c += kBlock)
    dot += log_in ? static_cast<double>(gr[c]) : static_cast<double>(gr[c]) * yr[c];
  dot = block_sum(dot, shared);
  for (long long c = threadIdx.x; c < C; c += kBlock)
    out[c] = log_in ? static_cast<T>(gr[c] - exp(static_cast<double>(yr[c])) * dot) : static_cast<T>(yr[c] * (gr[c] - dot));
}

template <typename T, typename I>
__global__ void cross_entropy_kernel(const T* logits, const I* target, long long C, long long ignore_index, T* lse_out,
                                     double* row_loss, unsigned long long* bad_row) {
  __shared__ double shared[kBlock];
  const long long n = blockIdx.x;
  const double l = row_logsumexp(logits + n * C, C, shared);
  if (threadIdx.x != 0) return;
  lse_out[n] = static_cast<T>(l);
  const long long k = static_cast<long long>(target[n]);
  if (k == ignore_index) {
    row_loss[n] = 0.0;
  } else if (k < 0 || k >= C) {
    row_loss[n] = 0.0;
    atomicMin(bad_row, static_cast<unsigned long long>(n));
  } else {
    row_loss[n] = l - static_cast<double>(logits[n * C + k]);
  }
}

template <typename T, typename I>
__global__ void cross_entropy_backward_kernel(const T* logits, const I* target, const T* lse, long long C,
                                              long long ignore_index, double scale, T* gx) {
  const long long n = blockIdx.x;
  const long long k = static_cast<long long>(target[n]);
  const double l = lse[n];
  for (long long c = threadIdx.x; c < C; c += kBlock) {
    T v = T(0);
    if (k != ignore_index) {
      v = static_cast<T>(exp(static_cast<double>(logits[n * C + c]) - l) * scale);
      if (c == k) v -= static_cast<T>(scale);
    }
    gx[n * C + c] = v;
  }
}

unsigned rows_grid(int64_t N) {
  SRU_CHECK(N <= 2147483647LL, "softmax/cross_entropy: ", N, " rows are more than one launch can take");
  return static_cast<unsigned>(N);
}

}  // namespace

void softmax_forward(const Tensor& x, bool log, const Tensor& y) {
  const int64_t C = x.size(-1), N = C == 0 ? 0 : x.numel() / C;
  if (N == 0) return;
  SRU_DISPATCH_FLOATING(x.dtype(), "softmax", [&]<typename T>() {
    softmax_kernel<<<rows_grid(N), kBlock, 0, stream_of(x)>>>(x.data<T>(), C, log, y.data<T>());
    SRU_CUDA_LAUNCH_CHECK("softmax_kernel");
  });
}

void softmax_backward(const Tensor& g, const Tensor& y, bool log, const Tensor& gx) {
  const int64_t C = y.size(-1), N = C == 0 ? 0 : y.numel() / C;
  if (N == 0) return;
  SRU_DISPATCH_FLOATING(y.dtype(), "softmax_backward", [&]<typename T>() {
    softmax_backward_kernel<<<rows_grid(N), kBlock, 0, stream_of(y)>>>(g.data<T>(), y.data<T>(), C, log, gx.data<T>());
    SRU_CUDA_LAUNCH_CHECK("softmax_backward_kernel");
  });
}

std::pair<double, int64_t> cross_entropy_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                                 const Tensor& lse) {
  const int64_t N = logits.size(0), C = logits.size(1);
  if (N == 0) return {0.0, 0};
  Tensor row_loss = Tensor::empty({N}, DType::F64, logits.device());
  BadIndexFlag bad(logits);
  SRU_DISPATCH_FLOATING(logits.dtype(), "cross_entropy", [&]<typename T>() {
    with_index_data(target, [&](const auto* t) {
      cross_entropy_kernel<<<rows_grid(N), kBlock, 0, stream_of(logits)>>>(logits.data<T>(), t, C, ignore_index,
                                                                          lse.data<T>(), row_loss.data<double>(), bad.ptr());
      SRU_CUDA_LAUNCH_CHECK("cross_entropy_kernel");
    });
  });
  const int64_t bad_row = bad.first_bad();
  if (bad_row >= 0) {
    const int64_t k = target.narrow0(bad_row, 1).item<int64_t>();
    SRU_FAIL("cross_entropy: target ", k, " at row ", bad_row, " is outside [0, ", C, ") and is not the ignore index ",
             ignore_index);
  }
  const std::vector<double> losses = row_loss.to_vector<double>();
  const std::vector<int64_t> targets = target.to_vector<int64_t>();
  double total = 0.0;
  int64_t counted = 0;
  for (int64_t n = 0; n < N; ++n) {
    total += losses[n];
    counted += targets[n] != ignore_index;
  }
  return {total, counted};
}

void cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& lse, int64_t ignore_index,
                            double scale, const Tensor& gx) {
  const int64_t N = logits.size(0), C = logits.size(1);
  if (N == 0) return;
  SRU_DISPATCH_FLOATING(logits.dtype(), "cross_entropy_backward", [&]<typename T>() {
    with_index_data(target, [&](const auto* t) {
      cross_entropy_backward_kernel<<<rows_grid(N), kBlock, 0, stream_of(logits)>>>(
          logits.data<T>(), t, lse.data<T>(), C, ignore_index, scale, gx.data<T>());
      SRU_CUDA_LAUNCH_CHECK("cross_entropy_backward_kernel");
    });
  });
}

}  // namespace sru::cuda
