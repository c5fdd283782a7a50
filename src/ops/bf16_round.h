// Rounding arrays of float32 values to bfloat16 (round to nearest, ties to even: core/float16.h), the
// conversion the GEMMs at matmul precision medium apply to their operands before cuBLAS reads them as
// CUDA_R_16BF (ops/cuda/matmul.cu) or sgemm reads them widened back to float32 (ops/cpu/matmul.cpp). out[i] = bf16_bits_from_float(in[i]) for i < n.
// The CUDA twin (ops/cuda/bf16_round.cu) rounds with the hardware's cvt.rn.bf16x2.f32 and is checked
// bit for bit against this CPU loop by the parity test.
#pragma once

#include <cstdint>

namespace sru {

namespace cpu {
void round_to_bf16(const float* in, uint16_t* out, int64_t n);
// The same rounding kept in float32 (out[i] = the bfloat16 value nearest in[i], widened exactly): the
// operands the CPU GEMM hands sgemm at matmul precision medium (ops/cpu/matmul.cpp). Spread over the
// threads for large n.
void round_to_bf16_values(const float* in, float* out, int64_t n);
}  // namespace cpu

namespace cuda {
// in and out on CUDA device `device`; queued on that device's stream.
void round_to_bf16(const float* in, uint16_t* out, int64_t n, int device);
}  // namespace cuda

}  // namespace sru
