// CUDA kernels of the layout ops (see ops/shape_ops.h; CPU twins in ops/cpu/shape_ops.cpp).
// copy_pieces: every piece (outer, rows_i, inner) <-> its rows of whole (outer, total, inner) in one launch
// per 32 pieces (a pointer table as the kernel's argument, blockIdx.y the piece, one thread per word).
// copy_middle: src (outer, n_src, inner) <-> rows [at, at + rows) of dst (outer, n_dst, inner), one 2-D
// strided copy (cudaMemcpy2DAsync: `outer` blocks of rows*inner elements), or, when a pitch is over
// what cudaMemcpy2D takes (2^31 - 1 bytes), a copy kernel (one thread per 2-, 4- or 8-byte element). transpose_copy:
// dst[a, j, m, i, c] = src[a, i, m, j, c], moved as 2-, 4- or 8-byte words (bf16 and f16 need the 2-byte
// word: a 4-byte one would move twice their bytes): a warp per row of C words when C >= 8, else one
// thread per element.
#include <algorithm>
#include <atomic>

#include "ops/cuda/kernel_util.cuh"
#include "ops/shape_ops.h"

namespace sru::cuda {

namespace {
template <typename W>
__global__ void transpose_kernel(const W* src, W* dst, long long A, long long n0, long long M, long long n1, long long C) {
  const long long n = A * n0 * M * n1 * C;
  SRU_GRID_STRIDE(to, n) {  // to = (((a * n1 + j) * M + m) * n0 + i) * C + c
    long long r = to;
    const long long c = r % C; r /= C;
    const long long i = r % n0; r /= n0;
    const long long m = r % M; r /= M;
    const long long j = r % n1;
    const long long a = r / n1;
    dst[to] = src[(((a * n0 + i) * M + m) * n1 + j) * C + c];
  }
}
// The same transpose when the moved rows are long enough (C >= kRowTransposeMin words): a warp per
// destination row of C contiguous words (8 rows a block), the row's source found with four divisions
// per row instead of five per element, and both sides read and written in contiguous runs. The attention's
// head splits and merges (C = the head size) spent 3.9 ms of a 71.6 ms translation step in the element
// kernel at 370 GB/s on an H200 (2026-11-27): its 64-bit divisions, not the bytes, bound it.
constexpr long long kRowTransposeMin = 8;

template <typename W>
__global__ void transpose_rows_kernel(const W* src, W* dst, long long n0, long long M, long long n1, long long C,
                                      long long rows) {
  for (long long row = static_cast<long long>(blockIdx.x) * blockDim.y + threadIdx.y; row < rows;
       row += static_cast<long long>(gridDim.x) * blockDim.y) {  // row = ((a * n1 + j) * M + m) * n0 + i
    long long r = row;
    const long long i = r % n0; r /= n0;
    const long long m = r % M; r /= M;
    const long long j = r % n1;
    const long long a = r / n1;
    const W* from = src + (((a * n0 + i) * M + m) * n1 + j) * C;
    W* to = dst + row * C;
    for (long long c = threadIdx.x; c < C; c += blockDim.x) to[c] = from[c];
  }
}

// dst[o * dst_pitch + k] = src[o * src_pitch + k] for o < outer, k < width (in words W).
template <typename W>
__global__ void copy_rows_kernel(const W* src, long long src_pitch, W* dst, long long dst_pitch, long long outer,
                                 long long width) {
  SRU_GRID_STRIDE(e, outer * width) {
    const long long o = e / width, k = e % width;
    dst[o * dst_pitch + k] = src[o * src_pitch + k];
  }
}

// The largest pitch cudaMemcpy2D accepts on the device (2^31 - 1 bytes on current GPUs).
size_t max_pitch(int device) {
  static std::atomic<int> cached[64] = {};
  if (device < 0 || device >= 64) return 0;
  if (cached[device].load() == 0) {
    int v = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxPitch, device));
    cached[device].store(v);
  }
  return static_cast<size_t>(cached[device].load());
}

// Runs f with W = the unsigned integer type of one element (8, 4 or 2 bytes: f64/i64, f32/i32,
// bf16/f16), the word the copy kernels move.
template <typename F>
void with_element_word(size_t elem, F&& f) {
  switch (elem) {
    case 8: return f.template operator()<uint64_t>();
    case 4: return f.template operator()<uint32_t>();
    case 2: return f.template operator()<uint16_t>();
  }
  SRU_FAIL("layout copy: no kernel for ", elem, "-byte elements");
}

// Up to kPiecesPerLaunch pieces of one copy_pieces call, passed by value as the kernel's argument
// (32 x 24 bytes); blockIdx.y picks the piece.
constexpr int kPiecesPerLaunch = 32;
struct PieceTable {
  char* piece[kPiecesPerLaunch];          // null: zeros (into the whole) or skipped
  long long rows[kPiecesPerLaunch], at[kPiecesPerLaunch];
};

// Piece y's elements (outer, rows, inner) <-> rows [at, at + rows) of whole (outer, total, inner), words W.
template <typename W>
__global__ void copy_pieces_kernel(const __grid_constant__ PieceTable table, W* whole, long long outer,
                                   long long total, long long inner, bool into_whole) {
  const int y = blockIdx.y;
  W* piece = reinterpret_cast<W*>(table.piece[y]);
  if (!piece && !into_whole) return;
  const long long width = table.rows[y] * inner;
  SRU_GRID_STRIDE(e, outer * width) {
    const long long o = e / width, k = e % width;
    W& w = whole[(o * total + table.at[y]) * inner + k];
    if (into_whole) w = piece ? piece[e] : W(0);
    else piece[e] = w;
  }
}

}  // namespace

void copy_pieces(const Pieces& pieces, const Tensor& whole, int64_t outer, int64_t inner, bool into_whole) {
  long long total = 0, widest = 0;
  for (int64_t r : pieces.rows) total += r, widest = std::max<long long>(widest, r);
  if (outer == 0 || total * inner == 0) return;
  const cudaStream_t s = stream_of(whole);
  const size_t count = pieces.tensors.size();
  with_element_word(dtype_size(whole.dtype()), [&]<typename W>() {
    long long at = 0;
    for (size_t first = 0; first < count; first += kPiecesPerLaunch) {
      PieceTable table{};
      const size_t n = std::min<size_t>(kPiecesPerLaunch, count - first);
      for (size_t i = 0; i < n; ++i) {
        const Tensor& t = pieces.tensors[first + i];
        table.piece[i] = t.defined() ? static_cast<char*>(t.data_ptr()) : nullptr;
        table.rows[i] = pieces.rows[first + i];
        table.at[i] = at;
        at += table.rows[i];
      }
      const dim3 grid(grid_for(outer * widest * inner), static_cast<unsigned>(n));  // x: the widest piece's
      copy_pieces_kernel<<<grid, kBlock, 0, s>>>(table, static_cast<W*>(whole.data_ptr()), outer, total, inner,
                                                 into_whole);
      SRU_CUDA_LAUNCH_CHECK("copy_pieces_kernel");
    }
  });
}

void copy_middle(const Tensor& src, const Tensor& dst, int64_t outer, int64_t n_src, int64_t n_dst, int64_t inner,
                 int64_t at, bool into) {
  const size_t elem = dtype_size(src.dtype());
  const int64_t rows = into ? n_src : n_dst;
  if (outer == 0 || rows * inner == 0) return;
  const char* from = static_cast<const char*>(src.data_ptr()) + static_cast<size_t>((into ? 0 : at) * inner) * elem;
  char* to = static_cast<char*>(dst.data_ptr()) + static_cast<size_t>((into ? at : 0) * inner) * elem;
  const size_t dst_pitch = n_dst * inner * elem, src_pitch = n_src * inner * elem;
  const cudaStream_t s = stream_of(dst);
  if (std::max(dst_pitch, src_pitch) <= max_pitch(dst.device().index)) {
    CUDA_CHECK(cudaMemcpy2DAsync(to, dst_pitch, from, src_pitch, rows * inner * elem, outer, cudaMemcpyDeviceToDevice, s));
    return;
  }
  // Rows longer than a 2-D copy takes: a copy kernel with 64-bit indexing.
  const long long width = rows * inner, n = outer * width;
  with_element_word(elem, [&]<typename W>() {
    copy_rows_kernel<<<grid_for(n), kBlock, 0, s>>>(reinterpret_cast<const W*>(from), n_src * inner,
                                                    reinterpret_cast<W*>(to), n_dst * inner, outer, width);
  });
  SRU_CUDA_LAUNCH_CHECK("copy_rows_kernel");
}

void transpose_copy(const Tensor& src, const Tensor& dst, int64_t A, int64_t n0, int64_t M, int64_t n1, int64_t C) {
  const long long n = A * n0 * M * n1 * C;
  if (n == 0) return;
  const cudaStream_t s = stream_of(dst);
  if (C >= kRowTransposeMin) {
    const long long rows = A * n1 * M * n0;
    with_element_word(dtype_size(src.dtype()), [&]<typename W>() {
      transpose_rows_kernel<<<grid_for(rows, 8), dim3(32, 8), 0, s>>>(static_cast<const W*>(src.data_ptr()),
                                                                      static_cast<W*>(dst.data_ptr()), n0, M, n1, C, rows);
    });
    SRU_CUDA_LAUNCH_CHECK("transpose_rows_kernel");
    return;
  }
  with_element_word(dtype_size(src.dtype()), [&]<typename W>() {
    transpose_kernel<<<grid_for(n), kBlock, 0, s>>>(static_cast<const W*>(src.data_ptr()), static_cast<W*>(dst.data_ptr()),
                                                    A, n0, M, n1, C);
  });
  SRU_CUDA_LAUNCH_CHECK("transpose_kernel");
}

}  // namespace sru::cuda
