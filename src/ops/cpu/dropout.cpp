// CPU kernel filling a dropout mask from Philox (same function of (seed, offset, index) as on CUDA),
// through the block-wise word generator of core/philox_fill.h. Element j of the mask takes the number
// of element window.global_index(j) (ops/dropout.h: the rows of a batch shard); each run of elements
// inside one span is a contiguous range of global indices.
#include <algorithm>

#include "core/parallel.h"
#include "core/philox.h"
#include "core/philox_fill.h"
#include "ops/dropout.h"

namespace sru::cpu {

void fill_dropout_mask(uint64_t seed, uint64_t offset, double p, const Tensor& mask, const MaskWindow& window) {
  SRU_DISPATCH_FLOATING(mask.dtype(), "dropout_mask", [&]<typename T>() {
    T* m = mask.data<T>();
    const T keep = static_cast<T>(1.0 / (1.0 - p));
    const float threshold = static_cast<float>(p);
    parallel_for(0, mask.numel(), kParallelGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi;) {
        const int64_t end = std::min(hi, (j / window.span + 1) * window.span);  // the end of j's span
        const int64_t global = window.global_index(j);
        philox::for_each_element_words<1>(seed, offset, global, global + (end - j), [&](int64_t g, const uint32_t* w) {
          m[j + (g - global)] = philox::u32_to_unit_float(w[0]) >= threshold ? keep : T(0);
        });
        j = end;
      }
    });
  });
}

}  // namespace sru::cpu
