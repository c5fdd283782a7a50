// Matrix products with transpose flags, on BLAS (OpenBLAS sgemm/dgemm) with no copies.
//
// matmul(a, b, ta, tb) = op(a) @ op(b), op = transpose when the flag is set.
//   a: (..., M, K) when !ta — the leading dims fold into M, e.g. x (L, B, n) @ W (n, m) -> (L, B, m);
//      (K, M) when ta (2-d only). b: (K, N) or, when tb, (N, K). Result (..., M, N).
// bmm(a, b, ta, tb): batched, a (Bt, M, K) or (Bt, K, M), b (Bt, K, N) or (Bt, N, K) -> (Bt, M, N).
// Backward (C = op(A) op(B), G = dL/dC):
//   dA = G op(B)^T  (!ta)  or  op(B) G^T  (ta);   dB = op(A)^T G  (!tb)  or  G^T op(A)  (tb)
// — each again one GEMM with flags, so no transposed copy is ever made.
//
// Precision of float32 products (PyTorch's torch.set_float32_matmul_precision), a process-wide setting
// that the GEMMs read at each call; train.precision, srueval --precision and srubench --precision set
// it by the names fp32 / tf32 / bf16 (precision_names):
//   highest  (fp32) FP32 multiply-adds (the default);
//   high     (tf32) on CUDA devices TF32 tensor cores: the inputs lose all but 10 mantissa bits,
//            products summed in FP32 (relative error per product up to ~2^-10 against ~2^-23); the
//            CPU has no TF32 and computes FP32;
//   medium   (bf16) both operands rounded to bfloat16 (8 significant bits, round to nearest even) by
//            our own kernel, products summed in FP32: on CUDA devices BF16 tensor cores; on the CPU
//            (its twin) the AVX512-BF16 kernels where the processor has them and the product is large
//            enough (ops/cpu/gemm_bf16.h: ~1.7-2.3x sgemm), else float32 copies of the rounded
//            operands through sgemm (no faster than fp32: Debian's OpenBLAS has no BF16 GEMM), so a
//            bf16 run computes the same products on either device, summed in another order.
//            (PyTorch documents medium as bfloat16 where a fast algorithm exists, but its CUDA matmuls
//            run medium as TF32: compare with it at highest or high.)
// Double-precision products stay exact IEEE FP64 whatever the setting. The cuDNN LSTM takes high and
// medium as permission for TF32 (CUDNN_DEFAULT_MATH instead of FMA only), and the fused LSTM
// recurrence's per-step GEMMs (both devices) run medium as high.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "ops/kernels.h"

namespace sru {

enum class MatmulPrecision { Highest, High, Medium };
void set_matmul_precision(MatmulPrecision precision);
MatmulPrecision matmul_precision();
// Whether the layers that route bf16 activations (the SRU layer: its U = x W and recurrence I/O) keep
// them in bf16: at precision bf16 (train.precision, srueval --precision), as PyTorch's bf16 autocast.
inline bool autocast_bf16() { return matmul_precision() == MatmulPrecision::Medium; }
// PyTorch's names, in the enum's order: "highest", "high", "medium" (the values of the config key
// train.matmul_precision, which train.precision replaced: config/config.cpp translates them).
const std::vector<std::string>& matmul_precision_names();
// Ours, in the enum's order: "fp32", "tf32", "bf16" (train.precision, srueval/srubench --precision).
const std::vector<std::string>& precision_names();
// One of precision_names() as its value; throws naming `what` otherwise.
MatmulPrecision parse_precision(std::string_view name, std::string_view what);
const std::string& precision_name(MatmulPrecision precision);

// What a float32 GEMM on a CUDA device hands cuBLAS at a precision (ops/cuda/matmul.cu does exactly
// this; a CPU test pins it down). Medium rounds the operands itself: cuBLAS's
// CUBLAS_COMPUTE_32F_FAST_16BF over float32 operands only *allows* BF16, and on an H200 (cuBLAS 13)
// it returned CUBLAS_COMPUTE_32F_FAST_TF32's result bit for bit (tests/tools/cuda_library_probe gemm):
// medium was high under another name.
struct CudaFloat32Gemm {
  bool bf16_operands = false;      // A and B rounded to bfloat16 (ops/bf16_round.h), read as CUDA_R_16BF
  bool tf32_tensor_cores = false;  // float32 operands with CUBLAS_COMPUTE_32F_FAST_TF32
  // Otherwise the sums are CUBLAS_COMPUTE_32F: FMA kernels over float32 operands, or tensor cores over
  // bfloat16 ones (every product of two bfloat16 values is exact in float32).
};
CudaFloat32Gemm cuda_float32_gemm(MatmulPrecision precision);

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);
Tensor bmm(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);
// matmul written over `into` when that is a tensor of the result's shape, dtype and device (a backward's
// autograd::gradient_destination), else matmul's new tensor.
Tensor matmul_into(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, const Tensor& into);

// BLAS and cuBLAS take int sizes: both kernels refuse M, N, K, the leading dimensions (ca, cb, N) or
// the batch count over 2^31 - 1, naming which, instead of letting them wrap.
void check_gemm_sizes(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc, int64_t batch);

// One operand of a batched GEMM as it lies in its tensor's memory: row-major (rows, cols) matrices whose
// rows are `ld` elements apart (ld >= cols), matrix i beginning i * stride elements after matrix 0.
// packed: back to back, as a contiguous (batch, rows, cols) tensor; other layouts read or write a
// matrix out of a larger one, e.g. head h of batch row b of (L, B, H*dh) is (L, dh) with ld B*H*dh at
// stride dh (head_scores, head_mix).
struct GemmMatrix {
  int64_t rows = 0, cols = 0, ld = 0, stride = 0;
  static GemmMatrix packed(int64_t rows, int64_t cols) { return {rows, cols, cols, rows * cols}; }
  // Elements from matrix 0's first to matrix batch-1's last (what a kernel may touch).
  int64_t span(int64_t batch) const {
    return rows == 0 || cols == 0 || batch == 0 ? 0 : (batch - 1) * stride + (rows - 1) * ld + cols;
  }
};

// The product's sizes for both gemm kernels: op(a) (M, K), op(b) (K, N), c (M, N); throws naming all
// three when they do not chain.
struct GemmDims {
  int64_t M, N, K;
};
GemmDims gemm_dims(const GemmMatrix& ma, bool ta, const GemmMatrix& mb, bool tb, const GemmMatrix& mc);

// A layout holds no tensor: nothing for SRU_KERNEL's device check (ops/dispatch.h) to visit.
template <typename F>
void visit_tensors(const GemmMatrix&, F&&) {}

// Multi-head attention's two products, straight on the (L, B, H*dh) layout of its projections: no head
// split or merge copies (strided batched GEMMs over the B*H heads, n = b*H + h).
//   head_scores(q (Lq, B, H*dh), k (Lk, B, H*dh), H) -> (B*H, Lq, Lk): s[n, i, j] = sum_e q[i, n, e] k[j, n, e]
//   head_mix(p (B*H, Lq, Lk), v (Lk, B, H*dv), H)   -> (Lq, B, H*dv):  o[i, n, e] = sum_j p[n, i, j] v[j, n, e]
// = bmm over split_heads' (B*H, L, dh) views and merge_heads of the result (nn/attention.h), the same
// products; backward likewise strided (dq, dk, dv written in the (L, B, H*d) layout).
Tensor head_scores(const Tensor& q, const Tensor& k, int64_t heads);
Tensor head_mix(const Tensor& p, const Tensor& v, int64_t heads);

// PyTorch's F.linear: y = x W^T + b for x (..., in), W (out, in), b (out) or undefined, one dispatch
// forward (the bias added in the GEMM's epilogue: cuBLASLt's CUBLASLT_EPILOGUE_BIAS on a GPU, the
// CPU adding it to the product's rows) where matmul and an add were two. Float32: the same value as
// matmul(x, W^T) + b to the bit (the sum rounded, then the bias added and rounded). At precision bf16
// (autocast) x, W and b are cast to bf16 and y answers bf16, rounded once from the float32 sum plus
// the bias. Backward: dx = dy W, dW = dy^T x (GEMMs), db = column sums of dy
// (sum_rows, as the add's backward summed them: the same values).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
// relu(linear(x, weight, bias)) as one op: the ReLU in the same epilogue as the bias (cuBLASLt's
// CUBLASLT_EPILOGUE_RELU_BIAS on a GPU; the CPU's bias pass clamps too), where a ReLU kernel read and
// wrote the product again (the Transformer's feed-forward layers, DrQA's aligned attention). The same
// values to the bit: max(0, .) commutes with the one rounding (NaN becomes 0, as relu's x > 0 ? x : 0).
// Backward: the gradient masked by y > 0 (the same mask as x > 0 before the ReLU), then linear's.
Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias);

// What linear_forward applies after the bias.
enum class LinearActivation { None, Relu };

namespace cuda {
// linear_forward calls on CUDA devices that ran as one cuBLASLt GEMM with the bias epilogue (the rest
// fell back to a GEMM and an add), since the process started: what a test on a GPU checks.
uint64_t linear_epilogue_calls();
// linear_parameter_gradients calls on CUDA devices that ran as one cuBLASLt GEMM with the bias-gradient
// epilogue (CUBLASLT_EPILOGUE_BGRADB; the rest ran a GEMM and sum_rows).
uint64_t linear_bias_gradient_epilogue_calls();
}  // namespace cuda

// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/matmul.cu) have the same contracts, tensors on one
// CUDA device.
SRU_DECLARE_KERNELS(
// c = alpha * op(a) @ op(b) + beta * c for `batch` row-major matrices laid out as ma, mb, mc (op(a) is
// (M, K), op(b) (K, N), c (M, N)). beta = 0 ignores c's previous contents; elements of c outside its
// matrices are left as they are.
void gemm(const Tensor& a, const GemmMatrix& ma, bool ta, const Tensor& b, const GemmMatrix& mb, bool tb,
          const Tensor& c, const GemmMatrix& mc, int64_t batch, double alpha, double beta);
// y (M, N) = act(x (M, K) weight (N, K)^T + bias (N)) on every row (act: identity or max(0, .)); all
// of one dtype (float, or bf16 with FP32 sums and y rounded once, after the bias and act), contiguous.
void linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                    LinearActivation activation);
// The Linear's parameter gradients from dy (M, N) and x (M, K), all of one dtype, contiguous:
// weight_grad (N, K) = dy^T x, written over it (accumulate_weight false) or added into it (true), and
// bias_grad (N) = the column sums of dy, written over it (sum_rows' values: double sums on the CPU).
// CUDA: one cuBLASLt GEMM whose epilogue reduces dy over the GEMM's k = M (float32 sums) where the
// heuristic takes the case; else the GEMM and sum_rows.
void linear_parameter_gradients(const Tensor& dy, const Tensor& x, const Tensor& weight_grad, bool accumulate_weight,
                                const Tensor& bias_grad);
)

}  // namespace sru
