// CPU kernels of dropout: a mask from Philox (same function of (seed, offset, index) as on CUDA), and
// the product with that mask drawn on the fly, through the block-wise word generator of
// core/philox_fill.h (AVX2 where the processor has it), a run of words at a time. Element j takes the number of element window.global_index(j) (ops/dropout.h: the
// rows of a batch shard); each run of elements inside one span is a contiguous range of global indices.
#include <algorithm>

#include "core/parallel.h"
#include "core/philox.h"
#include "core/philox_fill.h"
#include "ops/dropout.h"

namespace sru::cpu {

namespace {
// Calls f(j, count, words) for consecutive runs of elements [j, j + count) covering [0, n), words[k] the
// Philox word of element window.global_index(j + k): the runs stay inside one span (contiguous global
// indices) and one word buffer, so each kernel's loop over a run is a plain array loop that vectorises.
template <typename F>
void for_each_word_run(uint64_t seed, uint64_t offset, int64_t n, const MaskWindow& window, const F& f) {
  parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) {
    uint32_t words[philox::kFillChunk];
    for (int64_t j = lo; j < hi;) {
      const int64_t span_end = std::min(hi, (j / window.span + 1) * window.span);  // the end of j's span
      const int64_t end = std::min(span_end, j + philox::kFillChunk);
      const int64_t global = window.global_index(j);
      philox::fill_u32(seed, offset, global, global + (end - j), words);
      f(j, end - j, words);
      j = end;
    }
  });
}

// Whether an element with Philox word w is kept at drop probability p (its uniform >= p).
inline bool kept(uint32_t w, float threshold) { return philox::u32_to_unit_float(w) >= threshold; }

// The loops over one run, out of line with restrict arrays and the scalars by value: inside the
// lambdas, a store through y might alias the captured keep and threshold, which kept GCC from
// vectorising them (6 ns an element, against 1.7 here).
template <typename T>
__attribute__((noinline)) void mask_run(T* __restrict m, const uint32_t* __restrict words, int64_t count, T keep,
                                        float threshold) {
  for (int64_t k = 0; k < count; ++k) m[k] = kept(words[k], threshold) ? keep : T(0);
}
template <typename T, typename C>
__attribute__((noinline)) void apply_run(const T* __restrict x, T* __restrict y, const uint32_t* __restrict words,
                                         int64_t count, C keep, float threshold) {
  for (int64_t k = 0; k < count; ++k) y[k] = T(C(x[k]) * (kept(words[k], threshold) ? keep : C(0)));
}
}  // namespace

void fill_dropout_mask(uint64_t seed, PhiloxOffset draw, double p, const Tensor& mask, const MaskWindow& window) {
  const uint64_t offset = draw.value();  // base, if any, is host memory here
  SRU_DISPATCH_FLOATING(mask.dtype(), "dropout_mask", [&]<typename T>() {
    T* m = mask.data<T>();
    const T keep = static_cast<T>(1.0 / (1.0 - p));
    const float threshold = static_cast<float>(p);
    for_each_word_run(seed, offset, mask.numel(), window, [&](int64_t j, int64_t count, const uint32_t* words) {
      mask_run<T>(m + j, words, count, keep, threshold);
    });
  });
}

void apply_dropout(uint64_t seed, PhiloxOffset draw, double p, const Tensor& in, const Tensor& out, const MaskWindow& window) {
  const uint64_t offset = draw.value();
  SRU_DISPATCH_FLOATING_BF16(in.dtype(), "dropout", [&]<typename T>() {
    using C = compute_t<T>;
    const T* x = in.data<T>();
    T* y = out.data<T>();
    const C keep = static_cast<C>(1.0 / (1.0 - p));
    const float threshold = static_cast<float>(p);
    // A product with 0 where dropped (not a 0 written), as the stored mask's: NaN and inf stay visible.
    for_each_word_run(seed, offset, in.numel(), window, [&](int64_t j, int64_t count, const uint32_t* words) {
      apply_run<T, C>(x + j, y + j, words, count, keep, threshold);
    });
  });
}

}  // namespace sru::cpu
