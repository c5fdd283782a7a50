// The index sort of the deterministic scatter-adds without atomics (the embedding's backward in
// ops/cuda/embedding.cu, index_select's index_add in ops/cuda/index.cu): the (index, position) pairs of an
// index tensor sorted by index with cub's stable radix sort, so each index's positions form one run in
// position order: index_add's kernel thread at the start of a run adds the run's rows in that order, as
// the CPU does (deterministic, and the same sums); the embedding's backward splits long runs over 8
// lanes, added in lane order (deterministic; its sums differ from the CPU's by rounding). An index outside [0, n) is keyed n: the forward pass recorded it
// in the device error log, which reports it at the next host wait — possibly after this backward pass has
// run; keyed n, it sorts after every valid index and the adding kernels skip it, never writing through it.
#pragma once

#include <cub/device/device_radix_sort.cuh>

#include "ops/cuda/kernel_util.cuh"
#include "ops/dispatch.h"

namespace sru::cuda {

// Sort input: key = the index, or n for one outside [0, n); value = the position.
template <typename I>
__global__ void index_sort_input_kernel(const I* idx, long long m, long long n, int32_t* keys, int32_t* positions) {
  SRU_GRID_STRIDE(i, m) {
    const long long k = static_cast<long long>(idx[i]);
    keys[i] = k >= 0 && k < n ? static_cast<int32_t>(k) : static_cast<int32_t>(n);
    positions[i] = static_cast<int32_t>(i);
  }
}

// keys (m) i32: the indices sorted ascending (n for a bad one); positions (m) i32: the position in the index
// tensor of each key, ascending within a run of equal keys.
struct IndexRuns {
  Tensor keys, positions;
};

// index (m) i64 or i32 on `device`, with m and n + 1 at most INT_MAX (the callers check both with checked_int,
// naming their op); queued on the device's stream, no host wait.
inline IndexRuns sort_positions_by_index(const Tensor& index, long long n, Device device) {
  const long long m = index.numel();
  const int items = static_cast<int>(m);
  const cudaStream_t s = context(device.index).stream;
  Tensor keys_in = Tensor::empty({m}, DType::I32, device), positions_in = Tensor::empty({m}, DType::I32, device);
  IndexRuns runs{Tensor::empty({m}, DType::I32, device), Tensor::empty({m}, DType::I32, device)};
  with_index_data(index, [&](const auto* idx) {
    index_sort_input_kernel<<<grid_for(m), kBlock, 0, s>>>(idx, m, n, keys_in.data<int32_t>(),
                                                            positions_in.data<int32_t>());
    SRU_CUDA_LAUNCH_CHECK("index_sort_input_kernel");
  });
  // Sort only the key bits that keys up to n (the out-of-range key) need.
  int end_bit = 1;
  while (end_bit < 31 && (int64_t{1} << end_bit) <= n) ++end_bit;
  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in.data<int32_t>(), runs.keys.data<int32_t>(),
                                             positions_in.data<int32_t>(), runs.positions.data<int32_t>(), items, 0,
                                             end_bit, s));
  Tensor temp = Tensor::empty({static_cast<int64_t>(temp_bytes / 4 + 1)}, DType::F32, device);
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data_ptr(), temp_bytes, keys_in.data<int32_t>(),
                                             runs.keys.data<int32_t>(), positions_in.data<int32_t>(),
                                             runs.positions.data<int32_t>(), items, 0, end_bit, s));
  return runs;
}

}  // namespace sru::cuda
