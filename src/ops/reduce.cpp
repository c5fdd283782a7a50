// Autograd wrappers of sum and mean.
#include "ops/reduce.h"
#include "ops/dispatch.h"

#include "autograd/node.h"

namespace sru {

namespace {

// Reduces x viewed as (outer, n, inner) over the middle axis into a tensor of out_shape.
Tensor reduce_middle_axis(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Shape& out_shape,
                          bool is_mean, const char* name, const Tensor& into = Tensor()) {
  check_floating16(x, name);
  SRU_CHECK(!is_mean || n > 0, name, ": mean over an empty dim of a tensor of shape ", shape_str(x.shape()));
  const double scale = is_mean ? 1.0 / static_cast<double>(n) : 1.0;
  Tensor out = into.matches(out_shape, x.dtype(), x.device()) ? into : Tensor::empty(out_shape, x.dtype(), x.device());
  SRU_KERNEL(x.device(), reduce_middle, x, outer, n, inner, scale, out);
  if (autograd::needs_grad({x})) {
    autograd::record(is_mean ? "MeanBackward" : "SumBackward", {x}, {out},
                     [=, in_shape = x.shape(), dtype = x.dtype(), device = x.device()](const std::vector<Tensor>& g) {
                       Tensor gx = Tensor::empty(in_shape, dtype, device);
                       SRU_KERNEL(gx.device(), broadcast_middle, g[0], outer, n, inner, scale, gx);
                       return std::vector<Tensor>{gx};
                     });
  }
  return out;
}

Tensor reduce_dim(const Tensor& x, int dim, bool keepdim, bool is_mean, const char* name, const Tensor& into = Tensor()) {
  SRU_CHECK(x.dim() >= 1, name, ": cannot reduce over a dim of a 0-d tensor");
  const int d = normalize_dim(dim, x.dim(), name);
  Shape out_shape = x.shape();
  if (keepdim) out_shape[d] = 1;
  else out_shape.erase(out_shape.begin() + d);
  return reduce_middle_axis(x, shape_prod(x.shape(), 0, d), x.size(d), shape_prod(x.shape(), d + 1, x.dim()),
                            out_shape, is_mean, name, into);
}

}  // namespace

Tensor sum(const Tensor& x, int dim, bool keepdim) { return reduce_dim(x, dim, keepdim, false, "sum"); }
Tensor sum_into(const Tensor& x, int dim, const Tensor& into) { return reduce_dim(x, dim, false, false, "sum", into); }
Tensor mean(const Tensor& x, int dim, bool keepdim) { return reduce_dim(x, dim, keepdim, true, "mean"); }
Tensor sum(const Tensor& x) { return reduce_middle_axis(x, 1, x.numel(), 1, {}, false, "sum"); }
Tensor mean(const Tensor& x) { return reduce_middle_axis(x, 1, x.numel(), 1, {}, true, "mean"); }

}  // namespace sru
