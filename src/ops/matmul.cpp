// Autograd wrappers of matmul and bmm (see matmul.h for the backward formulas).
#include "ops/matmul.h"
#include "ops/shape_ops.h"
#include "ops/dispatch.h"

#include <atomic>

#include "autograd/node.h"
#include "ops/elementwise.h"

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

// C (rows of op(a) x cols of op(b)) for 2-d views; with a target (autograd::gradient_target, of C's
// size), C is added into the pending gradient (beta 1) or written over the destination, and the
// target returned.
Tensor gemm2d(const Tensor& a, bool ta, const Tensor& b, bool tb, const autograd::GradientTarget& target = {}) {
  const Mat ma = as_matrix(a), mb = as_matrix(b);
  const int64_t rows = ta ? ma.cols : ma.rows, cols = tb ? mb.rows : mb.cols;
  const Tensor& into = target.into;
  Tensor c = into.defined() ? into.view({rows, cols}) : Tensor::empty({rows, cols}, a.dtype(), a.device());
  SRU_KERNEL(c.device(), gemm, a, GemmMatrix::packed(ma.rows, ma.cols), ta, b, GemmMatrix::packed(mb.rows, mb.cols), tb,
             c, GemmMatrix::packed(rows, cols), 1, 1.0, target.accumulate ? 1.0 : 0.0);
  return into.defined() ? into : c;
}

}  // namespace

namespace {
// Autocast's rule for products (PyTorch's): at precision bf16 a bf16 operand beside a float32 one makes
// both bf16, e.g. a float32 context against a bf16 Linear's answer in the reader's attention. Outside
// autocast a mix stays an error naming the op.
bool autocast_mixes_bf16_and_float32(const Tensor& a, const Tensor& b) {
  return autocast_bf16() && mixes_bf16_and_float32(a, b);
}

// The operands of a product: one dtype (float or bf16) and one device.
// The gradients of C = op(a) op(b) from G (autograd/node.h FoldingBackwardFn), for matmul (product =
// gemm2d) and bmm (product = its batched GEMM): dA = G op(B)^T (!ta) or op(B) G^T (ta), dB = op(A)^T G
// (!tb) or G^T op(A) (tb), each into its gradient target (added into a pending gradient, or written over
// the parameter's place) where there is one.
template <typename Product>
std::vector<Tensor> product_gradients(const Tensor& g, const Tensor& a, bool ta, bool need_a, const Tensor& b, bool tb,
                                      bool need_b, std::vector<Tensor>& pending, const Product& product) {
  Tensor ga, gb;
  if (need_a) {
    const autograd::GradientTarget into = autograd::gradient_target(pending, 0);  // of a's shape
    const Tensor made = ta ? product(b, tb, g, true, into) : product(g, false, b, !tb, into);
    ga = into.into.defined() ? made : made.view(a.shape());
  }
  if (need_b) {
    const autograd::GradientTarget into = autograd::gradient_target(pending, 1);
    gb = tb ? product(g, true, a, ta, into) : product(a, !ta, g, false, into);
  }
  return {ga, gb};
}

void check_product_operands(const Tensor& a, const Tensor& b, const char* op) {
  check_same_dtype(a, b, op);
  check_same_device(a, b, op);
  check_floating16(a, op);
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) { return matmul_into(a, b, ta, tb, Tensor()); }

Tensor matmul_into(const Tensor& a, const Tensor& b, bool ta, bool tb, const Tensor& into) {
  if (autocast_mixes_bf16_and_float32(a, b)) return matmul(cast(a, DType::BF16), cast(b, DType::BF16), ta, tb);
  check_product_operands(a, b, "matmul");
  SRU_CHECK(b.dim() == 2, "matmul: b must be 2-d, got shape ", shape_str(b.shape()));
  SRU_CHECK(a.dim() >= 1 && (!ta || a.dim() == 2), "matmul: a must be ", ta ? "2-d when transposed" : "at least 1-d",
            ", got shape ", shape_str(a.shape()));
  const int64_t K = ta ? a.size(0) : a.size(-1);
  const int64_t Kb = tb ? b.size(1) : b.size(0);
  SRU_CHECK(K == Kb, "matmul: shapes ", shape_str(a.shape()), (ta ? "^T" : ""), " and ", shape_str(b.shape()),
            (tb ? "^T" : ""), " do not chain (", K, " vs ", Kb, ")");
  Shape out_shape = a.shape();
  if (ta) out_shape = {a.size(1)};
  else out_shape.pop_back();
  out_shape.push_back(tb ? b.size(0) : b.size(1));
  Tensor c2 = gemm2d(a, ta, b, tb, {into.matches(out_shape, a.dtype(), a.device()) ? into : Tensor(), false});
  Tensor c = c2.view(out_shape);
  if (autograd::needs_grad({a, b})) {
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    // Folding: a gradient already waiting for a or b (x feeds both the SRU's product and its recurrence)
    // takes this product with beta 1.
    autograd::record_folding("MatmulBackward", {a, b}, {c},
                             [=, a = a.detach(), b = b.detach()](const std::vector<Tensor>& grads,
                                                                 std::vector<Tensor>& pending) {
                               return product_gradients(grads[0], a, ta, need_a, b, tb, need_b, pending, gemm2d);
                             });
  }
  return c;
}

Tensor bmm(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  if (autocast_mixes_bf16_and_float32(a, b)) return bmm(cast(a, DType::BF16), cast(b, DType::BF16), ta, tb);
  check_product_operands(a, b, "bmm");
  SRU_CHECK(a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0), "bmm: expected (Bt, ., .) tensors with equal Bt, got ",
            shape_str(a.shape()), " and ", shape_str(b.shape()));
  const int64_t batch = a.size(0);
  const int64_t K = ta ? a.size(1) : a.size(2);
  const int64_t Kb = tb ? b.size(2) : b.size(1);
  SRU_CHECK(K == Kb, "bmm: inner dimensions differ (", K, " vs ", Kb, ") for shapes ", shape_str(a.shape()), " and ",
            shape_str(b.shape()));
  // With a target (of z's shape), z is added into it or written over it, as gemm2d.
  auto batched = [batch](const Tensor& x, bool tx, const Tensor& y, bool ty,
                         const autograd::GradientTarget& target = {}) {
    const int64_t rx = x.size(1), cx = x.size(2), ry = y.size(1), cy = y.size(2);
    Tensor z = target.into.defined() ? target.into
                                     : Tensor::empty({batch, tx ? cx : rx, ty ? ry : cy}, x.dtype(), x.device());
    SRU_KERNEL(z.device(), gemm, x, GemmMatrix::packed(rx, cx), tx, y, GemmMatrix::packed(ry, cy), ty, z,
               GemmMatrix::packed(z.size(1), z.size(2)), batch, 1.0, target.accumulate ? 1.0 : 0.0);
    return z;
  };
  Tensor c = batched(a, ta, b, tb);
  if (autograd::needs_grad({a, b})) {
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    autograd::record_folding("BmmBackward", {a, b}, {c},
                             [=, a = a.detach(), b = b.detach()](const std::vector<Tensor>& grads,
                                                                 std::vector<Tensor>& pending) {
                               return product_gradients(grads[0], a, ta, need_a, b, tb, need_b, pending, batched);
                             });
  }
  return c;
}

namespace {

// Head n = b*H + h of an (L, B, H*d) tensor as a (L, d) matrix: rows B*H*d apart, heads d apart.
GemmMatrix head_matrix(const Tensor& x, int64_t heads) {
  const int64_t d = x.size(2) / heads;
  return {x.size(0), d, x.size(1) * x.size(2), d};
}

// The (L, B, H*d) operands of head_scores / head_mix: checked, and cast to bf16 beside a bf16 one
// under autocast (bmm's rule).
void check_head_operand(const Tensor& x, int64_t heads, const char* op, const char* name) {
  SRU_CHECK(heads > 0 && x.dim() == 3 && x.size(2) % heads == 0, op, ": ", name, " must be (L, B, H*d) with H = ",
            heads, " dividing its last dim, got ", shape_str(x.shape()));
}

// c (laid out as mc) = op(a) op(b) for the B*H heads (one strided batched GEMM).
void head_gemm(const Tensor& a, const GemmMatrix& ma, bool ta, const Tensor& b, const GemmMatrix& mb, bool tb,
               const Tensor& c, const GemmMatrix& mc, int64_t batch) {
  SRU_KERNEL(c.device(), gemm, a, ma, ta, b, mb, tb, c, mc, batch, 1.0, 0.0);
}

}  // namespace

Tensor head_scores(const Tensor& q, const Tensor& k, int64_t heads) {
  if (autocast_mixes_bf16_and_float32(q, k)) return head_scores(cast(q, DType::BF16), cast(k, DType::BF16), heads);
  check_product_operands(q, k, "head_scores");
  check_head_operand(q, heads, "head_scores", "q");
  check_head_operand(k, heads, "head_scores", "k");
  SRU_CHECK(q.size(1) == k.size(1) && q.size(2) == k.size(2), "head_scores: q ", shape_str(q.shape()), " and k ",
            shape_str(k.shape()), " differ in batch or width");
  const int64_t BH = q.size(1) * heads, Lq = q.size(0), Lk = k.size(0);
  const GemmMatrix mq = head_matrix(q, heads), mk = head_matrix(k, heads), ms = GemmMatrix::packed(Lq, Lk);
  Tensor s = Tensor::empty({BH, Lq, Lk}, q.dtype(), q.device());
  head_gemm(q, mq, false, k, mk, true, s, ms, BH);  // S_n = Q_n K_n^T
  if (autograd::needs_grad({q, k})) {
    const bool need_q = q.requires_grad(), need_k = k.requires_grad();
    autograd::record("HeadScoresBackward", {q, k}, {s}, [=, q = q.detach(), k = k.detach()](const std::vector<Tensor>& g) {
      Tensor gq, gk;
      if (need_q) {  // dQ_n = dS_n K_n, written in q's layout
        gq = Tensor::empty(q.shape(), q.dtype(), q.device());
        head_gemm(g[0], ms, false, k, mk, false, gq, mq, BH);
      }
      if (need_k) {  // dK_n = dS_n^T Q_n
        gk = Tensor::empty(k.shape(), k.dtype(), k.device());
        head_gemm(g[0], ms, true, q, mq, false, gk, mk, BH);
      }
      return std::vector<Tensor>{gq, gk};
    });
  }
  return s;
}

Tensor head_mix(const Tensor& p, const Tensor& v, int64_t heads) {
  if (autocast_mixes_bf16_and_float32(p, v)) return head_mix(cast(p, DType::BF16), cast(v, DType::BF16), heads);
  check_product_operands(p, v, "head_mix");
  check_head_operand(v, heads, "head_mix", "v");
  const int64_t BH = v.size(1) * heads, Lk = v.size(0);
  SRU_CHECK(p.dim() == 3 && p.size(0) == BH && p.size(2) == Lk, "head_mix: p must be (B*H, Lq, Lk) = (", BH,
            ", Lq, ", Lk, "), got ", shape_str(p.shape()));
  const int64_t Lq = p.size(1);
  Tensor o = Tensor::empty({Lq, v.size(1), v.size(2)}, v.dtype(), v.device());
  const GemmMatrix mp = GemmMatrix::packed(Lq, Lk), mv = head_matrix(v, heads), mo = head_matrix(o, heads);
  head_gemm(p, mp, false, v, mv, false, o, mo, BH);  // O_n = P_n V_n, written in (Lq, B, H*dv)
  if (autograd::needs_grad({p, v})) {
    const bool need_p = p.requires_grad(), need_v = v.requires_grad();
    autograd::record("HeadMixBackward", {p, v}, {o}, [=, p = p.detach(), v = v.detach()](const std::vector<Tensor>& g) {
      Tensor gp, gv;
      if (need_p) {  // dP_n = dO_n V_n^T
        gp = Tensor::empty(p.shape(), p.dtype(), p.device());
        head_gemm(g[0], mo, false, v, mv, true, gp, mp, BH);
      }
      if (need_v) {  // dV_n = P_n^T dO_n, written in v's layout
        gv = Tensor::empty(v.shape(), v.dtype(), v.device());
        head_gemm(p, mp, true, g[0], mo, false, gv, mv, BH);
      }
      return std::vector<Tensor>{gp, gv};
    });
  }
  return o;
}

namespace {

// linear and linear_relu: one dispatch forward; backward (a folding node: x's gradient may be added into
// the one waiting for it) masks the gradient by y > 0 first when the ReLU was applied.
Tensor linear_with(const Tensor& x, const Tensor& weight, const Tensor& bias, LinearActivation activation) {
  if (autocast_bf16() && weight.dtype() == DType::F32 && x.dtype() != DType::F64)
    return linear_with(cast(x, DType::BF16), cast(weight, DType::BF16),
                       bias.defined() ? cast(bias, DType::BF16) : Tensor(), activation);
  const bool relu_after = activation == LinearActivation::Relu;
  if (!bias.defined()) return relu_after ? relu(matmul(x, weight, false, true)) : matmul(x, weight, false, true);
  check_product_operands(x, weight, "linear");
  check_same_dtype(x, bias, "linear");
  check_same_device(x, bias, "linear");
  SRU_CHECK(weight.dim() == 2 && bias.dim() == 1 && bias.size(0) == weight.size(0) && x.dim() >= 1 &&
                x.size(-1) == weight.size(1),
            "linear: expected x (..., in), weight (out, in), bias (out), got x ", shape_str(x.shape()), ", weight ",
            shape_str(weight.shape()), ", bias ", shape_str(bias.shape()));
  const int64_t N = weight.size(0), K = weight.size(1), M = x.numel() / std::max<int64_t>(K, 1);
  check_gemm_sizes(M, N, K, K, K, N, 1);
  Shape out_shape = x.shape();
  out_shape.back() = N;
  Tensor y = Tensor::empty(out_shape, x.dtype(), x.device());
  SRU_KERNEL(y.device(), linear_forward, x.view({M, K}), weight, bias, y.view({M, N}), activation);
  if (autograd::needs_grad({x, weight, bias})) {
    const bool need_x = x.requires_grad(), need_w = weight.requires_grad(), need_b = bias.requires_grad();
    autograd::record_folding(
        relu_after ? "LinearReluBackward" : "LinearBackward", {x, weight, bias}, {y},
        [=, x = x.detach(), w = weight.detach(), y = relu_after ? y.detach() : Tensor()](const std::vector<Tensor>& g,
                                                                                         std::vector<Tensor>& pending) {
          Tensor rows = g[0].view({M, N});
          if (relu_after) {  // relu's backward from its output: y > 0 exactly where the sum was
            const Tensor masked = Tensor::empty({M, N}, rows.dtype(), rows.device());
            SRU_KERNEL(rows.device(), unary_backward, UnaryOp::Relu, rows, y.view({M, N}), y.view({M, N}), 0.0, masked);
            rows = masked;
          }
          Tensor gx, gw;
          if (need_x) {
            const autograd::GradientTarget into = autograd::gradient_target(pending, 0);  // of x's shape
            const Tensor product = gemm2d(rows, false, w, false, into);
            gx = into.into.defined() ? product : product.view(x.shape());
          }
          if (need_w && need_b) {  // both in one dispatch (on a GPU the bias gradient in the GEMM's epilogue)
            const autograd::GradientTarget into = autograd::gradient_target(pending, 1);  // of the weight's shape
            gw = into.into.defined() ? into.into : Tensor::empty({N, K}, rows.dtype(), rows.device());
            const Tensor gb = autograd::gradient_buffer(2, {N}, rows.dtype(), rows.device());
            SRU_KERNEL(rows.device(), linear_parameter_gradients, rows, x.view({M, K}), gw.view({N, K}), into.accumulate,
                       gb);
            return std::vector<Tensor>{gx, gw, gb};
          }
          if (need_w) gw = gemm2d(rows, true, x.view({M, K}), false, autograd::gradient_target(pending, 1));
          return std::vector<Tensor>{gx, gw, need_b ? sum_to_shape(rows, {N}, autograd::gradient_destination(2)) : Tensor()};
        });
  }
  return y;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return linear_with(x, weight, bias, LinearActivation::None);
}

Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return linear_with(x, weight, bias, LinearActivation::Relu);
}

GemmDims gemm_dims(const GemmMatrix& ma, bool ta, const GemmMatrix& mb, bool tb, const GemmMatrix& mc) {
  const int64_t M = ta ? ma.cols : ma.rows, K = ta ? ma.rows : ma.cols, N = tb ? mb.rows : mb.cols;
  SRU_CHECK((tb ? mb.cols : mb.rows) == K && mc.rows == M && mc.cols == N, "gemm: shapes do not chain (op(a) ", M,
            " x ", K, ", op(b) ", (tb ? mb.cols : mb.rows), " x ", N, ", c ", mc.rows, " x ", mc.cols, ")");
  return {M, N, K};
}

void check_gemm_sizes(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc, int64_t batch) {
  const std::pair<const char*, int64_t> sizes[] = {{"M", M},   {"N", N},   {"K", K},        {"lda", lda},
                                                   {"ldb", ldb}, {"ldc", ldc}, {"batch", batch}};
  for (const auto& [name, v] : sizes)
    SRU_CHECK(v <= 2147483647LL, "gemm: ", name, " = ", v, " is over the 2^31 - 1 that BLAS and cuBLAS take (M = ", M,
              ", N = ", N, ", K = ", K, ", batch = ", batch, "); split the product");
}

}  // namespace sru
