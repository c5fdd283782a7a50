// Shared pieces of the masked softmax kernels (ops/cpu/masked_softmax.cpp, ops/cuda/masked_softmax.cu):
// which keys a row leaves out — a mask tensor's elements, located under broadcasting, or a causal
// pattern computed from indices — and the per-element math of forward and backward, written once as
// SRU_HD functions so both backends compute exactly the same function.
#pragma once

#include <cmath>
#include <type_traits>

#include "core/hd.h"

namespace sru {

// The mask element of x's element (row n, column c), x viewed as rows (N, C), sits at
//   row_offset(n) + c * column_stride
// in the contiguous mask. The leading dims of x are kept (collapsed where the mask's layout allows)
// with the mask's stride along each: 0 where the mask is broadcast (its dim is 1 or missing).
struct MaskIndex {
  static constexpr int kMaxDims = 8;
  int rank = 0;
  long long size[kMaxDims] = {};
  long long stride[kMaxDims] = {};
  long long column_stride = 0;  // 1, or 0 when the mask's last dim is broadcast

  SRU_HD long long row_offset(long long n) const {
    long long offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
      offset += (n % size[d]) * stride[d];
      n /= size[d];
    }
    return offset;
  }
};

// The keys one row of scores leaves out, for a mask tensor: its elements at m[c * stride].
template <typename M>
struct TensorMaskRow {
  const M* m;
  long long stride;
  SRU_HD bool hidden(long long c) const { return m[c * stride] != M(0); }
};

// Rows of a mask tensor under broadcasting: row(n) for x's row n.
template <typename M>
struct TensorMaskRows {
  const M* mask;
  MaskIndex index;
  SRU_HD TensorMaskRow<M> row(long long n) const { return {mask + index.row_offset(n), index.column_stride}; }
};

// The keys one row of causal scores leaves out: those outside [first, last].
struct CausalRow {
  long long first, last;
  SRU_HD bool hidden(long long c) const { return c > last || c < first; }
};

// Causal attention computed from indices, with no mask tensor (causal_softmax, ops/masked_softmax.h).
// Scores (..., Lq, Lk) are rows; row n is query i = n % Lq, which sits at key position i + offset (the
// keys are [offset earlier positions, e.g. a memory | the queries' own positions]). It sees key j when
//   j <= i + offset  and, when window >= 0,  j >= i + offset - window
// (window = how many earlier positions a query sees besides itself; -1 = all of them).
struct CausalMask {
  long long query_length = 1;
  long long offset = 0;
  long long window = -1;
  SRU_HD CausalRow row(long long n) const {
    const long long at = n % query_length + offset;
    return {window < 0 ? 0 : at - window, at};
  }
};

// Causal attention over a batch with padded keys: the causal pattern computed from indices, and a mask
// tensor's elements (a (B, 1, 1, Lk) key-padding mask under broadcasting) hide keys together.
template <typename M>
struct CausalTensorMaskRow {
  CausalRow causal;
  TensorMaskRow<M> mask;
  SRU_HD bool hidden(long long c) const { return causal.hidden(c) || mask.hidden(c); }
};
template <typename M>
struct CausalTensorMaskRows {
  CausalMask causal;
  TensorMaskRows<M> mask;
  SRU_HD CausalTensorMaskRow<M> row(long long n) const { return {causal.row(n), mask.row(n)}; }
};

#ifndef __CUDACC__
// MaskIndex and CausalMask hold sizes and strides only: nothing for the dispatcher's device check to visit.
template <typename F>
void visit_tensors(const MaskIndex&, F&&) {}
template <typename F>
void visit_tensors(const CausalMask&, F&&) {}
#endif

// A row is reduced in two passes, max then sum of exp; masked elements take no part. A row whose
// max is -inf (every element masked) has logsumexp -inf and counts as fully masked.
// The per-element math, in the compute type A: double by default (the CPU kernel, and the CUDA block
// kernel, whose arguments convert), float in the CUDA warp kernel over float32 and bf16 rows (A given
// explicitly; std::type_identity_t keeps A from being deduced from the arguments).
template <typename A = double>
SRU_HD A masked_max_term(std::type_identity_t<A> x, bool masked) { return masked ? A(-INFINITY) : x; }
template <typename A = double>
SRU_HD A masked_exp_term(std::type_identity_t<A> x, std::type_identity_t<A> row_max, bool masked) {
  return masked ? A(0) : std::exp(x - row_max);
}

template <typename A = double>
SRU_HD A masked_softmax_value(std::type_identity_t<A> x, std::type_identity_t<A> lse, bool masked, bool log_out) {
  if (masked || lse == A(-INFINITY)) return log_out ? A(-INFINITY) : A(0);
  const A v = x - lse;
  return log_out ? v : std::exp(v);
}

template <typename A = double>
SRU_HD A masked_softmax_dot_term(std::type_identity_t<A> g, std::type_identity_t<A> y, bool masked, bool log_out) {
  return masked ? A(0) : (log_out ? g : g * y);
}
template <typename A = double>
SRU_HD A masked_softmax_grad(std::type_identity_t<A> g, std::type_identity_t<A> y, std::type_identity_t<A> dot,
                             bool masked, bool log_out) {
  if (masked) return A(0);
  return log_out ? g - std::exp(y) * dot : y * (g - dot);
}

}  // namespace sru
