// Autograd wrappers of matmul and bmm (see matmul.h for the backward formulas).
#include "ops/matmul.h"
#include "ops/shape_ops.h"
#include "ops/dispatch.h"

#include <atomic>

#include "autograd/node.h"

namespace sru {

namespace {

std::atomic<MatmulPrecision> g_matmul_precision{MatmulPrecision::Highest};

}  // namespace

void set_matmul_precision(MatmulPrecision precision) { g_matmul_precision.store(precision); }
MatmulPrecision matmul_precision() { return g_matmul_precision.load(); }

const std::vector<std::string>& matmul_precision_names() {
  static const std::vector<std::string> names = {"highest", "high", "medium"};
  return names;
}

const std::vector<std::string>& precision_names() {
  static const std::vector<std::string> names = {"fp32", "tf32", "bf16"};
  return names;
}

MatmulPrecision parse_precision(std::string_view name, std::string_view what) {
  const auto& names = precision_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (name == names[i]) return static_cast<MatmulPrecision>(i);
  SRU_FAIL(what, ": '", name, "' is not a precision: fp32, tf32 or bf16");
}

const std::string& precision_name(MatmulPrecision precision) {
  return precision_names().at(static_cast<size_t>(precision));
}

CudaFloat32Gemm cuda_float32_gemm(MatmulPrecision precision) {
  CudaFloat32Gemm plan;
  plan.bf16_operands = precision == MatmulPrecision::Medium;
  plan.tf32_tensor_cores = precision == MatmulPrecision::High;
  return plan;
}

namespace {

// Views a tensor as the (rows, cols) matrix GEMM sees: leading dims folded into rows.
struct Mat {
  int64_t rows, cols;
};

// The rows are the product of the leading dims, not numel / cols: with an empty inner dimension
// (cols 0) that quotient is 0 whatever the rows are.
Mat as_matrix(const Tensor& t) {
  int64_t rows = 1;
  for (int64_t i = 0; i + 1 < t.dim(); ++i) rows *= t.size(i);
  return {rows, t.size(-1)};
}

// C (rows of op(a) x cols of op(b)) for 2-d views.
Tensor gemm2d(const Tensor& a, bool ta, const Tensor& b, bool tb) {
  const Mat ma = as_matrix(a), mb = as_matrix(b);
  Tensor c = Tensor::empty({ta ? ma.cols : ma.rows, tb ? mb.rows : mb.cols}, a.dtype(), a.device());
  SRU_KERNEL(c.device(), gemm, a, ma.rows, ma.cols, ta, b, mb.rows, mb.cols, tb, c, 1, 1.0, 0.0);
  return c;
}

}  // namespace

namespace {
// Autocast's rule for products (PyTorch's): at precision bf16 a bf16 operand beside a float32 one makes
// both bf16, e.g. a float32 context against a bf16 Linear's answer in the reader's attention. Outside
// autocast a mix stays an error naming the op.
bool autocast_mixes_bf16_and_float32(const Tensor& a, const Tensor& b) {
  return autocast_bf16() && mixes_bf16_and_float32(a, b);
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  if (autocast_mixes_bf16_and_float32(a, b)) return matmul(cast(a, DType::BF16), cast(b, DType::BF16), ta, tb);
  check_same_dtype(a, b, "matmul");
  check_same_device(a, b, "matmul");
  check_floating16(a, "matmul");
  SRU_CHECK(b.dim() == 2, "matmul: b must be 2-d, got shape ", shape_str(b.shape()));
  SRU_CHECK(a.dim() >= 1 && (!ta || a.dim() == 2), "matmul: a must be ", ta ? "2-d when transposed" : "at least 1-d",
            ", got shape ", shape_str(a.shape()));
  const int64_t K = ta ? a.size(0) : a.size(-1);
  const int64_t Kb = tb ? b.size(1) : b.size(0);
  SRU_CHECK(K == Kb, "matmul: shapes ", shape_str(a.shape()), (ta ? "^T" : ""), " and ", shape_str(b.shape()),
            (tb ? "^T" : ""), " do not chain (", K, " vs ", Kb, ")");
  Tensor c2 = gemm2d(a, ta, b, tb);
  Shape out_shape = a.shape();
  if (ta) out_shape = {a.size(1)};
  else out_shape.pop_back();
  out_shape.push_back(tb ? b.size(0) : b.size(1));
  Tensor c = c2.view(out_shape);
  if (autograd::needs_grad({a, b})) {
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    autograd::record("MatmulBackward", {a, b}, {c},
                     [=, a = a.detach(), b = b.detach()](const std::vector<Tensor>& grads) {
                       const Tensor& g = grads[0];
                       Tensor ga, gb;
                       if (need_a) ga = (ta ? gemm2d(b, tb, g, true) : gemm2d(g, false, b, !tb)).view(a.shape());
                       if (need_b) gb = tb ? gemm2d(g, true, a, ta) : gemm2d(a, !ta, g, false);
                       return std::vector<Tensor>{ga, gb};
                     });
  }
  return c;
}

Tensor bmm(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  if (autocast_mixes_bf16_and_float32(a, b)) return bmm(cast(a, DType::BF16), cast(b, DType::BF16), ta, tb);
  check_same_dtype(a, b, "bmm");
  check_same_device(a, b, "bmm");
  check_floating16(a, "bmm");
  SRU_CHECK(a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0), "bmm: expected (Bt, ., .) tensors with equal Bt, got ",
            shape_str(a.shape()), " and ", shape_str(b.shape()));
  const int64_t batch = a.size(0);
  const int64_t K = ta ? a.size(1) : a.size(2);
  const int64_t Kb = tb ? b.size(2) : b.size(1);
  SRU_CHECK(K == Kb, "bmm: inner dimensions differ (", K, " vs ", Kb, ") for shapes ", shape_str(a.shape()), " and ",
            shape_str(b.shape()));
  auto batched = [batch](const Tensor& x, bool tx, const Tensor& y, bool ty) {
    const int64_t rx = x.size(1), cx = x.size(2), ry = y.size(1), cy = y.size(2);
    Tensor z = Tensor::empty({batch, tx ? cx : rx, ty ? ry : cy}, x.dtype(), x.device());
    SRU_KERNEL(z.device(), gemm, x, rx, cx, tx, y, ry, cy, ty, z, batch, 1.0, 0.0);
    return z;
  };
  Tensor c = batched(a, ta, b, tb);
  if (autograd::needs_grad({a, b})) {
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    autograd::record("BmmBackward", {a, b}, {c},
                     [=, a = a.detach(), b = b.detach()](const std::vector<Tensor>& grads) {
                       const Tensor& g = grads[0];
                       Tensor ga, gb;
                       if (need_a) ga = ta ? batched(b, tb, g, true) : batched(g, false, b, !tb);
                       if (need_b) gb = tb ? batched(g, true, a, ta) : batched(a, !ta, g, false);
                       return std::vector<Tensor>{ga, gb};
                     });
  }
  return c;
}

void check_gemm_sizes(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc, int64_t batch) {
  const std::pair<const char*, int64_t> sizes[] = {{"M", M},   {"N", N},   {"K", K},        {"lda", lda},
                                                   {"ldb", ldb}, {"ldc", ldc}, {"batch", batch}};
  for (const auto& [name, v] : sizes)
    SRU_CHECK(v <= 2147483647LL, "gemm: ", name, " = ", v, " is over the 2^31 - 1 that BLAS and cuBLAS take (M = ", M,
              ", N = ", N, ", K = ", K, ", batch = ", batch, "); split the product");
}

}  // namespace sru
