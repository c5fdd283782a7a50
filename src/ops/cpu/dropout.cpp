// CPU kernels of dropout: a mask from Philox (same function of (seed, offset, index) as on CUDA), and
// the product with that mask drawn on the fly, through the block-wise word generator of
// core/philox_fill.h. Element j takes the number of element window.global_index(j) (ops/dropout.h: the
// rows of a batch shard); each run of elements inside one span is a contiguous range of global indices.
#include <algorithm>

#include "core/parallel.h"
#include "core/philox.h"
#include "core/philox_fill.h"
#include "ops/dropout.h"

namespace sru::cpu {

namespace {
// Calls f(j, kept) for j in [0, n), kept: the Philox uniform of window.global_index(j) is >= p.
template <typename F>
void for_each_keep(uint64_t seed, uint64_t offset, double p, int64_t n, const MaskWindow& window, const F& f) {
  const float threshold = static_cast<float>(p);
  parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi;) {
      const int64_t end = std::min(hi, (j / window.span + 1) * window.span);  // the end of j's span
      const int64_t global = window.global_index(j);
      philox::for_each_element_words<1>(seed, offset, global, global + (end - j), [&](int64_t g, const uint32_t* w) {
        f(j + (g - global), philox::u32_to_unit_float(w[0]) >= threshold);
      });
      j = end;
    }
  });
}
}  // namespace

void fill_dropout_mask(uint64_t seed, uint64_t offset, double p, const Tensor& mask, const MaskWindow& window) {
  SRU_DISPATCH_FLOATING(mask.dtype(), "dropout_mask", [&]<typename T>() {
    T* m = mask.data<T>();
    const T keep = static_cast<T>(1.0 / (1.0 - p));
    for_each_keep(seed, offset, p, mask.numel(), window, [&](int64_t j, bool kept) { m[j] = kept ? keep : T(0); });
  });
}

void apply_dropout(uint64_t seed, uint64_t offset, double p, const Tensor& in, const Tensor& out, const MaskWindow& window) {
  SRU_DISPATCH_FLOATING_BF16(in.dtype(), "dropout", [&]<typename T>() {
    using C = compute_t<T>;
    const T* x = in.data<T>();
    T* y = out.data<T>();
    const C keep = static_cast<C>(1.0 / (1.0 - p));
    // A product with 0 where dropped (not a 0 written), as the stored mask's: NaN and inf stay visible.
    for_each_keep(seed, offset, p, in.numel(), window,
                  [&](int64_t j, bool kept) { y[j] = T(C(x[j]) * (kept ? keep : C(0))); });
  });
}

}  // namespace sru::cpu
