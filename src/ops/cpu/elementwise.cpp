// CPU kernels of the pointwise ops (math in ops/elementwise_math.h), on f32, f64 and bf16 storage: a
// bf16 kernel reads its operands as float, computes in float and rounds each output once (to nearest
// even), as the CUDA twin does, so the two agree to the bit but for the math library's last bits.
// Shapes: out has n elements; a broadcast operand of m elements (m divides n) is read at index i % m,
// which is exactly trailing-dim broadcasting for row-major tensors. Loops are split across OpenMP
// threads in contiguous chunks and written so the compiler can vectorise the inner loop.
#include "core/parallel.h"
#include "ops/elementwise.h"

namespace sru::cpu {

namespace {

template <BinaryOp OP, typename T>
void binary_kernel(const T* a, int64_t na, const T* b, int64_t nb, T* out, int64_t n) {
  using C = compute_t<T>;
  if (na == n && nb == n) {
    parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) out[i] = T(binary_apply<OP>(C(a[i]), C(b[i])));
    });
    return;
  }
  // One operand repeats every `row` elements: iterate rows so the inner loop is contiguous.
  const bool a_small = na < n;
  const int64_t row = a_small ? na : nb;
  const int64_t rows = n / row;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(row, 1));
  parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      T* o = out + r * row;
      if (a_small) {
        const T* br = b + r * row;
        for (int64_t j = 0; j < row; ++j) o[j] = T(binary_apply<OP>(C(a[j]), C(br[j])));
      } else {
        const T* ar = a + r * row;
        for (int64_t j = 0; j < row; ++j) o[j] = T(binary_apply<OP>(C(ar[j]), C(b[j])));
      }
    }
  });
}

// The loops over one thread's chunk, out of line with restrict arrays and alpha by value: inside the
// parallel_for lambdas a store through y might alias the captured alpha, which kept GCC from
// vectorising some of them (dropout's loop ran 5x slower so, ops/cpu/dropout.cpp).
template <UnaryOp OP, typename T>
__attribute__((noinline)) void unary_chunk(const T* __restrict x, compute_t<T> alpha, T* __restrict y, int64_t n) {
  using C = compute_t<T>;
  for (int64_t i = 0; i < n; ++i) y[i] = T(unary_apply<OP>(C(x[i]), alpha));
}

template <UnaryOp OP, typename T>
__attribute__((noinline)) void unary_backward_chunk(const T* __restrict g, const T* __restrict x,
                                                    const T* __restrict y, compute_t<T> alpha, T* __restrict gx,
                                                    int64_t n) {
  using C = compute_t<T>;
  for (int64_t i = 0; i < n; ++i) gx[i] = T(C(g[i]) * unary_derivative<OP>(C(x[i]), C(y[i]), alpha));
}

template <UnaryOp OP, typename T>
void unary_kernel(const T* x, compute_t<T> alpha, T* y, int64_t n) {
  parallel_for(0, n, kParallelGrain,
               [&](int64_t lo, int64_t hi) { unary_chunk<OP, T>(x + lo, alpha, y + lo, hi - lo); });
}

template <UnaryOp OP, typename T>
void unary_backward_kernel(const T* g, const T* x, const T* y, compute_t<T> alpha, T* gx, int64_t n) {
  parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) {
    unary_backward_chunk<OP, T>(g + lo, x + lo, y + lo, alpha, gx + lo, hi - lo);
  });
}

}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  SRU_DISPATCH_FLOATING_BF16(out.dtype(), "binary", [&]<typename T>() {
    const T *pa = a.data<T>(), *pb = b.data<T>();
    T* po = out.data<T>();
    const int64_t na = a.numel(), nb = b.numel(), n = out.numel();
    if (n == 0) return;
    switch (op) {
      case BinaryOp::Add: return binary_kernel<BinaryOp::Add>(pa, na, pb, nb, po, n);
      case BinaryOp::Sub: return binary_kernel<BinaryOp::Sub>(pa, na, pb, nb, po, n);
      case BinaryOp::Mul: return binary_kernel<BinaryOp::Mul>(pa, na, pb, nb, po, n);
      case BinaryOp::Div: return binary_kernel<BinaryOp::Div>(pa, na, pb, nb, po, n);
    }
  });
}

void unary(UnaryOp op, const Tensor& x, double alpha, const Tensor& out) {
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "unary", [&]<typename T>() {
    with_unary_op(op, [&]<UnaryOp OP>() {
      unary_kernel<OP, T>(x.data<T>(), compute_t<T>(alpha), out.data<T>(), x.numel());
    });
  });
}

void unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y, double alpha,
                    const Tensor& grad_x) {
  SRU_DISPATCH_FLOATING_BF16(x.dtype(), "unary_backward", [&]<typename T>() {
    with_unary_op(op, [&]<UnaryOp OP>() {
      unary_backward_kernel<OP, T>(grad.data<T>(), x.data<T>(), y.data<T>(), compute_t<T>(alpha), grad_x.data<T>(),
                                   x.numel());
    });
  });
}

void sum_rows(const Tensor& g, const Tensor& out) {
  SRU_DISPATCH_FLOATING_BF16(g.dtype(), "sum_rows", [&]<typename T>() {
    const int64_t n = out.numel();
    const int64_t rows = n == 0 ? 0 : g.numel() / n;
    const T* pg = g.data<T>();
    T* po = out.data<T>();
    // Columns are independent: split them across threads, accumulate each in double, in row order,
    // so the result does not depend on the thread count.
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(rows, 1));
    parallel_for(0, n, grain, [&](int64_t lo, int64_t hi) {
      std::vector<double> acc(hi - lo, 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        const T* gr = pg + r * n;
        for (int64_t j = lo; j < hi; ++j) acc[j - lo] += static_cast<double>(compute_t<T>(gr[j]));
      }
      for (int64_t j = lo; j < hi; ++j) po[j] = static_cast<T>(acc[j - lo]);
    });
  });
}

}  // namespace sru::cpu
