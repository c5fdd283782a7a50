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
//            our own kernel, products summed in FP32: on CUDA devices BF16 tensor cores, on the CPU
//            (its twin) float32 copies of the rounded operands through sgemm, so a bf16 run computes
//            the same products on either device (on the CPU slower than fp32: no BF16 BLAS in Debian's
//            OpenBLAS). (PyTorch documents medium as bfloat16 where a fast algorithm exists, but its
//            CUDA matmuls run medium as TF32: compare with it at highest or high.)
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

// BLAS and cuBLAS take int sizes: both kernels refuse M, N, K, the leading dimensions (ca, cb, N) or
// the batch count over 2^31 - 1, naming which, instead of letting them wrap.
void check_gemm_sizes(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc, int64_t batch);

// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/matmul.cu) have the same contracts, tensors on one
// CUDA device.
SRU_DECLARE_KERNELS(
// c = alpha * op(a) @ op(b) + beta * c for row-major matrices a (ra, ca), b (rb, cb), c (M, N), `batch`
// of them stored back to back. beta = 0 ignores c's previous contents.
void gemm(const Tensor& a, int64_t ra, int64_t ca, bool ta, const Tensor& b, int64_t rb, int64_t cb, bool tb,
          const Tensor& c, int64_t batch, double alpha, double beta);
)

}  // namespace sru
