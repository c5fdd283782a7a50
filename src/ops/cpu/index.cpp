// CPU kernels of index_select / index_add and topk (math and shapes in ops/index.h).
//
// index_select_forward: x viewed as (outer, n, inner), out as (outer, m, inner); each (o, i) of the output
//   is one contiguous block of `inner` elements copied from x's block (o, index[i]) with memcpy, so the
//   beam-search gather of batch rows (dim 1 of (layers, B, d), dim 0 of (B, d)) is a few block copies.
//   Indices are checked on the host before anything is written.
// index_add: grad_x[o, index[i], j] += grad[o, i, j]. Threads own disjoint ranges of the (o, j) pairs of
//   grad_x, and each adds the grad rows in index order, so repeated indices accumulate without races and
//   the sums are the same for every thread count.
// index_copy_forward: dst[o, index[i], :] = src[o, i, :]; indices checked before anything is written,
//   then one memcpy of `inner` elements per (o, i), threads owning ranges of the (o, i) blocks. For a
//   repeated index only its last position is copied (the positions that a later one overrides are
//   found first, by a stable sort of the positions by index), so no two threads write one block and the
//   last write wins whatever the thread count.
// topk_forward: per row of x (rows, C), the columns ordered by topk_ranks_before (a total order, so the
//   result is unique): nth_element then a sort of the first k (O(C + k log k)), a full sort when k = C.
//   Threads own rows.
// topk_backward: grad_x[r, indices[r, j]] += grad[r, j]; a row's indices are distinct, threads own rows.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/parallel.h"
#include "ops/dispatch.h"
#include "ops/index.h"

namespace sru::cpu {

namespace {

struct MiddleView {
  int64_t outer, n, inner;
};

// t viewed as (outer, n, inner) around dim.
MiddleView middle_view(const Tensor& t, int64_t dim) {
  const int d = static_cast<int>(dim);
  return {shape_prod(t.shape(), 0, d), t.size(d), shape_prod(t.shape(), d + 1, t.dim())};
}

// fn(b) for every block b in [0, blocks) of `inner` elements, threads owning ranges of blocks (chunks of
// about kParallelGrain elements).
template <typename F>
void parallel_for_blocks(int64_t blocks, int64_t inner, const F& fn) {
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1));
  parallel_for(0, blocks, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) fn(b);
  });
}

}  // namespace

void index_select_forward(const Tensor& x, const Tensor& index, int64_t dim, const Tensor& out) {
  const MiddleView v = middle_view(x, dim);
  const int64_t m = index.numel();
  check_host_index(index, dim, v.n, index_select_index_error);
  if (out.numel() == 0) return;
  with_index_data(index, [&](const auto* idx) {
    SRU_DISPATCH_ALL(x.dtype(), "index_select", [&]<typename T>() {
      const T* src = x.data<T>();
      T* dst = out.data<T>();
      parallel_for_blocks(v.outer * m, v.inner, [&](int64_t b) {
        const int64_t o = b / m, row = static_cast<int64_t>(idx[b % m]);
        std::memcpy(dst + b * v.inner, src + (o * v.n + row) * v.inner, v.inner * sizeof(T));
      });
    });
  });
}

void index_add(const Tensor& grad, const Tensor& index, int64_t dim, const Tensor& grad_x) {
  const MiddleView v = middle_view(grad_x, dim);
  const int64_t m = index.numel();
  if (m == 0 || v.outer * v.inner == 0) return;
  SRU_DISPATCH_FLOATING(grad_x.dtype(), "index_select_backward", [&]<typename T>() {
    with_index_data(index, [&](const auto* idx) {
      const T* g = grad.data<T>();
      T* gx = grad_x.data<T>();
      // Work per owned (o, j) pair is m additions; chunks of at least 8 pairs keep the inner loop useful.
      const int64_t grain = std::max<int64_t>(8, kParallelGrain / m);
      parallel_for(0, v.outer * v.inner, grain, [&](int64_t lo, int64_t hi) {
        for (int64_t o = lo / v.inner; o * v.inner < hi; ++o) {
          const int64_t j_lo = std::max(lo, o * v.inner) - o * v.inner;
          const int64_t j_hi = std::min(hi, (o + 1) * v.inner) - o * v.inner;
          for (int64_t i = 0; i < m; ++i) {
            T* dst = gx + (o * v.n + static_cast<int64_t>(idx[i])) * v.inner;
            const T* src = g + (o * m + i) * v.inner;
            for (int64_t j = j_lo; j < j_hi; ++j) dst[j] += src[j];
          }
        }
      });
    });
  });
}

void index_copy_forward(const Tensor& dst, const Tensor& index, int64_t dim, const Tensor& src) {
  const MiddleView v = middle_view(dst, dim);
  const int64_t m = index.numel();
  check_host_index(index, dim, v.n, index_copy_index_error);
  if (src.numel() == 0) return;
  with_index_data(index, [&](const auto* idx) {
    // skip[i]: a later position writes the same slice (the positions of one index form a run of the
    // stable sort; all but the run's last are skipped).
    std::vector<char> skip(static_cast<size_t>(m), 0);
    if (m > 1) {
      std::vector<int64_t> order(static_cast<size_t>(m));
      std::iota(order.begin(), order.end(), int64_t{0});
      std::stable_sort(order.begin(), order.end(), [idx](int64_t a, int64_t b) { return idx[a] < idx[b]; });
      for (int64_t s = 0; s + 1 < m; ++s)
        if (idx[order[s]] == idx[order[s + 1]]) skip[order[s]] = 1;
    }
    SRU_DISPATCH_ALL(dst.dtype(), "index_copy_", [&]<typename T>() {
      const T* from = src.data<T>();
      T* to = dst.data<T>();
      parallel_for_blocks(v.outer * m, v.inner, [&](int64_t b) {
        const int64_t o = b / m, i = b % m;
        if (skip[i]) return;
        std::memcpy(to + (o * v.n + static_cast<int64_t>(idx[i])) * v.inner, from + b * v.inner, v.inner * sizeof(T));
      });
    });
  });
}

void topk_forward(const Tensor& x, int64_t k, const Tensor& values, const Tensor& indices) {
  const int64_t C = x.size(-1);
  if (C == 0 || x.numel() == 0) return;
  const int64_t rows = x.numel() / C;
  SRU_DISPATCH_FLOATING(x.dtype(), "topk", [&]<typename T>() {
    const T* xs = x.data<T>();
    T* vals = values.data<T>();
    int64_t* inds = indices.data<int64_t>();
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / C);
    parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
      std::vector<int64_t> order(static_cast<size_t>(C));
      for (int64_t r = lo; r < hi; ++r) {
        const T* row = xs + r * C;
        std::iota(order.begin(), order.end(), int64_t{0});
        const auto before = [row](int64_t a, int64_t b) { return topk_ranks_before(row[a], a, row[b], b); };
        if (k < C) {
          // After nth_element the first k - 1 columns all rank before column k - 1's: the top k, unordered.
          std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), before);
          std::sort(order.begin(), order.begin() + k, before);
        } else {
          std::sort(order.begin(), order.end(), before);
        }
        for (int64_t j = 0; j < k; ++j) {
          inds[r * k + j] = order[j];
          vals[r * k + j] = row[order[j]];
        }
      }
    });
  });
}

void topk_backward(const Tensor& grad, const Tensor& indices, const Tensor& grad_x) {
  const int64_t C = grad_x.size(-1), k = grad.size(-1);
  if (grad.numel() == 0 || k == 0) return;
  const int64_t rows = grad.numel() / k;
  SRU_DISPATCH_FLOATING(grad_x.dtype(), "topk_backward", [&]<typename T>() {
    const T* g = grad.data<T>();
    const int64_t* inds = indices.data<int64_t>();
    T* gx = grad_x.data<T>();
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / k);
    parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r)
        for (int64_t j = 0; j < k; ++j) gx[r * C + inds[r * k + j]] += g[r * k + j];
    });
  });
}

}  // namespace sru::cpu
