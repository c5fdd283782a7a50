// CPU twin of the float32 -> bfloat16 rounding kernel (ops/bf16_round.h).
#include "ops/bf16_round.h"

#include "core/float16.h"

namespace sru::cpu {

void round_to_bf16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_bits_from_float(in[i]);
}

}  // namespace sru::cpu
