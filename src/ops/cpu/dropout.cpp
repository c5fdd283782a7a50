// CPU kernel filling a dropout mask from Philox (same function of (seed, offset, index) as on CUDA),
// through the block-wise word generator of core/philox_fill.h.
#include "core/parallel.h"
#include "core/philox.h"
#include "core/philox_fill.h"
#include "ops/dropout.h"

namespace sru::cpu {

void fill_dropout_mask(uint64_t seed, uint64_t offset, double p, const Tensor& mask) {
  SRU_DISPATCH_FLOATING(mask.dtype(), "dropout_mask", [&]<typename T>() {
    T* m = mask.data<T>();
    const T keep = static_cast<T>(1.0 / (1.0 - p));
    const float threshold = static_cast<float>(p);
    parallel_for(0, mask.numel(), kParallelGrain, [&](int64_t lo, int64_t hi) {
      philox::for_each_element_words<1>(seed, offset, lo, hi, [&](int64_t i, const uint32_t* w) {
        m[i] = philox::u32_to_unit_float(w[0]) >= threshold ? keep : T(0);
      });
    });
  });
}

}  // namespace sru::cpu
