// Autograd wrappers of the layout ops.
#include "ops/shape_ops.h"
#include "ops/dispatch.h"

#include "autograd/node.h"

namespace sru {

namespace {

struct Around {
  int d;
  int64_t outer, n, inner;
};

Around around(const Shape& shape, int dim, const char* op) {
  const int d = normalize_dim(dim, static_cast<int>(shape.size()), op);
  return {d, shape_prod(shape, 0, d), shape[d], shape_prod(shape, d + 1, static_cast<int>(shape.size()))};
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  Tensor y = x.view(shape);
  if (autograd::needs_grad({x})) {
    autograd::record("ReshapeBackward", {x}, {y}, [in_shape = x.shape()](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].view(in_shape)};
    });
  }
  return y;
}

namespace {
thread_local const Bf16CastSource* active_bf16_source = nullptr;
}  // namespace

Bf16CastSourceScope::Bf16CastSourceScope(const Bf16CastSource* source) : previous_(active_bf16_source) {
  if (source) active_bf16_source = source;
}

Bf16CastSourceScope::~Bf16CastSourceScope() { active_bf16_source = previous_; }

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  SRU_CHECK(is_floating(x.dtype()) && is_floating(dtype), "cast: from ", dtype_name(x.dtype()), " to ",
            dtype_name(dtype), ": only between floating dtypes");
  Tensor y;
  if (active_bf16_source && dtype == DType::BF16 && x.dtype() == DType::F32) y = active_bf16_source->bf16_of(x);
  if (!y.defined()) y = x.detach().to(dtype);
  if (autograd::needs_grad({x})) {
    autograd::record("CastBackward", {x}, {y}, [from = x.dtype()](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].to(from)};
    });
  }
  return y;
}

bool mixes_bf16_and_float32(const Tensor& a, const Tensor& b) {
  return (a.dtype() == DType::BF16 && b.dtype() == DType::F32) || (a.dtype() == DType::F32 && b.dtype() == DType::BF16);
}

Tensor slice(const Tensor& x, int dim, int64_t start, int64_t end) {
  SRU_CHECK(x.dim() >= 1, "slice: needs a tensor of rank >= 1");
  const Around a = around(x.shape(), dim, "slice");
  SRU_CHECK(0 <= start && start <= end && end <= a.n, "slice: [", start, ", ", end, ") out of range for dim ", a.d,
            " of size ", a.n);
  Shape out_shape = x.shape();
  out_shape[a.d] = end - start;
  Tensor y;
  if (a.d == 0) {
    y = x.narrow0(start, end - start);
  } else {
    y = Tensor::empty(out_shape, x.dtype(), x.device());
    SRU_KERNEL(y.device(), copy_middle, x, y, a.outer, a.n, end - start, a.inner, start, false);
  }
  if (autograd::needs_grad({x})) {
    autograd::record("SliceBackward", {x}, {y}, [a, start, in_shape = x.shape()](const std::vector<Tensor>& g) {
      Tensor gx = Tensor::zeros(in_shape, g[0].dtype(), g[0].device());
      SRU_KERNEL(gx.device(), copy_middle, g[0], gx, a.outer, g[0].shape()[a.d], a.n, a.inner, start, true);
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}

Tensor concat(const std::vector<Tensor>& xs, int dim) {
  SRU_CHECK(!xs.empty(), "concat: no tensors given");
  // bf16 beside float32 concatenates in float32, as torch.cat promotes (a bf16 run's features).
  for (const Tensor& x : xs)
    if (mixes_bf16_and_float32(xs[0], x)) {
      std::vector<Tensor> widened;
      for (const Tensor& y : xs) widened.push_back(cast(y, y.dtype() == DType::BF16 ? DType::F32 : y.dtype()));
      return concat(widened, dim);
    }
  const Around a = around(xs[0].shape(), dim, "concat");
  Shape out_shape = xs[0].shape();
  int64_t total = 0;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < xs.size(); ++i) {
    check_same_dtype(xs[0], xs[i], "concat");
    Shape expect = xs[i].shape();
    SRU_CHECK(expect.size() == out_shape.size(), "concat: tensor ", i, " has rank ", expect.size(), ", expected ",
              out_shape.size());
    expect[a.d] = out_shape[a.d];
    SRU_CHECK(expect == out_shape, "concat: tensor ", i, " of shape ", shape_str(xs[i].shape()),
              " does not match ", shape_str(xs[0].shape()), " outside dim ", a.d);
    sizes.push_back(xs[i].size(a.d));
    total += sizes.back();
  }
  out_shape[a.d] = total;
  Tensor y = Tensor::empty(out_shape, xs[0].dtype(), xs[0].device());
  SRU_KERNEL(y.device(), copy_pieces, Pieces{xs, sizes}, y, a.outer, a.inner, true);
  if (autograd::needs_grad(xs)) {
    autograd::record("ConcatBackward", xs, {y}, [a, sizes](const std::vector<Tensor>& g) {
      Pieces grads{{}, sizes};
      for (int64_t s : sizes) {
        Shape piece = g[0].shape();
        piece[a.d] = s;
        grads.tensors.push_back(Tensor::empty(piece, g[0].dtype(), g[0].device()));
      }
      SRU_KERNEL(g[0].device(), copy_pieces, grads, g[0], a.outer, a.inner, false);
      return grads.tensors;
    });
  }
  return y;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int dim) {
  const Around a = around(x.shape(), dim, "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    SRU_CHECK(s >= 0, "split: negative size ", s);
    total += s;
  }
  SRU_CHECK(total == a.n, "split: sizes add up to ", total, " but dim ", a.d, " has size ", a.n);
  std::vector<Tensor> pieces;
  int64_t start = 0;
  for (int64_t s : sizes) {
    pieces.push_back(slice(x, a.d, start, start + s));
    start += s;
  }
  return pieces;
}

Tensor transpose(const Tensor& x, int dim0, int dim1) {
  const int r = x.dim();
  int d0 = normalize_dim(dim0, r, "transpose"), d1 = normalize_dim(dim1, r, "transpose");
  if (d0 > d1) std::swap(d0, d1);
  Shape out_shape = x.shape();
  std::swap(out_shape[d0], out_shape[d1]);
  const int64_t A = shape_prod(x.shape(), 0, d0), n0 = x.size(d0), M = shape_prod(x.shape(), d0 + 1, d1),
                n1 = x.size(d1), C = shape_prod(x.shape(), d1 + 1, r);
  Tensor y = Tensor::empty(out_shape, x.dtype(), x.device());
  SRU_KERNEL(y.device(), transpose_copy, x, y, A, n0, M, n1, C);
  if (autograd::needs_grad({x})) {
    autograd::record("TransposeBackward", {x}, {y}, [=, in_shape = x.shape()](const std::vector<Tensor>& g) {
      Tensor gx = Tensor::empty(in_shape, g[0].dtype(), g[0].device());
      SRU_KERNEL(gx.device(), transpose_copy, g[0], gx, A, n1, M, n0, C);
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}

std::vector<Tensor> unbind(const Tensor& x) {
  SRU_CHECK(x.dim() >= 1, "unbind: needs a tensor of rank >= 1");
  const Shape row_shape(x.shape().begin() + 1, x.shape().end());
  std::vector<Tensor> rows;
  rows.reserve(x.size(0));
  for (int64_t i = 0; i < x.size(0); ++i) rows.push_back(x.narrow0(i, 1).view(row_shape));
  if (autograd::needs_grad({x})) {
    // Rows nothing used reach the backward undefined (no zero fill each): copy_pieces writes their zeros.
    std::vector<int> every_row(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) every_row[i] = static_cast<int>(i);
    autograd::record("UnbindBackward", {x}, rows,
                     [in_shape = x.shape(), dtype = x.dtype(), device = x.device()](const std::vector<Tensor>& g) {
                       Tensor gx = Tensor::empty(in_shape, dtype, device);
                       const int64_t n = in_shape[0];
                       SRU_KERNEL(device, copy_pieces, Pieces{g, std::vector<int64_t>(n, 1)}, gx, 1,
                                  n == 0 ? 0 : gx.numel() / n, true);
                       return std::vector<Tensor>{gx};
                     },
                     every_row);
  }
  return rows;
}

}  // namespace sru
