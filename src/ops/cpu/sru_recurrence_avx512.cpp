// The fused SRU recurrence kernels compiled for AVX-512 (this file gets -mavx512f -mavx512bw
// -mavx512vl, 512-bit vectors, and -ffp-contract=off: AVX512F has fused multiply-adds, which would
// round differently from the other builds); chosen at run time by cpu/sru_recurrence.cpp when the
// processor supports it. Same results as the baseline and AVX2 builds, to the bit.
#define SRU_KERNEL_NAMESPACE avx512
#include "ops/cpu/sru_recurrence_kernels.h"
