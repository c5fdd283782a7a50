// cuBLAS GEMM for the matmul ops: c = alpha * op(a) @ op(b) + beta * c for `batch` row-major matrices
// laid out as GemmMatrix says (leading dimension, stride between matrices; CPU twin: ops/cpu/matmul.cpp,
// OpenBLAS).
// cuBLAS is column-major: a row-major (R, C) matrix is its column-major transpose, so the row-major
// product C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T, with B first.
// Float32 at the process's matmul precision (ops/matmul.h, cuda_float32_gemm): highest (the default)
// is full FP32, so results match the CPU to float rounding; high uses TF32 tensor cores; medium rounds
// both operands to bfloat16 here (6 bytes per operand element: read 4, write 2) and multiplies them on
// BF16 tensor cores with FP32 sums. Double: FP64. bf16 tensors: GemmEx over CUDA_R_16BF operands and C
// with FP32 sums (CUBLAS_COMPUTE_32F), whatever the precision setting.
// The Linear's two fused cases through cuBLASLt epilogues: the forward's bias (CUBLASLT_EPILOGUE_BIAS)
// and the backward's bias gradient beside the weight gradient (CUBLASLT_EPILOGUE_BGRADB); each falls
// back to a GEMM and a separate pass where the heuristic does not take it.
#include <atomic>

#include "ops/bf16_round.h"
#include "ops/cuda/kernel_util.cuh"
#include "ops/elementwise.h"
#include "ops/matmul.h"

namespace sru::cuda {

namespace {

// Elements a column-major operand spans in memory: `batch` matrices `stride` apart (stride 0: one
// matrix shared by all), each `cols` columns of `rows` used rows, `ld` apart.
long long operand_span(int rows, int cols, int ld, long long stride, int batch) {
  return (stride > 0 ? stride * (batch - 1) : 0) + static_cast<long long>(ld) * (cols - 1) + rows;
}

// The operand's span rounded to bfloat16 in fresh device memory, with the same ld and stride.
Tensor bf16_operand(const float* x, long long span, int device) {
  Tensor rounded = Tensor::empty({(span + 1) / 2}, DType::I32, Device::cuda(device));  // 2 bf16 per word
  round_to_bf16(x, static_cast<uint16_t*>(rounded.data_ptr()), span, device);
  return rounded;
}

}  // namespace

void sgemm(cublasHandle_t handle, cublasOperation_t opa, cublasOperation_t opb, int m, int n, int k, float alpha,
           const float* a, int lda, long long stride_a, const float* b, int ldb, long long stride_b, float beta,
           float* c, int ldc, long long stride_c, int batch, bool round_operands) {
  CudaFloat32Gemm plan = cuda_float32_gemm(matmul_precision());
  if (plan.bf16_operands && !round_operands) plan = cuda_float32_gemm(MatmulPrecision::High);
  if (plan.bf16_operands) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));  // context() made the handle's device current
    // op(A) is m x k: A holds m rows and k columns when not transposed, else k rows and m columns.
    const bool ta = opa != CUBLAS_OP_N, tb = opb != CUBLAS_OP_N;
    const Tensor a16 = bf16_operand(a, operand_span(ta ? k : m, ta ? m : k, lda, stride_a, batch), device);
    const Tensor b16 = bf16_operand(b, operand_span(tb ? n : k, tb ? k : n, ldb, stride_b, batch), device);
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, opa, opb, m, n, k, &alpha, a16.data_ptr(), CUDA_R_16BF, lda,
                                            stride_a, b16.data_ptr(), CUDA_R_16BF, ldb, stride_b, &beta, c, CUDA_R_32F,
                                            ldc, stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;  // a16 and b16 go back to the stream-ordered allocator: the GEMM queued before any reuse
  }
  if (plan.tf32_tensor_cores) {
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, opa, opb, m, n, k, &alpha, a, CUDA_R_32F, lda, stride_a, b,
                                            CUDA_R_32F, ldb, stride_b, &beta, c, CUDA_R_32F, ldc, stride_c, batch,
                                            CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    return;
  }
  if (batch == 1 && stride_a == 0 && stride_b == 0 && stride_c == 0) {
    CUBLAS_CHECK(cublasSgemm(handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc));  // the LSTM's steps
    return;
  }
  CUBLAS_CHECK(cublasSgemmStridedBatched(handle, opa, opb, m, n, k, &alpha, a, lda, stride_a, b, ldb, stride_b, &beta,
                                         c, ldc, stride_c, batch));
}

void gemm(const Tensor& a, const GemmMatrix& ma, bool ta, const Tensor& b, const GemmMatrix& mb, bool tb,
          const Tensor& c, const GemmMatrix& mc, int64_t batch, double alpha, double beta) {
  const auto [M, N, K] = gemm_dims(ma, ta, mb, tb, mc);
  if (M == 0 || N == 0 || batch == 0) return;
  if (K == 0) {  // the product is zero: C = beta * C, without reading C when beta is 0
    SRU_CHECK(mc.ld == N && mc.stride == M * N, "gemm: K = 0 with a strided C");
    Tensor out = c;
    if (beta == 0) out.zero_();
    else out.mul_(beta);
    return;
  }
  check_gemm_sizes(M, N, K, ma.ld, mb.ld, mc.ld, batch);
  cublasHandle_t handle = context(c.device().index).cublas;
  const cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  // Column-major: C^T (N x M, ld mc.ld) = op(B)^T (ld mb.ld) op(A)^T (ld ma.ld), B first.
  if (c.dtype() == DType::BF16) {
    SRU_CHECK(a.dtype() == DType::BF16 && b.dtype() == DType::BF16, "gemm: bf16 C needs bf16 operands, got ",
              dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
    const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, opb, opa, N, M, K, &al, b.data_ptr(), CUDA_R_16BF, mb.ld, mb.stride,
                                            a.data_ptr(), CUDA_R_16BF, ma.ld, ma.stride, &be, c.data_ptr(), CUDA_R_16BF,
                                            mc.ld, mc.stride, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  SRU_DISPATCH_FLOATING(c.dtype(), "gemm", [&]<typename T>() {
    const T al = static_cast<T>(alpha), be = static_cast<T>(beta);
    if constexpr (std::is_same_v<T, float>)
      sgemm(handle, opb, opa, N, M, K, al, b.data<T>(), mb.ld, mb.stride, a.data<T>(), ma.ld, ma.stride, be,
            c.data<T>(), mc.ld, mc.stride, batch);
    else
      CUBLAS_CHECK(cublasDgemmStridedBatched(handle, opb, opa, N, M, K, &al, b.data<T>(), mb.ld, mb.stride, a.data<T>(),
                                             ma.ld, ma.stride, &be, c.data<T>(), mc.ld, mc.stride, batch));
  });
}

namespace {

// The largest power of two (up to 256) that divides the address: what cuBLASLt's heuristic must be told,
// or it assumes 256-byte alignment and may pick a kernel that faults on a view's offset.
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

// The descriptors of one cuBLASLt call, destroyed with the object.
struct LtCall {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~LtCall() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

constexpr size_t kLtWorkspace = size_t{4} << 20;  // bytes of scratch cuBLASLt may use

// A column-major operand of a cuBLASLt call as stored (before its transpose): rows x cols, ld apart.
struct LtOperand {
  const void* data;
  int64_t rows, cols, ld;
};

// One cuBLASLt GEMM with an epilogue: d = op(a) op(b) + beta d, the epilogue's vector at `vector` (the
// bias it adds, or the bias gradient it writes over).
struct LtGemm {
  cublasOperation_t trans_a, trans_b;
  LtOperand a, b, d;
  cublasLtEpilogue_t epilogue;
  const void* vector;
  float beta;
};

// Runs `gemm` on y's device and stream for y's dtype. Returns false, having queued nothing, when this
// is not a case it takes (float64, float32 at precision medium: those round their operands first) or
// the heuristic offers no algorithm for it; the caller then runs the unfused kernels.
bool run_lt_gemm(const LtGemm& gemm, const Tensor& y) {
  cudaDataType_t type;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (y.dtype() == DType::BF16) {
    type = CUDA_R_16BF;
  } else if (y.dtype() == DType::F32) {
    const CudaFloat32Gemm plan = cuda_float32_gemm(matmul_precision());
    if (plan.bf16_operands) return false;
    type = CUDA_R_32F;
    if (plan.tf32_tensor_cores) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  } else {
    return false;
  }
  const DeviceContext& ctx = context(y.device().index);
  LtCall call;
  auto ok = [](cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; };
  auto layout = [&](cublasLtMatrixLayout_t* out, const LtOperand& m) {
    return ok(cublasLtMatrixLayoutCreate(out, type, static_cast<uint64_t>(m.rows), static_cast<uint64_t>(m.cols), m.ld));
  };
  if (!ok(cublasLtMatmulDescCreate(&call.op, compute, CUDA_R_32F)) ||
      !ok(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSA, &gemm.trans_a, sizeof gemm.trans_a)) ||
      !ok(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSB, &gemm.trans_b, sizeof gemm.trans_b)) ||
      !ok(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &gemm.epilogue, sizeof gemm.epilogue)) ||
      !ok(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &gemm.vector,
                                         sizeof gemm.vector)) ||
      !layout(&call.a, gemm.a) || !layout(&call.b, gemm.b) || !layout(&call.c, gemm.d) ||
      !ok(cublasLtMatmulPreferenceCreate(&call.preference)))
    return false;
  const size_t workspace_bytes = kLtWorkspace;
  const uint32_t align_a = alignment_of(gemm.a.data), align_b = alignment_of(gemm.b.data),
                 align_c = alignment_of(gemm.d.data);
  if (!ok(cublasLtMatmulPreferenceSetAttribute(call.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &workspace_bytes, sizeof workspace_bytes)) ||
      !ok(cublasLtMatmulPreferenceSetAttribute(call.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                               sizeof align_a)) ||
      !ok(cublasLtMatmulPreferenceSetAttribute(call.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                               sizeof align_b)) ||
      !ok(cublasLtMatmulPreferenceSetAttribute(call.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
                                               sizeof align_c)) ||
      !ok(cublasLtMatmulPreferenceSetAttribute(call.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
                                               sizeof align_c)))
    return false;
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  if (!ok(cublasLtMatmulAlgoGetHeuristic(ctx.cublas_lt, call.op, call.a, call.b, call.c, call.c, call.preference, 1,
                                         &heuristic, &found)) ||
      found == 0)
    return false;
  const Tensor workspace = Tensor::empty({static_cast<int64_t>(kLtWorkspace / 4)}, DType::F32, y.device());
  const float alpha = 1.0f;
  void* d = const_cast<void*>(gemm.d.data);
  return ok(cublasLtMatmul(ctx.cublas_lt, call.op, &alpha, gemm.a.data, call.a, gemm.b.data, call.b, &gemm.beta, d, call.c,
                           d, call.c, &heuristic.algo, workspace.data_ptr(), kLtWorkspace, ctx.stream));
}

// y = x W^T + bias with the bias in the epilogue, one kernel. Column-major, as cuBLAS: y^T (N x M,
// ld N) = op(W) (N x K; W is stored (K x N), ld K, transposed) times x^T (K x M, ld K); the bias runs
// along y^T's rows, as the epilogue adds it.
bool linear_forward_lt(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                       LinearActivation activation) {
  const int64_t M = x.size(0), K = x.size(1), N = weight.size(0);
  const cublasLtEpilogue_t epilogue =
      activation == LinearActivation::Relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  return run_lt_gemm({CUBLAS_OP_T, CUBLAS_OP_N, {weight.data_ptr(), K, N, K}, {x.data_ptr(), K, M, K},
                      {y.data_ptr(), N, M, N}, epilogue, bias.data_ptr(), 0.0f},
                     y);
}

// dW = dy^T x with db = the column sums of dy in the epilogue, one kernel (apex's fused dense
// backward does the same). Column-major: dW^T (K x N, ld K) = x^T (K x M, ld K) times op(dy^T)
// (dy stored as dy^T, N x M, ld N, transposed: M x N); BGRADB reduces op(B) over the GEMM's k = M into
// a vector as long as D has columns (N), from B alone: beta 1 (dW added into) leaves it as it is.
bool linear_parameter_gradients_lt(const Tensor& dy, const Tensor& x, const Tensor& weight_grad, bool accumulate_weight,
                                   const Tensor& bias_grad) {
  const int64_t M = dy.size(0), N = dy.size(1), K = x.size(1);
  return run_lt_gemm({CUBLAS_OP_N, CUBLAS_OP_T, {x.data_ptr(), K, M, K}, {dy.data_ptr(), N, M, N},
                      {weight_grad.data_ptr(), K, N, K}, CUBLASLT_EPILOGUE_BGRADB, bias_grad.data_ptr(),
                      accumulate_weight ? 1.0f : 0.0f},
                     weight_grad);
}

// y[r, j] += bias[j], then max(0, .) when relu (the fallback's add; for bf16 a second rounding, after
// the GEMM's).
template <typename T>
__global__ void add_bias_rows_kernel(T* y, const T* bias, long long n, long long N, bool relu) {
  using C = compute_t<T>;
  SRU_GRID_STRIDE(e, n) {
    const C v = static_cast<C>(y[e]) + static_cast<C>(bias[e % N]);
    y[e] = static_cast<T>(relu ? (v > C(0) ? v : C(0)) : v);
  }
}

std::atomic<uint64_t> g_linear_epilogue_calls{0};
std::atomic<uint64_t> g_linear_bias_gradient_epilogue_calls{0};

}  // namespace

uint64_t linear_epilogue_calls() { return g_linear_epilogue_calls.load(); }
uint64_t linear_bias_gradient_epilogue_calls() { return g_linear_bias_gradient_epilogue_calls.load(); }

void linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                    LinearActivation activation) {
  const int64_t M = x.size(0), K = x.size(1), N = weight.size(0);
  if (M == 0 || N == 0) return;
  if (K > 0 && linear_forward_lt(x, weight, bias, y, activation)) {
    g_linear_epilogue_calls.fetch_add(1);
    return;
  }
  gemm(x, GemmMatrix::packed(M, K), false, weight, GemmMatrix::packed(N, K), true, y, GemmMatrix::packed(M, N), 1, 1.0,
       0.0);
  const long long n = M * N;
  SRU_DISPATCH_FLOATING_BF16(y.dtype(), "linear", [&]<typename T>() {
    add_bias_rows_kernel<<<grid_for(n), kBlock, 0, stream_of(y)>>>(y.data<T>(), bias.data<T>(), n, N,
                                                                   activation == LinearActivation::Relu);
  });
  SRU_CUDA_LAUNCH_CHECK("add_bias_rows_kernel");
}

void linear_parameter_gradients(const Tensor& dy, const Tensor& x, const Tensor& weight_grad, bool accumulate_weight,
                                const Tensor& bias_grad) {
  const int64_t M = dy.size(0), N = dy.size(1), K = x.size(1);
  if (N == 0) return;
  if (M > 0 && K > 0 && linear_parameter_gradients_lt(dy, x, weight_grad, accumulate_weight, bias_grad)) {
    g_linear_bias_gradient_epilogue_calls.fetch_add(1);
    return;
  }
  gemm(dy, GemmMatrix::packed(M, N), true, x, GemmMatrix::packed(M, K), false, weight_grad, GemmMatrix::packed(N, K), 1,
       1.0, accumulate_weight ? 1.0 : 0.0);
  sum_rows(dy, bias_grad);
}

}  // namespace sru::cuda
