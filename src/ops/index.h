// Index ops: index_select (gather slices along one dim), index_copy_ (scatter slices into a tensor in
// place) and topk (the k largest entries of each row of the last dim). Used by beam search: index_select
// gathers the surviving hypotheses' rows of the decoder states, topk picks the best candidates (and, with
// k = C, sorts a row for top-p sampling); index_copy_ writes decoding steps into key/value cache rings.
//
// index_select(x, dim, index):
//   x viewed as (outer, n, inner) around dim (n = x.size(dim)), index (m) i64 or i32
//   -> out (outer, m, inner) with out[o, i, :] = x[o, index[i], :] (out's shape is x's with size(dim) =
//   m; m = 0 is allowed). Every index must lie in [0, n): the CPU kernel refuses a bad one at once; the
//   CUDA kernel writes zeros for it and records it in the device error log (core/cuda/runtime.h), which
//   throws the same message at the next host wait. An index tensor on the CPU with x on a GPU is checked
//   on the host, then copied. Values of any dtype; the backward pass needs a floating x.
//   Backward saves the index (and x's shape): dx = zeros, then index_add: dx[o, index[i], :] += g[o, i, :]
//   — repeated indices accumulate, in index order (deterministic on both devices, no atomics).
//
// index_copy_(dst, dim, index, src), in place, as torch.Tensor.index_copy_:
//   dst viewed as (outer, n, inner) around dim (n = dst.size(dim)), index (m) i64 or i32, src (outer, m,
//   inner) (src's shape is dst's with size(dim) = m; src of dst's dtype and device; m = 0 is allowed)
//   -> dst[o, index[i], :] = src[o, i, :] for every (o, i); the other slices of dst are left as they
//   were; returns dst. Indices as index_select's: each must lie in [0, n), the CPU kernel refuses a bad
//   one before writing anything, the CUDA kernel skips it and records it in the device error log (the
//   same message, op named index_copy_, at the next host wait); a CPU index with dst on a GPU is
//   checked on the host, then copied. Repeated indices: the last write wins — dst[o, k, :] is src[o, i,
//   :] for the largest i with index[i] = k — on both devices (the CUDA kernel first finds that i per
//   slice, so the result never depends on thread timing). src must not share dst's storage.
//   Not differentiable and records no history (it is for decoding caches): refused when dst requires
//   grad, and when src requires grad while grad mode is on (detach it, or use autograd::NoGradGuard).
//
// topk(x, k) over the last dim: x viewed as (rows, C), 1 <= k <= C
//   -> values (rows, k), indices (rows, k) i64 (leading dims kept: (..., k)), where row r's entries are
//   sorted by the order topk_ranks_before defines: larger first, equal values (-0 == +0) by smaller index
//   first, and NaN counts as larger than everything (as torch.topk does), NaNs among themselves by index.
//   The order is total, so the result is unique: CPU and CUDA return the same indices.
//   Backward saves the indices (and x's shape): dx = zeros, then dx[r, indices[r, j]] = g[r, j] (the
//   indices of a row are distinct). The indices output is not differentiable.
//
// Every backward kernel (index_add, topk_backward) accumulates into a gradient buffer the caller zeroed.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "core/hd.h"
#include "core/tensor.h"
#include "ops/kernels.h"

namespace sru {

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);

struct TopK {
  Tensor values, indices;
};
TopK topk(const Tensor& x, int64_t k);

// dst[o, index[i], :] = src[o, i, :] along dim (dst viewed as (outer, n, inner), src (outer, m, inner)); returns dst.
Tensor& index_copy_(Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src);

// The message for index `value` at `position` outside [0, size) of dim `dim`, the same from both kernels
// (the CUDA forward reports it at the next host wait: cuda::reserve_error_slot).
std::string index_select_index_error(int64_t value, int64_t position, int64_t dim, int64_t size);
// index_copy_'s, in the same words.
std::string index_copy_index_error(int64_t value, int64_t position, int64_t dim, int64_t size);
// Refuses the first index of a CPU index tensor (i64 or i32) outside [0, size) with error(value, position,
// dim, size), one of the two above: the CPU kernels' check, and the ops' check of a CPU index before it is
// copied to a GPU.
void check_host_index(const Tensor& index, int64_t dim, int64_t size,
                      std::string (*error)(int64_t, int64_t, int64_t, int64_t));

// topk's order, shared by the CPU and CUDA kernels: true when (a at column ia) comes before (b at column
// ib). NaN first, then larger values, ties (including -0 against +0, NaN against NaN) by smaller column.
template <typename T>
SRU_HD bool topk_ranks_before(T a, int64_t ia, T b, int64_t ib) {
  const bool a_nan = a != a, b_nan = b != b;
  if (a_nan != b_nan) return a_nan;
  if (!a_nan && a != b) return a > b;
  return ia < ib;
}

// An unsigned key per value for radix sorting in topk's order: a larger key ranks first, and two values
// tie in topk_ranks_before exactly when their keys are equal (every NaN gets the largest key, -0 gets
// +0's). The usual order-preserving map of IEEE bits: flip every bit of a negative value, set the sign
// bit of a non-negative one. Used by the CUDA kernel's per-row sort; tested on the CPU.
SRU_HD uint32_t topk_sort_key(float v) {
  if (v != v) return 0xFFFFFFFFu;
  uint32_t u;
#if defined(__CUDA_ARCH__)
  u = __float_as_uint(v);
#else
  std::memcpy(&u, &v, sizeof u);
#endif
  if ((u << 1) == 0) u = 0;  // -0 -> +0
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
SRU_HD uint64_t topk_sort_key(double v) {
  if (v != v) return 0xFFFFFFFFFFFFFFFFull;
  uint64_t u;
#if defined(__CUDA_ARCH__)
  u = static_cast<uint64_t>(__double_as_longlong(v));
#else
  std::memcpy(&u, &v, sizeof u);
#endif
  if ((u << 1) == 0) u = 0;  // -0 -> +0
  return (u & 0x8000000000000000ull) ? ~u : (u | 0x8000000000000000ull);
}

// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/index.cu) have the same contracts,
// tensors on one CUDA device; index_select_forward and index_copy_forward report a bad index through the
// device error log instead of throwing at once.
SRU_DECLARE_KERNELS(
// out = x gathered along dim by index (shapes above); refuses an index outside [0, x.size(dim)).
void index_select_forward(const Tensor& x, const Tensor& index, int64_t dim, const Tensor& out);
// grad_x[o, index[i], :] += grad[o, i, :] along dim, in index order; grad_x zeroed by the caller.
// Indices are taken as valid (the forward pass checked them).
void index_add(const Tensor& grad, const Tensor& index, int64_t dim, const Tensor& grad_x);
// dst[o, index[i], :] = src[o, i, :] along dim, the last i winning for a repeated index; refuses an
// index outside [0, dst.size(dim)) before writing anything.
void index_copy_forward(const Tensor& dst, const Tensor& index, int64_t dim, const Tensor& src);
// values, indices (rows, k) = the k first entries of each row of x (rows, C) in topk's order.
void topk_forward(const Tensor& x, int64_t k, const Tensor& values, const Tensor& indices);
// grad_x[r, indices[r, j]] += grad[r, j]; grad_x (..., C) zeroed by the caller.
void topk_backward(const Tensor& grad, const Tensor& indices, const Tensor& grad_x);
)

}  // namespace sru
