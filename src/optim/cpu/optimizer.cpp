// CPU kernels of the optimisers and of gradient clipping (contracts in optim/optimizer.h; CUDA twins in
// optim/cuda/optimizer.cu). optimizer_update: update_element (optim/optimizer_math.h) over the elements
// of each parameter of the group in turn, split across threads, one loop per optimiser kind (a template
// parameter, so that each is branch-free and vectorises). Clipping: sums of squares per fixed block in
// double, then the blocks added in order, so the norm does not depend on the thread count.
#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "optim/optimizer.h"

namespace sru::optim::cpu {

void optimizer_update(OptimizerKind kind, const std::vector<Tensor>& p, const std::vector<Tensor>& g,
                      const std::vector<Tensor>& s0, const std::vector<Tensor>& s1, const StepScalars& sc,
                      const Tensor& clip) {
  const double factor = clip.defined() ? clip.data<double>()[1] : 1.0;
  for (size_t k = 0; k < p.size(); ++k) {
    SRU_DISPATCH_FLOATING(p[k].dtype(), "optimizer step", [&]<typename T>() {
      T* __restrict w = p[k].data<T>();
      const T* __restrict grad = g[k].data<T>();
      T* __restrict m0 = s0[k].data<T>();
      T* __restrict m1 = s1[k].data<T>();
      const StepScalars scalars = sc;
      // The clip factor as the gradient's dtype, applied as clip_grad_norm's scaling pass would (g *= f).
      const T f = static_cast<T>(factor);
      with_optimizer_kind(kind, [&]<OptimizerKind K>() {
        parallel_for(0, p[k].numel(), kParallelGrain, [&](int64_t lo, int64_t hi) {
          if (factor == 1.0)
            for (int64_t i = lo; i < hi; ++i) update_element<K, T>(w[i], grad[i], m0[i], m1[i], scalars);
          else
            for (int64_t i = lo; i < hi; ++i) update_element<K, T>(w[i], static_cast<T>(grad[i] * f), m0[i], m1[i], scalars);
        });
      });
    });
  }
}

void sum_squares_blocks(const std::vector<Tensor>& grads, int64_t block_size, const Tensor& partial) {
  double* out = partial.data<double>();
  for (const Tensor& g : grads) {
    const int64_t n = g.numel(), blocks = (n + block_size - 1) / block_size;
    SRU_DISPATCH_FLOATING(g.dtype(), "clip_grad_norm", [&]<typename T>() {
      const T* d = g.data<T>();
      parallel_for(0, blocks, 2, [&](int64_t lo, int64_t hi) {
        for (int64_t blk = lo; blk < hi; ++blk) {
          double s = 0.0;
          for (int64_t i = blk * block_size, e = std::min(n, i + block_size); i < e; ++i) s += static_cast<double>(d[i]) * d[i];
          out[blk] = s;
        }
      });
    });
    out += blocks;
  }
}

void finish_grad_norm(const Tensor& partial, double max_norm, double grad_scale, const Tensor& result) {
  const double* p = partial.data<double>();
  double total = 0.0;
  for (int64_t i = 0; i < partial.numel(); ++i) total += p[i];
  finish_norm_and_factor(total, max_norm, grad_scale, result.data<double>());
}

void scale_by_clip_factor(const Tensor& g, const Tensor& result) {
  const double factor = result.data<double>()[1];
  if (factor == 1.0) return;
  Tensor(g).mul_(factor);
}

}  // namespace sru::optim::cpu
