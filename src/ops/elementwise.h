// Pointwise ops: binary add/sub/mul/div with broadcasting of trailing dims, scalar ops, and
// exp/log/tanh/sigmoid/relu/neg/pow. All differentiable.
//
// Broadcasting: the operands' shapes must be equal, or one must equal a suffix of the other (after
// dropping its leading 1s), e.g. (L, B, d) + (d) adds a bias row to every (l, b). The gradient of the
// smaller operand is the incoming gradient summed over the leading dims it was broadcast across.
// Dtypes: the operands' must match, except that a bf16 operand beside a float32 one is promoted to
// float32 (mixed precision's residual adds, as PyTorch promotes); the result then is float32.
#pragma once

#include "core/tensor.h"
#include "ops/kernels.h"
#include "ops/elementwise_math.h"

namespace sru {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);

Tensor add_scalar(const Tensor& x, double s);   // x + s
Tensor mul_scalar(const Tensor& x, double s);   // x * s
Tensor pow_scalar(const Tensor& x, double p);   // x ^ p
Tensor rsub_scalar(double s, const Tensor& x);  // s - x
Tensor rdiv_scalar(double s, const Tensor& x);  // s / x

Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor neg(const Tensor& x);

// Sums g over its leading dims so that it has `shape` (a suffix of g's shape): the gradient of a
// broadcast operand. Returns g itself when the shapes already match. The sums are written into `into`
// when it is a tensor of that shape, dtype and device (a backward's autograd::gradient_destination).
Tensor sum_to_shape(const Tensor& g, const Shape& shape, const Tensor& into = Tensor());

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& x, double s) { return add_scalar(x, s); }
inline Tensor operator+(double s, const Tensor& x) { return add_scalar(x, s); }
inline Tensor operator-(const Tensor& x, double s) { return add_scalar(x, -s); }
inline Tensor operator-(double s, const Tensor& x) { return rsub_scalar(s, x); }
inline Tensor operator*(const Tensor& x, double s) { return mul_scalar(x, s); }
inline Tensor operator*(double s, const Tensor& x) { return mul_scalar(x, s); }
inline Tensor operator/(const Tensor& x, double s) { return mul_scalar(x, 1.0 / s); }
inline Tensor operator/(double s, const Tensor& x) { return rdiv_scalar(s, x); }
inline Tensor operator-(const Tensor& x) { return neg(x); }

// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/elementwise.cu) have the same contracts, tensors on one
// CUDA device.
SRU_DECLARE_KERNELS(
// out = a OP b, with out of the broadcast shape (the larger operand's).
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
// out = f(x), and grad_x = grad * f'(x) from the saved x and y = f(x).
void unary(UnaryOp op, const Tensor& x, double alpha, const Tensor& out);
void unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y, double alpha,
                    const Tensor& grad_x);
// out (n) = sum over rows of g viewed as (rows, n).
void sum_rows(const Tensor& g, const Tensor& out);
)

}  // namespace sru
