// Autograd wrappers of masked_fill and where; both run the one select kernel.
#include "ops/select.h"
#include "ops/dispatch.h"

#include "autograd/node.h"

namespace sru {

namespace {

void check_condition(const Tensor& cond, const Tensor& x, const char* op) {
  SRU_CHECK(is_shape_suffix(cond.shape(), x.shape()), op, ": mask/condition of shape ", shape_str(cond.shape()),
            " does not match the trailing dims of ", shape_str(x.shape()));
}

// g where the condition picks the `taken` side, else 0.
Tensor route_grad(const Tensor& cond, const Tensor& g, bool taken) {
  Tensor out = Tensor::empty(g.shape(), g.dtype(), g.device());
  if (taken) SRU_KERNEL(out.device(), select, cond, g, 0.0, Tensor(), 0.0, out);
  else SRU_KERNEL(out.device(), select, cond, Tensor(), 0.0, g, 0.0, out);
  return out;
}

}  // namespace

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_floating16(x, "masked_fill");
  check_condition(mask, x, "masked_fill");
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  SRU_KERNEL(y.device(), select, mask, Tensor(), value, x, 0.0, y);
  if (autograd::needs_grad({x})) {
    autograd::record("MaskedFillBackward", {x, mask}, {y}, [mask = mask.detach()](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{route_grad(mask, g[0], false), Tensor()};
    });
  }
  return y;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_floating16(a, "where");
  check_same_dtype(a, b, "where");
  check_same_device(a, b, "where");
  check_same_shape(a, b, "where");
  check_condition(cond, a, "where");
  Tensor y = Tensor::empty(a.shape(), a.dtype(), a.device());
  SRU_KERNEL(y.device(), select, cond, a, 0.0, b, 0.0, y);
  if (autograd::needs_grad({a, b})) {
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    autograd::record("WhereBackward", {cond, a, b}, {y}, [=, cond = cond.detach()](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{Tensor(), need_a ? route_grad(cond, g[0], true) : Tensor(),
                                 need_b ? route_grad(cond, g[0], false) : Tensor()};
    });
  }
  return y;
}

}  // namespace sru
