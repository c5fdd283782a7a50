// SRU_HD marks functions compiled for both host and device, so CPU and CUDA paths share one definition.
#pragma once

#if defined(__CUDACC__)
#define SRU_HD __host__ __device__ __forceinline__
#else
#define SRU_HD inline
#endif
