// The fused SRU recurrence kernels compiled for AVX2 (this file gets -mavx2); chosen at run time by
// cpu/sru_recurrence.cpp when the processor supports it.
#define SRU_KERNEL_NAMESPACE avx2
#include "ops/cpu/sru_recurrence_kernels.h"
