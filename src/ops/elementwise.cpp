// Autograd wrappers of the pointwise ops: shape checks, output allocation, backward formulas.
#include "ops/elementwise.h"
#include "ops/dispatch.h"
#include "ops/shape_ops.h"

#include "autograd/node.h"

namespace sru {

namespace {

Shape broadcast_shape(const Tensor& a, const Tensor& b, const char* op) {
  check_same_dtype(a, b, op);
  check_same_device(a, b, op);
  check_floating16(a, op);
  if (a.shape() == b.shape()) return a.shape();
  if (a.numel() >= b.numel() && is_shape_suffix(b.shape(), a.shape())) return a.shape();
  if (b.numel() >= a.numel() && is_shape_suffix(a.shape(), b.shape())) return b.shape();
  SRU_FAIL(op, ": shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()),
           " cannot broadcast (one must equal the trailing dims of the other)");
}

Tensor binary_forward(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(broadcast_shape(a, b, name), a.dtype(), a.device());
  SRU_KERNEL(out.device(), binary, op, a, b, out);
  return out;
}

Tensor unary_op(UnaryOp op, const char* name, const Tensor& x, double alpha) {
  check_floating16(x, name);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  SRU_KERNEL(x.device(), unary, op, x, alpha, y);
  if (autograd::needs_grad({x})) {
    autograd::record(name, {x}, {y}, [op, alpha, x = x.detach(), y = y.detach()](const std::vector<Tensor>& g) {
      Tensor gx = Tensor::empty(x.shape(), x.dtype(), x.device());
      SRU_KERNEL(x.device(), unary_backward, op, g[0], x, y, alpha, gx);
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}

// Autocast's type promotion (PyTorch's): a bf16 operand beside a float32 one computes in float32, e.g.
// the residual x + sublayer(x) of a bf16 run, whose sublayer answers in bf16 while the stream stays
// float32. The bf16 side is cast (differentiably: its gradient comes back in bf16). Any other mix of
// dtypes stays an error naming the op (a float64 gradient check must not meet float32 silently).
Tensor as_float32(const Tensor& t) { return t.dtype() == DType::F32 ? t : cast(t, DType::F32); }

}  // namespace

Tensor sum_to_shape(const Tensor& g, const Shape& shape, const Tensor& into) {
  if (g.shape() == shape) return g;
  SRU_CHECK(is_shape_suffix(shape, g.shape()), "sum_to_shape: ", shape_str(shape), " is not a suffix of ",
            shape_str(g.shape()));
  Tensor out = into.matches(shape, g.dtype(), g.device()) ? into : Tensor::empty(shape, g.dtype(), g.device());
  SRU_KERNEL(g.device(), sum_rows, g, out);
  return out;
}

Tensor add(const Tensor& a, const Tensor& b) {
  if (mixes_bf16_and_float32(a, b)) return add(as_float32(a), as_float32(b));
  Tensor out = binary_forward(BinaryOp::Add, "add", a, b);
  if (autograd::needs_grad({a, b})) {
    autograd::record("AddBackward", {a, b}, {out}, [sa = a.shape(), sb = b.shape()](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{sum_to_shape(g[0], sa, autograd::gradient_destination(0)),
                                 sum_to_shape(g[0], sb, autograd::gradient_destination(1))};
    });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  if (mixes_bf16_and_float32(a, b)) return sub(as_float32(a), as_float32(b));
  Tensor out = binary_forward(BinaryOp::Sub, "sub", a, b);
  if (autograd::needs_grad({a, b})) {
    autograd::record("SubBackward", {a, b}, {out}, [sa = a.shape(), sb = b.shape()](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{sum_to_shape(g[0], sa), neg(sum_to_shape(g[0], sb))};
    });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  if (mixes_bf16_and_float32(a, b)) return mul(as_float32(a), as_float32(b));
  Tensor out = binary_forward(BinaryOp::Mul, "mul", a, b);
  if (autograd::needs_grad({a, b})) {
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    autograd::record("MulBackward", {a, b}, {out},
                     [need_a, need_b, a = a.detach(), b = b.detach()](const std::vector<Tensor>& g) {
                       return std::vector<Tensor>{need_a ? sum_to_shape(mul(g[0], b), a.shape()) : Tensor(),
                                                  need_b ? sum_to_shape(mul(g[0], a), b.shape()) : Tensor()};
                     });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  if (mixes_bf16_and_float32(a, b)) return div(as_float32(a), as_float32(b));
  Tensor out = binary_forward(BinaryOp::Div, "div", a, b);
  if (autograd::needs_grad({a, b})) {
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    autograd::record("DivBackward", {a, b}, {out},
                     [need_a, need_b, sa = a.shape(), b = b.detach(), out = out.detach()](const std::vector<Tensor>& g) {
                       // d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b = -out/b.
                       Tensor g_over_b = div(g[0], b);
                       return std::vector<Tensor>{need_a ? sum_to_shape(g_over_b, sa) : Tensor(),
                                                  need_b ? sum_to_shape(neg(mul(g_over_b, out)), b.shape()) : Tensor()};
                     });
  }
  return out;
}

Tensor add_scalar(const Tensor& x, double s) { return unary_op(UnaryOp::AddScalar, "AddScalarBackward", x, s); }
Tensor mul_scalar(const Tensor& x, double s) { return unary_op(UnaryOp::MulScalar, "MulScalarBackward", x, s); }
Tensor pow_scalar(const Tensor& x, double p) { return unary_op(UnaryOp::PowScalar, "PowScalarBackward", x, p); }
Tensor rsub_scalar(double s, const Tensor& x) { return unary_op(UnaryOp::RSubScalar, "RSubScalarBackward", x, s); }
Tensor rdiv_scalar(double s, const Tensor& x) { return unary_op(UnaryOp::RDivScalar, "RDivScalarBackward", x, s); }
Tensor exp(const Tensor& x) { return unary_op(UnaryOp::Exp, "ExpBackward", x, 0.0); }
Tensor log(const Tensor& x) { return unary_op(UnaryOp::Log, "LogBackward", x, 0.0); }
Tensor tanh(const Tensor& x) { return unary_op(UnaryOp::Tanh, "TanhBackward", x, 0.0); }
Tensor sigmoid(const Tensor& x) { return unary_op(UnaryOp::Sigmoid, "SigmoidBackward", x, 0.0); }
Tensor relu(const Tensor& x) { return unary_op(UnaryOp::Relu, "ReluBackward", x, 0.0); }
Tensor neg(const Tensor& x) { return unary_op(UnaryOp::Neg, "NegBackward", x, 0.0); }

}  // namespace sru
