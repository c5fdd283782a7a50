// The fused SRU recurrence kernels compiled for AVX-512 (AVX-512F/BW/VL, 512-bit vectors; the file
// also gets -ffp-contract=off: AVX-512F has fused multiply-adds, which would round differently from the
// other builds); chosen at run time by cpu/sru_recurrence.cpp when the processor supports it. Same
// results as the baseline and AVX2 builds, to the bit.
//
// Only the kernels are compiled for AVX-512 (a target region, not a file-wide -mavx512f): the headers
// they use are included first, for the baseline, so that no inline function or template they define
// (Tensor::data, the error helpers, the standard library) gets an AVX-512 body that the linker could
// keep for the whole program and run on a processor without AVX-512.
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/avx512_region.h"
#include "ops/sru_math.h"
#include "ops/sru_recurrence.h"

SRU_AVX512_REGION_BEGIN

#define SRU_KERNEL_NAMESPACE avx512
#include "ops/cpu/sru_recurrence_kernels.h"

SRU_AVX512_REGION_END
