// The fused LSTM recurrence's row kernels compiled for AVX2 (this file gets -mavx2, no FMA); chosen at
// run time by cpu/lstm_recurrence.cpp when the processor supports it.
#define SRU_KERNEL_NAMESPACE avx2
#include "ops/cpu/lstm_row_kernels.h"
