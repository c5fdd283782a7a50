// CUDA kernels of the pointwise ops (math in ops/elementwise_math.h, shared with the CPU twins in
// ops/cpu/elementwise.cpp). Shapes: out has n elements; a broadcast operand of m elements (m divides n)
// is read at index i % m (trailing-dim broadcasting). One thread per element, grid-stride loops. f32, f64
// and bf16 storage: bf16 operands are read as float, the math is float, each output rounded once.
// sum_rows: out (n) = sum over rows of g (rows, n), in double, by column_sums (ops/cuda/kernel_util.cuh).
#include "ops/cuda/kernel_util.cuh"
#include "ops/elementwise.h"

namespace sru::cuda {

namespace {

template <BinaryOp OP, typename T>
__global__ void binary_kernel(const T* a, long long na, const T* b, long long nb, T* out, long long n) {
  using C = compute_t<T>;
  SRU_GRID_STRIDE(i, n) out[i] = T(binary_apply<OP>(C(a[na == n ? i : i % na]), C(b[nb == n ? i : i % nb])));
}

template <UnaryOp OP, typename T>
__global__ void unary_kernel(const T* x, compute_t<T> alpha, T* y, long long n) {
  using C = compute_t<T>;
  SRU_GRID_STRIDE(i, n) y[i] = T(unary_apply<OP>(C(x[i]), alpha));
}

template <UnaryOp OP, typename T>
__global__ void unary_backward_kernel(const T* g, const T* x, const T* y, compute_t<T> alpha, T* gx, long long n) {
  using C = compute_t<T>;
  SRU_GRID_STRIDE(i, n) gx[i] = T(C(g[i]) * unary_derivative<OP>(C(x[i]), C(y[i]), alpha));
}

template <typename T>
struct RowElement {  // g viewed as (rows, n): element (r, j)
  const T* g;
  long long n;
  __device__ double operator()(long long r, long long j) const { return static_cast<double>(compute_t<T>(g[r * n + j])); }
};

template <BinaryOp OP, typename T>
void launch_binary(const T* a, long long na, const T* b, long long nb, T* out, long long n, cudaStream_t s) {
  binary_kernel<OP><<<grid_for(n), kBlock, 0, s>>>(a, na, b, nb, out, n);
  SRU_CUDA_LAUNCH_CHECK("binary_kernel");
}

}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const long long n = out.numel();
  if (n == 0) return;
  const cudaStream_t s = stream_of(out);
  SRU_DISPATCH_FLOATING_BF16(out.dtype(), "binary", [&]<typename T>() {
    const T *pa = a.data<T>(), *pb = b.data<T>();
    T* po = out.data<T>();
    const long long na = a.numel(), nb = b.numel();
    switch (op) {
      case BinaryOp::Add: return launch_binary<BinaryOp::Add>(pa, na, pb, nb, po, n, s);
      case BinaryOp::Sub: return launch_binary<BinaryOp::Sub>(pa, na, pb, nb, po, n, s);
      case BinaryOp::Mul: return launch_binary<BinaryOp::Mul>(pa, na, pb, nb, po, n, s);
      case BinaryOp::Div: return launch_binary<BinaryOp::Div>(pa, na, pb, nb, po, n, s);
    }
  });
}

void unary(UnaryOp op, const Tensor& x, double alpha, const Tensor& out) {
  const long long n = x.numel();
  if (n == 0) return;
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "unary", [&]<typename T>() {
    with_unary_op(op, [&]<UnaryOp OP>() {
      unary_kernel<OP, T><<<grid_for(n), kBlock, 0, stream_of(x)>>>(x.data<T>(), compute_t<T>(alpha), out.data<T>(), n);
      SRU_CUDA_LAUNCH_CHECK("unary_kernel");
    });
  });
}

void unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y, double alpha,
                    const Tensor& grad_x) {
  const long long n = x.numel();
  if (n == 0) return;
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "unary_backward", [&]<typename T>() {
    with_unary_op(op, [&]<UnaryOp OP>() {
      unary_backward_kernel<OP, T><<<grid_for(n), kBlock, 0, stream_of(x)>>>(grad.data<T>(), x.data<T>(), y.data<T>(),
                                                                             compute_t<T>(alpha), grad_x.data<T>(), n);
      SRU_CUDA_LAUNCH_CHECK("unary_backward_kernel");
    });
  });
}

void sum_rows(const Tensor& g, const Tensor& out) {
  const long long n = out.numel();
  if (n == 0) return;
  const long long rows = g.numel() / n;
  SRU_DISPATCH_FLOATING_BF16(g.dtype(), "sum_rows", [&]<typename T>() {
    column_sums(RowElement<T>{g.data<T>(), n}, rows, n, 1.0, out.data<T>(), g.device());
  });
}

}  // namespace sru::cuda
