// The fused LSTM recurrence's row kernels compiled for AVX-512 (AVX-512F/BW/VL, 512-bit vectors; the
// file also gets -ffp-contract=off: AVX-512F has fused multiply-adds, which would round differently
// from the other builds); chosen at run time by cpu/lstm_recurrence.cpp when the processor supports
// it. Same results as the baseline and AVX2 builds, to the bit.
//
// Only the kernels are compiled for AVX-512 (a target region): the headers they use are included
// first, for the baseline, so that no inline function they define gets an AVX-512 body that the
// linker could keep for the whole program (as in cpu/sru_recurrence_avx512.cpp).
#include <cstdint>
#include <type_traits>

#include "core/float16.h"
#include "ops/cpu/avx512_region.h"
#include "ops/cpu/lstm_rows.h"
#include "ops/lstm_math.h"

SRU_AVX512_REGION_BEGIN

#define SRU_KERNEL_NAMESPACE avx512
#include "ops/cpu/lstm_row_kernels.h"

SRU_AVX512_REGION_END
