// CPU kernel of the selection ops (see ops/select.h). The condition repeats every cond.numel()
// elements (trailing-dim broadcasting) and may be of any dtype; the values f32, f64 or bf16 (a fill value
// rounded once to bf16).
#include "core/parallel.h"
#include "ops/select.h"

namespace sru::cpu {

void select(const Tensor& cond, const Tensor& a, double a_value, const Tensor& b, double b_value, const Tensor& out) {
  const int64_t n = out.numel(), nc = cond.numel();
  if (n == 0) return;
  SRU_DISPATCH_FLOATING_BF16(out.dtype(), "select", [&]<typename T>() {
    SRU_DISPATCH_ALL(cond.dtype(), "select condition", [&]<typename C>() {
      const C* pc = cond.data<C>();
      const T* pa = a.defined() ? a.data<T>() : nullptr;
      const T* pb = b.defined() ? b.data<T>() : nullptr;
      const T va = static_cast<T>(a_value), vb = static_cast<T>(b_value);
      T* po = out.data<T>();
      parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          const bool take_a = pc[i % nc] != C(0);
          po[i] = take_a ? (pa ? pa[i] : va) : (pb ? pb[i] : vb);
        }
      });
    });
  });
}

}  // namespace sru::cpu
