// Rounding arrays of float32 values to bfloat16 (round to nearest, ties to even: core/float16.h), the
// conversion the GEMMs at matmul precision medium apply to their operands before cuBLAS reads them as
// CUDA_R_16BF (ops/cuda/matmul.cu). out[i] = bf16_bits_from_float(in[i]) for i < n.
// The CUDA twin (ops/cuda/bf16_round.cu) rounds with the hardware's cvt.rn.bf16x2.f32 and is checked
// bit for bit against this CPU loop by the parity test.
#pragma once

#include <cstdint>

namespace sru {

namespace cpu {
void round_to_bf16(const float* in, uint16_t* out, int64_t n);
}  // namespace cpu

namespace cuda {
// in and out on CUDA device `device`; queued on that device's stream.
void round_to_bf16(const float* in, uint16_t* out, int64_t n, int device);
}  // namespace cuda

}  // namespace sru
