// Autograd wrapper of layer_norm.
#include "ops/layer_norm.h"
#include "ops/dispatch.h"

#include "autograd/node.h"

namespace sru {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_floating16(x, "layer_norm");
  // bf16 x (and y, dx): weight, bias, the row statistics and the weight gradients stay float32.
  const DType compute = x.dtype() == DType::BF16 ? DType::F32 : x.dtype();
  SRU_CHECK(x.dim() >= 1 && x.size(-1) > 0, "layer_norm: needs a non-empty last dim, got ", shape_str(x.shape()));
  const int64_t D = x.size(-1), N = x.numel() / D;
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    SRU_CHECK(p->dtype() == compute, "layer_norm: weight/bias must be ", dtype_name(compute), " with x of ",
              dtype_name(x.dtype()), ", got ", dtype_name(p->dtype()));
    check_same_device(x, *p, "layer_norm");
    SRU_CHECK(p->shape() == Shape{D}, "layer_norm: weight/bias must have shape (", D, ",), got ",
              shape_str(p->shape()));
  }
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mean = Tensor::empty({N}, compute, x.device());
  Tensor rstd = Tensor::empty({N}, compute, x.device());
  SRU_KERNEL(x.device(), layer_norm_forward, x, weight, bias, eps, y, mean, rstd);
  if (autograd::needs_grad({x, weight, bias})) {
    const bool need_w = weight.defined() && weight.requires_grad();
    const bool need_b = bias.defined() && bias.requires_grad();
    autograd::record("LayerNormBackward", {x, weight, bias}, {y},
                     [=, x = x.detach(), weight = weight.defined() ? weight.detach() : Tensor()](
                         const std::vector<Tensor>& g) {
                       Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
                       // The kernels write every element of dw and db: a parameter's flat slot serves.
                       Tensor dw = need_w ? autograd::gradient_buffer(1, {D}, compute, x.device()) : Tensor();
                       Tensor db = need_b ? autograd::gradient_buffer(2, {D}, compute, x.device()) : Tensor();
                       SRU_KERNEL(x.device(), layer_norm_backward, g[0], x, weight, mean, rstd, dx, dw, db);
                       return std::vector<Tensor>{dx, dw, db};
                     });
  }
  return y;
}

}  // namespace sru
