// CUDA kernels of the embedding lookup (math in ops/embedding.h; CPU twins in ops/cpu/embedding.cpp).
// forward: out[i, :] = weight[idx[i], :], one thread per output element; an index outside [0, V) gives a
// zero row and goes into the device error log (first position; reported at the next host wait with the
// CPU's message, core/cuda/runtime.h), so the lookup needs no host wait.
// backward: grad_weight[idx[i], j] += grad[i, j] for rows other than padding_idx, without atomics: the
// (index, position) pairs are sorted by index with a stable radix sort (ops/cuda/index_sort.cuh; an index
// outside [0, V) is keyed V, sorts last and is skipped), so each index's positions form one run in
// position order; cub's run-length encoding and a scan give each run's key, length and start, all on the
// device (no host wait). A CUDA block of 32 columns x 8 lanes takes a (run, 32-column tile): lane y sums
// the run's positions y, y + 8, ... (each warp reading 32 consecutive columns of a gradient row, 128
// coalesced bytes in float32), then lane 0 adds the 8 lane sums in lane order: deterministic, and
// parallel within a long run (a char-LM's space is ~15% of the positions: the previous kernel, one
// thread per run and column, took 0.78 ms a step on an H200, 17 GB/s). Blocks stride over the runs
// (their number is read on the device), so the grid is fixed: at most ~8 Ki blocks.
// Floor: read the gradient once (n x D elements) and write the touched rows: 4 (n + runs) D bytes.
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "ops/cuda/index_sort.cuh"
#include "ops/cuda/kernel_util.cuh"
#include "ops/dispatch.h"
#include "ops/embedding.h"

namespace sru::cuda {

namespace {

template <typename T, typename I>
__global__ void embedding_forward_kernel(const T* w, long long V, long long D, const I* idx, long long n, T* out,
                                         unsigned long long* bad) {
  SRU_GRID_STRIDE(e, n * D) {
    const long long i = e / D, j = e % D;
    const long long row = static_cast<long long>(idx[i]);
    if (row < 0 || row >= V) {
      if (bad) atomicMin(bad, static_cast<unsigned long long>(i));
      out[e] = T(0);
    } else {
      out[e] = w[row * D + j];
    }
  }
}

constexpr int kTileColumns = 32, kLanes = 8;  // a backward block: 32 columns x 8 position lanes

// Block (tile x, run stride y): run r's positions summed per column, 8 lanes then lane order; the run's
// row of grad_weight gets the sum. run_keys / run_lengths / run_starts hold *run_count runs.
template <typename T>
__global__ void embedding_backward_runs_kernel(const T* g, const int32_t* positions, const int32_t* run_keys,
                                               const int32_t* run_lengths, const int32_t* run_starts,
                                               const int32_t* run_count, long long V, long long D,
                                               long long padding_idx, T* gw) {
  __shared__ T lane_sums[kLanes][kTileColumns];
  const long long j = static_cast<long long>(blockIdx.x) * kTileColumns + threadIdx.x;
  const int runs = *run_count;
  for (int r = blockIdx.y; r < runs; r += gridDim.y) {
    const int key = run_keys[r];
    if (key == padding_idx || key >= V) continue;  // the same for the whole block
    const int start = run_starts[r], length = run_lengths[r];
    T sum = T(0);
    if (j < D)
      for (int k = threadIdx.y; k < length; k += kLanes) sum += g[static_cast<long long>(positions[start + k]) * D + j];
    lane_sums[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && j < D) {
      T total = lane_sums[0][threadIdx.x];
      for (int y = 1; y < kLanes; ++y) total += lane_sums[y][threadIdx.x];
      gw[static_cast<long long>(key) * D + j] += total;
    }
    __syncthreads();  // lane_sums is reused by the next run
  }
}

}  // namespace

void embedding_forward(const Tensor& weight, const Tensor& indices, const Tensor& out) {
  const int64_t V = weight.size(0), D = weight.size(1), n = indices.numel();
  if (n * D == 0) return;
  // The indices are kept by the describer until the check, so that the message can name the value.
  unsigned long long* bad = reserve_error_slot(weight.device().index, [indices, V](int64_t i) {
    const int64_t k = indices.view({-1}).narrow0(i, 1).item<int64_t>();  // error path only
    return embedding_index_error(k, i, V);
  });
  SRU_DISPATCH_FLOATING(weight.dtype(), "embedding", [&]<typename T>() {
    with_index_data(indices, [&](const auto* idx) {
      embedding_forward_kernel<<<grid_for(n * D), kBlock, 0, stream_of(weight)>>>(weight.data<T>(), V, D, idx, n,
                                                                                   out.data<T>(), bad);
      SRU_CUDA_LAUNCH_CHECK("embedding_forward_kernel");
    });
  });
}

void embedding_backward(const Tensor& grad, const Tensor& indices, int64_t padding_idx, const Tensor& grad_weight) {
  const int64_t V = grad_weight.size(0), D = grad_weight.size(1), n = indices.numel();
  if (n * D == 0) return;
  checked_int(n, "positions", "embedding_backward");
  checked_int(V + 1, "rows + 1", "embedding_backward");
  const Device device = grad_weight.device();
  const cudaStream_t stream = stream_of(grad_weight);
  const IndexRuns sorted = sort_positions_by_index(indices, V, device);
  // The runs of equal keys: their keys, lengths (cub's run-length encoding) and starts (an exclusive scan
  // of the lengths; the lengths start zeroed, so that the scan reads no unwritten memory past the runs).
  const int items = static_cast<int>(n);
  Tensor run_keys = Tensor::empty({n}, DType::I32, device), run_lengths = Tensor::empty({n}, DType::I32, device);
  Tensor run_starts = Tensor::empty({n}, DType::I32, device), run_count = Tensor::empty({1}, DType::I32, device);
  // A memset of the stream, like the sort's and cub's work, not a counted tensor fill (the dispatch count
  // stays the CPU's, core/kernel_count.h).
  CUDA_CHECK(cudaMemsetAsync(run_lengths.data_ptr(), 0, static_cast<size_t>(n) * sizeof(int32_t), stream));
  size_t encode_bytes = 0, scan_bytes = 0;
  CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, encode_bytes, sorted.keys.data<int32_t>(), run_keys.data<int32_t>(),
                                                run_lengths.data<int32_t>(), run_count.data<int32_t>(), items, stream));
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, run_lengths.data<int32_t>(), run_starts.data<int32_t>(),
                                           items, stream));
  Tensor temp = Tensor::empty({static_cast<int64_t>(std::max(encode_bytes, scan_bytes) / 4 + 1)}, DType::F32, device);
  CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(temp.data_ptr(), encode_bytes, sorted.keys.data<int32_t>(),
                                                run_keys.data<int32_t>(), run_lengths.data<int32_t>(),
                                                run_count.data<int32_t>(), items, stream));
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data_ptr(), scan_bytes, run_lengths.data<int32_t>(),
                                           run_starts.data<int32_t>(), items, stream));
  const long long tiles = (D + kTileColumns - 1) / kTileColumns;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(std::max(1LL, std::min<long long>(n, 8192 / tiles))));
  SRU_DISPATCH_FLOATING(grad_weight.dtype(), "embedding_backward", [&]<typename T>() {
    embedding_backward_runs_kernel<T><<<grid, dim3(kTileColumns, kLanes), 0, stream>>>(
        grad.data<T>(), sorted.positions.data<int32_t>(), run_keys.data<int32_t>(), run_lengths.data<int32_t>(),
        run_starts.data<int32_t>(), run_count.data<int32_t>(), V, D, padding_idx, grad_weight.data<T>());
    SRU_CUDA_LAUNCH_CHECK("embedding_backward_runs_kernel");
  });
}

}  // namespace sru::cuda
