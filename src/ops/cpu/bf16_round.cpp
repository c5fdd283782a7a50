// CPU twin of the float32 -> bfloat16 rounding kernel (ops/bf16_round.h).
#include "ops/bf16_round.h"

#include "core/float16.h"
#include "core/parallel.h"

namespace sru::cpu {

void round_to_bf16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_bits_from_float(in[i]);
}

void round_to_bf16_values(const float* in, float* out, int64_t n) {
  parallel_for(0, n, int64_t{1} << 15, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) out[i] = float_from_bf16_bits(bf16_bits_from_float(in[i]));
  });
}

}  // namespace sru::cpu
