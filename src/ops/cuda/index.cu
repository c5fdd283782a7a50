// CUDA kernels of index_select / index_add and topk (math and shapes in ops/index.h; CPU twins in
// ops/cpu/index.cpp).
//
// index_select_forward: x (outer, n, inner) -> out (outer, m, inner), out[o, i, j] = x[o, index[i], j], one
//   thread per output element; consecutive threads copy consecutive elements of one inner block, so the
//   beam-search gather of batch rows is a coalesced block copy. An index outside [0, n) gives zeros and
//   goes into the device error log (first position; reported at the next host wait with the CPU's
//   message, core/cuda/runtime.h): no host wait here. An output with no elements still has its indices
//   checked (index_check_kernel), as on the CPU.
// index_add: grad_x[o, index[i], j] += grad[o, i, j] without atomics, as the embedding's backward: the
//   (index, position) pairs are sorted by index (ops/cuda/index_sort.cuh), so each index's positions
//   form one run in position order; the thread of (o, run start, j) adds the run's rows in that order,
//   as the CPU does (deterministic, and the same sums). Out-of-range indices (already in the error log)
//   are keyed n, sort last and are skipped.
// index_copy_forward: dst[o, index[i], j] = src[o, i, j], one thread per src element, after a pass over
//   the index (index_last_kernel) that finds for each slice k of dim the last position i with index[i]
//   = k (atomicMax: the maximum is the same whatever the order the threads run in), so that for a
//   repeated index only that position's thread writes: the last write wins, as on the CPU, and no two
//   threads write one element. That pass also records an index outside [0, n) in the device error log
//   (its slice is not written), also when src has no elements.
// topk_forward: x (rows, C) -> values, indices (rows, k), in the order of topk_ranks_before (shared with
//   the CPU kernel: NaN first, larger first, ties by smaller column; total, so the result is unique).
//   k <= kSelectMaxK (beam search): one block per row picks the k entries in k rounds; round j takes the
//     first-ranked entry among those ranked after round j-1's pick (a block-wide fixed-tree reduction in
//     that order), so nothing is marked or copied. Cost k passes over the row.
//   larger k (up to k = C, the full sort of top-p sampling): the rows are sorted whole with cub's
//     segmented radix sort, stable and ascending, of the complemented topk_sort_key (so larger keys come
//     first and equal keys keep column order, which is topk's tie rule), carrying the column; the first k
//     columns of each row are gathered. Rows go in chunks of up to 2^26 elements (bounded scratch, int
//     offsets for cub).
// topk_backward: grad_x[r, indices[r, j]] += grad[r, j], one thread per (r, j); a row's indices are
//   distinct, so no two threads write one element.
#include <algorithm>

#include <cub/device/device_segmented_radix_sort.cuh>

#include "ops/cuda/index_sort.cuh"
#include "ops/cuda/kernel_util.cuh"
#include "ops/dispatch.h"
#include "ops/index.h"

namespace sru::cuda {

namespace {

struct MiddleView {
  long long outer, n, inner;
};

MiddleView middle_view(const Tensor& t, int64_t dim) {
  const int d = static_cast<int>(dim);
  return {shape_prod(t.shape(), 0, d), t.size(d), shape_prod(t.shape(), d + 1, t.dim())};
}

// A device error slot for a bad position of `index` along dim (of size n), described as error(value, position,
// dim, n): index_select_index_error or index_copy_index_error. The describer keeps the index tensor until
// the check, so that the message can name the value.
unsigned long long* reserve_index_error_slot(Device device, const Tensor& index, int64_t dim, int64_t n,
                                             std::string (*error)(int64_t, int64_t, int64_t, int64_t)) {
  return reserve_error_slot(device.index, [index, dim, n, error](int64_t i) {
    const int64_t value = index.narrow0(i, 1).item<int64_t>();  // error path only
    return error(value, i, dim, n);
  });
}

// ---- index_select ----

template <typename T, typename I>
__global__ void index_select_kernel(const T* x, long long n, long long inner, const I* idx, long long m,
                                    long long total, T* out, unsigned long long* bad) {
  SRU_GRID_STRIDE(e, total) {
    const long long j = e % inner, b = e / inner;  // b = o * m + i
    const long long i = b % m, o = b / m;
    const long long row = static_cast<long long>(idx[i]);
    if (row < 0 || row >= n) {
      if (bad) atomicMin(bad, static_cast<unsigned long long>(i));
      out[e] = T(0);
    } else {
      out[e] = x[(o * n + row) * inner + j];
    }
  }
}

// The range check alone, for an output with no elements (outer or inner 0): the CPU still refuses a bad
// index there.
template <typename I>
__global__ void index_check_kernel(const I* idx, long long m, long long n, unsigned long long* bad) {
  SRU_GRID_STRIDE(i, m) {
    const long long row = static_cast<long long>(idx[i]);
    if ((row < 0 || row >= n) && bad) atomicMin(bad, static_cast<unsigned long long>(i));
  }
}

// One thread per (o, sorted slot s, column j) of grad (outer, m, inner); the threads at the start of a run
// of equal keys add the run.
template <typename T>
__global__ void index_add_kernel(const T* g, const int32_t* keys, const int32_t* positions, long long m, long long n,
                                 long long inner, long long total, T* gx) {
  SRU_GRID_STRIDE(e, total) {
    const long long j = e % inner, b = e / inner;
    const long long s = b % m, o = b / m;
    const int32_t key = keys[s];
    if ((s > 0 && keys[s - 1] == key) || key >= n) continue;
    T sum = T(0);
    for (long long t = s; t < m && keys[t] == key; ++t) sum += g[(o * m + positions[t]) * inner + j];
    gx[(o * n + key) * inner + j] += sum;
  }
}

// ---- index_copy_ ----

// last[k] = the largest position i with index[i] = k (last starts at -1 everywhere); a bad index goes to
// the error log. `last` may be null when only the check is wanted.
template <typename I>
__global__ void index_last_kernel(const I* idx, long long m, long long n, int32_t* last, unsigned long long* bad) {
  SRU_GRID_STRIDE(i, m) {
    const long long row = static_cast<long long>(idx[i]);
    if ((row < 0 || row >= n) && bad) atomicMin(bad, static_cast<unsigned long long>(i));
    else if (last) atomicMax(last + row, static_cast<int32_t>(i));
  }
}

template <typename T, typename I>
__global__ void index_copy_kernel(const T* src, long long n, long long inner, const I* idx, long long m,
                                  const int32_t* last, long long total, T* dst) {
  SRU_GRID_STRIDE(e, total) {
    const long long j = e % inner, b = e / inner;  // b = o * m + i
    const long long i = b % m, o = b / m;
    const long long row = static_cast<long long>(idx[i]);
    if (row < 0 || row >= n || last[row] != static_cast<int32_t>(i)) continue;  // bad (logged) or overridden
    dst[(o * n + row) * inner + j] = src[e];
  }
}

// ---- topk ----

constexpr long long kSelectMaxK = 32;
constexpr long long kSortChunkElements = 1LL << 26;

// Whether candidate (v, i) ranks before the current best (bv, bi); bi < 0 means no candidate yet.
template <typename T>
__device__ bool beats(T v, long long i, T bv, long long bi) {
  return i >= 0 && (bi < 0 || topk_ranks_before(v, static_cast<int64_t>(i), bv, static_cast<int64_t>(bi)));
}

// One block of kBlock threads per row, k rounds (see the file comment).
template <typename T>
__global__ void topk_select_kernel(const T* x, long long rows, long long C, long long k, T* values, int64_t* indices) {
  __shared__ T shared_v[kBlock];
  __shared__ long long shared_i[kBlock];
  SRU_ROW_STRIDE(r, rows) {
    const T* row = x + r * C;
    T last_v = T(0);
    long long last_i = -1;  // the previous round's pick (none before the first round)
    for (long long j = 0; j < k; ++j) {
      T best_v = T(0);
      long long best_i = -1;
      for (long long c = threadIdx.x; c < C; c += kBlock) {
        const T v = row[c];
        // Skip entries picked in earlier rounds: exactly those ranked up to and including last.
        if (last_i >= 0 && !topk_ranks_before(last_v, static_cast<int64_t>(last_i), v, static_cast<int64_t>(c)))
          continue;
        if (beats(v, c, best_v, best_i)) {
          best_v = v;
          best_i = c;
        }
      }
      shared_v[threadIdx.x] = best_v;
      shared_i[threadIdx.x] = best_i;
      __syncthreads();
      for (int s = kBlock / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s && beats(shared_v[threadIdx.x + s], shared_i[threadIdx.x + s], shared_v[threadIdx.x],
                                     shared_i[threadIdx.x])) {
          shared_v[threadIdx.x] = shared_v[threadIdx.x + s];
          shared_i[threadIdx.x] = shared_i[threadIdx.x + s];
        }
        __syncthreads();
      }
      last_v = shared_v[0];
      last_i = shared_i[0];
      if (threadIdx.x == 0) {
        values[r * k + j] = last_v;
        indices[r * k + j] = static_cast<int64_t>(last_i);
      }
      __syncthreads();  // every thread has read shared[0] before the next round overwrites it
    }
  }
}

// Sort input of one chunk of rows: the complemented key (an ascending sort then puts topk's first entry
// first) and the column.
template <typename T, typename K>
__global__ void topk_sort_input_kernel(const T* x, long long count, long long C, K* keys, int32_t* columns) {
  SRU_GRID_STRIDE(e, count) {
    keys[e] = static_cast<K>(~topk_sort_key(x[e]));
    columns[e] = static_cast<int32_t>(e % C);
  }
}

__global__ void segment_offsets_kernel(long long segments, long long C, int32_t* offsets) {
  SRU_GRID_STRIDE(i, segments + 1) offsets[i] = static_cast<int32_t>(i * C);
}

// values / indices (rows, k) from the first k sorted columns of each row.
template <typename T>
__global__ void topk_gather_kernel(const T* x, const int32_t* sorted_columns, long long rows, long long C, long long k,
                                   T* values, int64_t* indices) {
  SRU_GRID_STRIDE(e, rows * k) {
    const long long r = e / k, j = e % k;
    const long long c = sorted_columns[r * C + j];
    indices[e] = static_cast<int64_t>(c);
    values[e] = x[r * C + c];
  }
}

template <typename T>
__global__ void topk_backward_kernel(const T* g, const int64_t* indices, long long rows, long long C, long long k,
                                     T* gx) {
  SRU_GRID_STRIDE(e, rows * k) gx[(e / k) * C + indices[e]] += g[e];
}

}  // namespace

void index_select_forward(const Tensor& x, const Tensor& index, int64_t dim, const Tensor& out) {
  const MiddleView v = middle_view(x, dim);
  const long long m = index.numel(), total = out.numel();
  if (m == 0) return;
  unsigned long long* bad = reserve_index_error_slot(x.device(), index, dim, v.n, index_select_index_error);
  if (total == 0) {
    with_index_data(index, [&](const auto* idx) {
      index_check_kernel<<<grid_for(m), kBlock, 0, stream_of(x)>>>(idx, m, v.n, bad);
      SRU_CUDA_LAUNCH_CHECK("index_check_kernel");
    });
    return;
  }
  SRU_DISPATCH_ALL(x.dtype(), "index_select", [&]<typename T>() {
    with_index_data(index, [&](const auto* idx) {
      index_select_kernel<<<grid_for(total), kBlock, 0, stream_of(x)>>>(x.data<T>(), v.n, v.inner, idx, m, total,
                                                                          out.data<T>(), bad);
      SRU_CUDA_LAUNCH_CHECK("index_select_kernel");
    });
  });
}

void index_add(const Tensor& grad, const Tensor& index, int64_t dim, const Tensor& grad_x) {
  const MiddleView v = middle_view(grad_x, dim);
  const long long m = index.numel(), total = grad.numel();
  if (total == 0) return;
  checked_int(m, "index length", "index_select_backward");
  checked_int(v.n + 1, "size of dim + 1", "index_select_backward");
  const IndexRuns runs = sort_positions_by_index(index, v.n, grad_x.device());
  SRU_DISPATCH_FLOATING(grad_x.dtype(), "index_select_backward", [&]<typename T>() {
    index_add_kernel<<<grid_for(total), kBlock, 0, stream_of(grad_x)>>>(
        grad.data<T>(), runs.keys.data<int32_t>(), runs.positions.data<int32_t>(), m, v.n, v.inner, total,
        grad_x.data<T>());
    SRU_CUDA_LAUNCH_CHECK("index_add_kernel");
  });
}

void index_copy_forward(const Tensor& dst, const Tensor& index, int64_t dim, const Tensor& src) {
  const MiddleView v = middle_view(dst, dim);
  const long long m = index.numel(), total = src.numel();
  if (m == 0) return;
  checked_int(m, "index length", "index_copy_");
  const cudaStream_t s = stream_of(dst);
  unsigned long long* bad = reserve_index_error_slot(dst.device(), index, dim, v.n, index_copy_index_error);
  Tensor last;
  if (total > 0) {
    last = Tensor::empty({v.n}, DType::I32, dst.device());
    CUDA_CHECK(cudaMemsetAsync(last.data_ptr(), 0xFF, static_cast<size_t>(v.n) * sizeof(int32_t), s));  // all -1
  }
  with_index_data(index, [&](const auto* idx) {
    index_last_kernel<<<grid_for(m), kBlock, 0, s>>>(idx, m, v.n, data_or_null<int32_t>(last), bad);
    SRU_CUDA_LAUNCH_CHECK("index_last_kernel");
  });
  if (total == 0) return;
  SRU_DISPATCH_ALL(dst.dtype(), "index_copy_", [&]<typename T>() {
    with_index_data(index, [&](const auto* idx) {
      index_copy_kernel<<<grid_for(total), kBlock, 0, s>>>(src.data<T>(), v.n, v.inner, idx, m,
                                                           last.data<int32_t>(), total, dst.data<T>());
      SRU_CUDA_LAUNCH_CHECK("index_copy_kernel");
    });
  });
}

void topk_forward(const Tensor& x, int64_t k, const Tensor& values, const Tensor& indices) {
  const long long C = x.size(-1);
  if (C == 0 || x.numel() == 0) return;
  const long long rows = x.numel() / C;
  const cudaStream_t s = stream_of(x);
  const Device device = x.device();
  SRU_DISPATCH_FLOATING(x.dtype(), "topk", [&]<typename T>() {
    if (k <= kSelectMaxK) {
      topk_select_kernel<<<rows_grid(rows), kBlock, 0, s>>>(x.data<T>(), rows, C, k, values.data<T>(),
                                                            indices.data<int64_t>());
      SRU_CUDA_LAUNCH_CHECK("topk_select_kernel");
      return;
    }
    using K = decltype(topk_sort_key(T{}));
    const DType key_dtype = sizeof(K) == 4 ? DType::I32 : DType::I64;  // raw bits; only the size matters
    checked_int(C, "row length", "topk");
    const long long chunk_rows = std::max(1LL, kSortChunkElements / C);
    const long long cap = std::min(chunk_rows, rows) * C;
    Tensor keys_in = Tensor::empty({cap}, key_dtype, device), keys_out = Tensor::empty({cap}, key_dtype, device);
    Tensor columns_in = Tensor::empty({cap}, DType::I32, device), columns = Tensor::empty({cap}, DType::I32, device);
    Tensor offsets = Tensor::empty({std::min(chunk_rows, rows) + 1}, DType::I32, device);
    K* kin = static_cast<K*>(keys_in.data_ptr());
    K* kout = static_cast<K*>(keys_out.data_ptr());
    for (long long r0 = 0; r0 < rows; r0 += chunk_rows) {
      const long long nr = std::min(chunk_rows, rows - r0), count = nr * C;
      const T* xs = x.data<T>() + r0 * C;
      topk_sort_input_kernel<<<grid_for(count), kBlock, 0, s>>>(xs, count, C, kin, columns_in.data<int32_t>());
      SRU_CUDA_LAUNCH_CHECK("topk_sort_input_kernel");
      segment_offsets_kernel<<<grid_for(nr + 1), kBlock, 0, s>>>(nr, C, offsets.data<int32_t>());
      SRU_CUDA_LAUNCH_CHECK("segment_offsets_kernel");
      const int items = checked_int(count, "chunk elements", "topk"), segments = checked_int(nr, "chunk rows", "topk");
      const int32_t* off = offsets.data<int32_t>();
      size_t temp_bytes = 0;
      CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(nullptr, temp_bytes, kin, kout, columns_in.data<int32_t>(),
                                                          columns.data<int32_t>(), items, segments, off, off + 1, 0,
                                                          static_cast<int>(sizeof(K) * 8), s));
      Tensor temp = Tensor::empty({static_cast<int64_t>(temp_bytes / 4 + 1)}, DType::F32, device);
      CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(temp.data_ptr(), temp_bytes, kin, kout,
                                                          columns_in.data<int32_t>(), columns.data<int32_t>(), items,
                                                          segments, off, off + 1, 0, static_cast<int>(sizeof(K) * 8),
                                                          s));
      topk_gather_kernel<<<grid_for(nr * k), kBlock, 0, s>>>(xs, columns.data<int32_t>(), nr, C, k,
                                                              values.data<T>() + r0 * k,
                                                              indices.data<int64_t>() + r0 * k);
      SRU_CUDA_LAUNCH_CHECK("topk_gather_kernel");
    }
  });
}

void topk_backward(const Tensor& grad, const Tensor& indices, const Tensor& grad_x) {
  const long long C = grad_x.size(-1), k = grad.size(-1);
  if (grad.numel() == 0 || k == 0) return;
  const long long rows = grad.numel() / k;
  SRU_DISPATCH_FLOATING(grad_x.dtype(), "topk_backward", [&]<typename T>() {
    topk_backward_kernel<<<grid_for(rows * k), kBlock, 0, stream_of(grad_x)>>>(
        grad.data<T>(), indices.data<int64_t>(), rows, C, k, grad_x.data<T>());
    SRU_CUDA_LAUNCH_CHECK("topk_backward_kernel");
  });
}

}  // namespace sru::cuda
