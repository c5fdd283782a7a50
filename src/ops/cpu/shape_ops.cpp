// CPU kernels of the layout ops: strided block copies (see ops/shape_ops.h for the views).
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "ops/shape_ops.h"

namespace sru::cpu {

void copy_middle(const Tensor& src, const Tensor& dst, int64_t outer, int64_t n_src, int64_t n_dst, int64_t inner,
                 int64_t at, bool into) {
  const size_t elem = dtype_size(src.dtype());
  const char* s = static_cast<const char*>(src.data_ptr());
  char* d = static_cast<char*>(dst.data_ptr());
  // Each outer index moves one contiguous block of `rows * inner` elements.
  const int64_t rows = into ? n_src : n_dst;
  const size_t block = static_cast<size_t>(rows * inner) * elem;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(rows * inner, 1));
  parallel_for(0, outer, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t o = lo; o < hi; ++o) {
      const char* from = s + static_cast<size_t>((o * n_src + (into ? 0 : at)) * inner) * elem;
      char* to = d + static_cast<size_t>((o * n_dst + (into ? at : 0)) * inner) * elem;
      std::memcpy(to, from, block);
    }
  });
}

void copy_pieces(const Pieces& pieces, const Tensor& whole, int64_t outer, int64_t inner, bool into_whole) {
  const size_t elem = dtype_size(whole.dtype());
  int64_t total = 0;
  std::vector<int64_t> at;
  for (int64_t r : pieces.rows) at.push_back(total), total += r;
  char* w = static_cast<char*>(whole.data_ptr());
  const int64_t count = static_cast<int64_t>(pieces.tensors.size());
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(total * inner, 1));
  parallel_for(0, outer, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t o = lo; o < hi; ++o)
      for (int64_t i = 0; i < count; ++i) {
        const Tensor& piece = pieces.tensors[i];
        const size_t block = static_cast<size_t>(pieces.rows[i] * inner) * elem;
        char* in_whole = w + static_cast<size_t>((o * total + at[i]) * inner) * elem;
        if (!piece.defined()) {
          if (into_whole) std::memset(in_whole, 0, block);
          continue;
        }
        char* p = static_cast<char*>(piece.data_ptr()) + static_cast<size_t>(o) * block;
        if (into_whole) std::memcpy(in_whole, p, block);
        else std::memcpy(p, in_whole, block);
      }
  });
}

void transpose_copy(const Tensor& src, const Tensor& dst, int64_t A, int64_t n0, int64_t M, int64_t n1, int64_t C) {
  const size_t elem = dtype_size(src.dtype());
  const char* s = static_cast<const char*>(src.data_ptr());
  char* d = static_cast<char*>(dst.data_ptr());
  // dst[a, j, m, i, c] = src[a, i, m, j, c]; the innermost C elements are contiguous in both.
  const int64_t tasks = A * n1;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(M * n0 * C, 1));
  parallel_for(0, tasks, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t a = t / n1, j = t % n1;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t i = 0; i < n0; ++i) {
          const int64_t from = (((a * n0 + i) * M + m) * n1 + j) * C;
          const int64_t to = (((a * n1 + j) * M + m) * n0 + i) * C;
          std::memcpy(d + to * elem, s + from * elem, C * elem);
        }
    }
  });
}

}  // namespace sru::cpu
