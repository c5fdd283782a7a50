// Shared pieces of the ops' CUDA kernels (launch sizes and grid-stride loops: core/cuda/context.h): the
// stream of a tensor's device, fixed-order block reductions (same tree every run: reproducible), the
// row-stride loop of the one-block-per-row kernels, and the int-size check for library calls.
#pragma once

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/runtime.h"
#include "core/tensor.h"

namespace sru::cuda {

inline cudaStream_t stream_of(const Tensor& t) { return context(t.device().index).stream; }

// Column-major float32 GEMMs in cuBLAS's argument order, C_i = alpha op(A_i) op(B_i) + beta C_i for
// `batch` matrices `stride*` elements apart, at the process's matmul precision (ops/matmul.h,
// cuda_float32_gemm): highest is cublasSgemmStridedBatched (cublasSgemm for one matrix given with
// strides 0), high cublasGemmStridedBatchedEx with CUBLAS_COMPUTE_32F_FAST_TF32, medium the same over
// copies of A and B rounded to bfloat16 (CUDA_R_16BF, CUBLAS_COMPUTE_32F); C and the sums stay FP32.
// round_operands false (a GEMM inside a time loop, whose weight would be rounded again every step and
// whose scratch would be allocated there): medium runs as high. Defined in matmul.cu.
void sgemm(cublasHandle_t handle, cublasOperation_t opa, cublasOperation_t opb, int m, int n, int k, float alpha,
           const float* a, int lda, long long stride_a, const float* b, int ldb, long long stride_b, float beta,
           float* c, int ldc, long long stride_c, int batch, bool round_operands = true);

// The data of an optional tensor argument, or null when it is undefined.
template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
inline void* data_ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

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

// Column sums out[j] = scale * sum over r of f(r, j), r < rows, j < cols, in double, in two passes:
// fixed chunks of rows summed by one thread per (chunk, column), then the chunk sums of each column
// added by 32 lanes and the lane sums in lane order (finish_column_sum_kernel). One thread per column alone would leave a GPU nearly idle for few columns (a bias
// gradient has a few hundred) and many rows; the chunking depends only on (rows, cols), so the
// result is the same on every run. f is a functor: double operator()(long long r, long long j).
template <typename F>
__global__ void chunked_column_sum_kernel(F f, long long rows, long long cols, long long chunk, long long chunks,
                                          double* partial) {
  SRU_GRID_STRIDE(e, chunks * cols) {
    const long long c = e / cols, j = e % cols;
    const long long end = (c + 1) * chunk < rows ? (c + 1) * chunk : rows;
    double acc = 0.0;
    for (long long r = c * chunk; r < end; ++r) acc += f(r, j);
    partial[e] = acc;
  }
}

// The finish: a block of 32 columns x 32 lanes per 32-column tile (grid-stride over tiles); lane y adds
// chunks y, y + 32, ... of its column, then lane 0 adds the 32 lane sums in lane order (fixed: the same
// result every run). One thread per column, looping over every chunk, left a few hundred columns (a bias
// gradient) on two or three SMs at 35 GB/s: 4.6 ms of a 71.6 ms translation step on an H200 (2026-11-27);
// 8 lanes still finished layer norm's 1,024 columns (dweight, dbias) of a few hundred chunks on 32 blocks
// of 256 threads at 273 GB/s, 15 us a launch, each lane's dependent adds in a row (2026-11-29 night).
constexpr int kFinishColumns = 32, kFinishLanes = 32;

// Where the finish writes column j: columns [0, split) to first[j], [split, cols) to second[j - split]
// (split = cols: one output), so that one launch finishes two vectors (layer norm's dweight and dbias);
// a null output is not written.
template <typename T>
struct ColumnOutputs {
  T* first;
  T* second = nullptr;
  long long split = 1LL << 62;
  __device__ T* at(long long j) const {
    if (j < split) return first ? first + j : nullptr;
    return second ? second + (j - split) : nullptr;
  }
};

// Launch bounds: its blocks are 1,024 threads, which launch only at <= 64 registers a thread (32 today);
// the bound makes ptxas hold to that rather than a launch failing on a card.
template <typename T>
__global__ void __launch_bounds__(kFinishColumns * kFinishLanes)
    finish_column_sum_kernel(const double* partial, long long chunks, long long cols, double scale,
                             ColumnOutputs<T> out) {
  __shared__ double lane_sums[kFinishLanes][kFinishColumns];
  for (long long tile = blockIdx.x; tile * kFinishColumns < cols; tile += gridDim.x) {
    const long long j = tile * kFinishColumns + threadIdx.x;
    double acc = 0.0;
    if (j < cols)
      for (long long c = threadIdx.y; c < chunks; c += kFinishLanes) acc += partial[c * cols + j];
    lane_sums[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    T* const place = j < cols ? out.at(j) : nullptr;
    if (threadIdx.y == 0 && place) {
      double total = lane_sums[0][threadIdx.x];
      for (int y = 1; y < kFinishLanes; ++y) total += lane_sums[y][threadIdx.x];
      *place = static_cast<T>(total * scale);
    }
    __syncthreads();  // lane_sums is reused by the next tile
  }
}

// out.at(j) = scale * the sum over c < chunks of partial[c * cols + j], for j < cols: the finish of
// column_sums and of the kernels that write their own partial rows (layer norm's fused backward).
template <typename T>
void finish_column_sums(const double* partial, long long chunks, long long cols, double scale, ColumnOutputs<T> out,
                        cudaStream_t stream) {
  const long long tiles = (cols + kFinishColumns - 1) / kFinishColumns;
  finish_column_sum_kernel<<<grid_for(tiles, 1), dim3(kFinishColumns, kFinishLanes), 0, stream>>>(partial, chunks,
                                                                                                 cols, scale, out);
  SRU_CUDA_LAUNCH_CHECK("finish_column_sum_kernel");
}

template <typename T, typename F>
void column_sums(const F& f, long long rows, long long cols, double scale, T* out, Device device) {
  if (cols == 0) return;
  constexpr long long kTargetThreads = 1 << 17, kMinChunk = 16;
  const long long wanted_chunks = kTargetThreads / cols > 1 ? kTargetThreads / cols : 1;
  long long chunk = (rows + wanted_chunks - 1) / wanted_chunks;
  chunk = chunk < kMinChunk ? kMinChunk : chunk;
  const long long chunks = rows == 0 ? 1 : (rows + chunk - 1) / chunk;
  const Tensor partial = Tensor::empty({static_cast<int64_t>(chunks * cols)}, DType::F64, device);
  const cudaStream_t stream = context(device.index).stream;
  chunked_column_sum_kernel<<<grid_for(chunks * cols), kBlock, 0, stream>>>(f, rows, cols, chunk, chunks,
                                                                          partial.data<double>());
  SRU_CUDA_LAUNCH_CHECK("chunked_column_sum_kernel");
  finish_column_sums(partial.data<double>(), chunks, cols, scale, ColumnOutputs<T>{out}, stream);
}

// A padding mask of any dtype as one int32 per element (1 where nonzero) on its device, so a recurrence
// kernel reads one type; undefined stays undefined.
template <typename M>
__global__ void nonzero_int32_kernel(const M* src, int32_t* dst, long long n) {
  SRU_GRID_STRIDE(i, n) dst[i] = src[i] != M(0);
}

inline Tensor padding_as_int32(const Tensor& mask_pad) {
  if (!mask_pad.defined()) return Tensor();
  Tensor pad = Tensor::empty(mask_pad.shape(), DType::I32, mask_pad.device());
  const long long n = pad.numel();
  if (n == 0) return pad;
  SRU_DISPATCH_ALL(mask_pad.dtype(), "mask_pad", [&]<typename M>() {
    nonzero_int32_kernel<<<grid_for(n), kBlock, 0, stream_of(pad)>>>(mask_pad.data<M>(), pad.data<int32_t>(), n);
    SRU_CUDA_LAUNCH_CHECK("nonzero_int32_kernel");
  });
  return pad;
}

// Row kernels run one block per row: for (n = block index; n < rows; n += blocks). Their grid is capped
// like grid_for's, so any number of rows fits one launch (a block then takes several rows).
#define SRU_ROW_STRIDE(n, rows) for (long long n = blockIdx.x; n < (rows); n += gridDim.x)
inline unsigned rows_grid(long long rows) { return grid_for(rows, 1); }

// v as an int for a library that takes int sizes (cuBLAS, cuDNN, cub): refuses values over INT_MAX,
// naming what they are, instead of letting them wrap.
inline int checked_int(long long v, const char* what, const char* op) {
  SRU_CHECK(v >= 0 && v <= 2147483647LL, op, ": ", what, " = ", v, " is over the 2^31 - 1 the library takes");
  return static_cast<int>(v);
}

}  // namespace sru::cuda
