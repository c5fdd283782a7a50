// Shared pieces of the masked softmax kernels (ops/cpu/masked_softmax.cpp, ops/cuda/masked_softmax.cu):
// which keys a row leaves out — a mask tensor's elements, located under broadcasting, or a causal
// pattern computed from indices — and the per-element math of forward and backward, written once as
// SRU_HD functions so both backends compute exactly the same function.
#pragma once

#include <cmath>

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
SRU_HD double masked_max_term(double x, bool masked) { return masked ? -INFINITY : x; }
SRU_HD double masked_exp_term(double x, double row_max, bool masked) { return masked ? 0.0 : std::exp(x - row_max); }

// Forward: softmax y = exp(x - lse), log y = x - lse; masked elements and fully masked rows give
// 0 (softmax) or -inf (log).
SRU_HD double masked_softmax_value(double x, double lse, bool masked, bool log_out) {
  if (masked || lse == -INFINITY) return log_out ? -INFINITY : 0.0;
  const double v = x - lse;
  return log_out ? v : std::exp(v);
}

// Backward: dot = sum over unmasked c of (log ? g_c : g_c y_c); then
//   softmax dx = y (g - dot),  log dx = g - exp(y) dot,  and exactly 0 at masked elements
// (whatever the incoming gradient holds there, so an -inf output never produces NaN).
SRU_HD double masked_softmax_dot_term(double g, double y, bool masked, bool log_out) {
  return masked ? 0.0 : (log_out ? g : g * y);
}
SRU_HD double masked_softmax_grad(double g, double y, double dot, bool masked, bool log_out) {
  if (masked) return 0.0;
  return log_out ? g - std::exp(y) * dot : y * (g - dot);
}

}  // namespace sru
