// Shared pieces of the ops' CUDA kernels: the stream and launch size for a tensor's device, grid-stride
// loops, and fixed-order block reductions (same tree every run, so results are reproducible).
#pragma once

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/tensor.h"

namespace sru::cuda {

constexpr int kBlock = 256;  // threads per block of the element-wise and row kernels

inline cudaStream_t stream_of(const Tensor& t) { return context(t.device().index).stream; }

// for (i = global thread index; i < n; i += total threads)
#define SRU_GRID_STRIDE(i, n) \
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

// Sum / max of one value per thread over a block of kBlock threads; every thread gets the result.
// `shared` holds kBlock values. The tree is fixed, so the result is the same on every run.
template <typename T>
__device__ T block_sum(T v, T* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kBlock / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const T total = shared[0];
  __syncthreads();
  return total;
}

template <typename T>
__device__ T block_max(T v, T* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kBlock / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] = max(shared[threadIdx.x], shared[threadIdx.x + s]);
    __syncthreads();
  }
  const T total = shared[0];
  __syncthreads();
  return total;
}

// A device flag for input checks inside kernels (an index out of range): kernels store the first
// offending position with atomicMin; first_bad() copies it back (-1 when none).
class BadIndexFlag {
 public:
  explicit BadIndexFlag(const Tensor& like)
      : flag_(Tensor::full({1}, static_cast<double>(kNone), DType::I64, like.device())) {}
  unsigned long long* ptr() const { return reinterpret_cast<unsigned long long*>(flag_.data<int64_t>()); }
  int64_t first_bad() const {
    const int64_t v = flag_.item<int64_t>();
    return v == kNone ? -1 : v;
  }
  static constexpr int64_t kNone = int64_t{1} << 62;  // exact in double (Tensor::full takes a double)

 private:
  Tensor flag_;
};

}  // namespace sru::cuda
