// Layout ops: reshape (zero-copy view), slice / concat / split along any dim, transpose of two dims.
// Shapes: around dim d, a tensor is viewed as (outer, size_d, inner).
//   slice(x, d, start, end) -> size_d = end - start (a zero-copy view when d == 0, else a copy);
//     backward writes g into a zeroed input-shaped gradient at [start, end).
//   concat(xs, d): sizes along d add up; backward slices g back into pieces.
//   split(x, sizes, d): slices that tile dim d.
//   transpose(x, d0, d1): copies with the two dims swapped; backward transposes g back.
//   unbind(x): the x.size(0) rows of x as zero-copy views (one graph node for all of them); backward
//     stacks the row gradients (zeros where none arrived) into one gradient, so a per-time-step loop
//     costs O(L) in backward, where L separate slices would cost O(L^2).
#pragma once

#include <vector>

#include "core/tensor.h"
#include "ops/kernels.h"

namespace sru {

Tensor reshape(const Tensor& x, const Shape& shape);  // one dim may be -1
// x converted to `dtype` (x itself when it already is; to bf16: round to nearest even), differentiable
// between floating dtypes: the gradient comes back converted to x's dtype. Mixed precision's casts.
// A float32 x cast to bf16 while a Bf16CastSourceScope is active on this thread takes its values from
// the scope's source where it has them (the same rounding, made before: no conversion at the call).
Tensor cast(const Tensor& x, DType dtype);

// Where cast(x, BF16) may find x's bf16 values made already: nn/weight_shadows.h converts a training
// step's float32 weights in one dispatch, where each product under bf16 precision converted its weight
// at its call. bf16_of answers a tensor holding exactly x's values rounded to bf16, shaped as x, or an
// undefined tensor for an x it does not hold (cast then converts as usual).
class Bf16CastSource {
 public:
  virtual ~Bf16CastSource() = default;
  virtual Tensor bf16_of(const Tensor& x) const = 0;
};

// While alive, cast asks `source` first on this thread (null: leaves the current source as it is);
// the previous one comes back at the end.
class Bf16CastSourceScope {
 public:
  explicit Bf16CastSourceScope(const Bf16CastSource* source);
  ~Bf16CastSourceScope();
  Bf16CastSourceScope(const Bf16CastSourceScope&) = delete;
  Bf16CastSourceScope& operator=(const Bf16CastSourceScope&) = delete;

 private:
  const Bf16CastSource* previous_;
};
// Whether one operand is bf16 and the other float32: where mixed precision promotes (element-wise ops
// compute in float32) or, under autocast, demotes (products take both as bf16).
bool mixes_bf16_and_float32(const Tensor& a, const Tensor& b);
Tensor slice(const Tensor& x, int dim, int64_t start, int64_t end);
Tensor concat(const std::vector<Tensor>& xs, int dim);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int dim);
Tensor transpose(const Tensor& x, int dim0, int dim1);
std::vector<Tensor> unbind(const Tensor& x);

// The pieces of a concatenation along the middle axis of (outer, total, inner): piece i is (outer,
// rows[i], inner), contiguous, at rows [sum of rows[< i], + rows[i]) of the whole. An undefined piece
// stands for zeros (a gradient nothing reached) when the pieces are copied in, and is skipped when
// they are copied out.
struct Pieces {
  std::vector<Tensor> tensors;
  std::vector<int64_t> rows;
};
template <typename F>
void visit_tensors(const Pieces& p, F&& f) {
  for (const Tensor& t : p.tensors) f(t);
}

// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/shape_ops.cu) have the same contracts, tensors on one
// CUDA device.
SRU_DECLARE_KERNELS(
// Every piece into its rows of whole (into_whole; undefined pieces write zeros), or whole's rows out into
// every defined piece: one dispatch for all pieces (concat, its backward, unbind's backward).
void copy_pieces(const Pieces& pieces, const Tensor& whole, int64_t outer, int64_t inner, bool into_whole);
// Copies src (outer, n_src, inner) into dst (outer, n_dst, inner) at rows [at, at + n_src) of the middle
// axis when `into` is true, or the rows [at, at + n_dst) of src into dst when it is false.
void copy_middle(const Tensor& src, const Tensor& dst, int64_t outer, int64_t n_src, int64_t n_dst, int64_t inner,
                 int64_t at, bool into);
// dst = src with dims d0 < d1 swapped, src viewed as (A, n0, M, n1, C).
void transpose_copy(const Tensor& src, const Tensor& dst, int64_t A, int64_t n0, int64_t M, int64_t n1, int64_t C);
)

}  // namespace sru
