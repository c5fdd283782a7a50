// SRU_AVX512_REGION_BEGIN / SRU_AVX512_REGION_END: every function between them is compiled for AVX-512
// F/BW/VL with 512-bit vectors (GCC's prefer-vector-width=512), the rest of the file for the baseline.
// The recurrences' AVX-512 builds (cpu/sru_recurrence_avx512.cpp, cpu/lstm_recurrence_avx512.cpp)
// include their headers first and put only the kernels inside, so that no inline function or template
// of a header gets an AVX-512 body that the linker could keep for the whole program.
#pragma once

#if defined(__clang__)
#define SRU_AVX512_REGION_BEGIN \
  _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512vl\"))), apply_to = function)")
#define SRU_AVX512_REGION_END _Pragma("clang attribute pop")
#else
#define SRU_AVX512_REGION_BEGIN \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512bw,avx512vl,prefer-vector-width=512\")")
#define SRU_AVX512_REGION_END _Pragma("GCC pop_options")
#endif
