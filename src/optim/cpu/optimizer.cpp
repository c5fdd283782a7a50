// CPU kernels of the optimisers and of gradient clipping (contracts in optim/optimizer.h; CUDA twins in
// optim/cuda/optimizer.cu). optimizer_update: update_element (optim/optimizer_math.h) over the elements
// of each parameter of the group in turn, split across threads, one loop per optimiser kind (a template
// parameter, so that each is branch-free and vectorises); optimizer_update_segments the same loop over
// each piece of a segment table's members, split across threads by piece. Clipping: sums of squares per
// fixed block in double, then the blocks added in order, so the norm does not depend on the thread count.
#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "optim/optimizer.h"

namespace sru::optim::cpu {

namespace {

// update_element over w[lo, hi) and the same elements of grad, m0, m1, each gradient multiplied by the
// clip factor f (as its dtype, as clip_grad_norm's scaling pass would) unless the factor is 1.
template <OptimizerKind K, typename T>
void update_range(T* __restrict w, const T* __restrict grad, T* __restrict m0, T* __restrict m1, int64_t lo,
                  int64_t hi, const StepScalars scalars, double factor) {
  const T f = static_cast<T>(factor);
  if (factor == 1.0)
    for (int64_t i = lo; i < hi; ++i) update_element<K, T>(w[i], grad[i], m0[i], m1[i], scalars);
  else
    for (int64_t i = lo; i < hi; ++i) update_element<K, T>(w[i], static_cast<T>(grad[i] * f), m0[i], m1[i], scalars);
}

}  // namespace

void optimizer_update(OptimizerKind kind, const std::vector<Tensor>& p, const std::vector<Tensor>& g,
                      const std::vector<Tensor>& s0, const std::vector<Tensor>& s1, const StepScalarsSource& source,
                      const Tensor& clip) {
  const double factor = clip.defined() ? clip.data<double>()[1] : 1.0;
  const StepScalars sc = source.get();
  if (skips_update(factor)) return;
  for (size_t k = 0; k < p.size(); ++k) {
    SRU_DISPATCH_FLOATING(p[k].dtype(), "optimizer step", [&]<typename T>() {
      T* w = p[k].data<T>();
      const T* grad = g[k].data<T>();
      T* m0 = s0[k].data<T>();
      T* m1 = s1[k].data<T>();
      with_optimizer_kind(kind, [&]<OptimizerKind K>() {
        parallel_for(0, p[k].numel(), kParallelGrain, [&](int64_t lo, int64_t hi) {
          update_range<K, T>(w, grad, m0, m1, lo, hi, sc, factor);
        });
      });
    });
  }
}

void optimizer_update_segments(OptimizerKind kind, const Tensor& p, const Tensor& g, const Tensor& s0,
                               const Tensor& s1, const Tensor& segments, int64_t piece, int64_t pieces,
                               const StepScalarsSource& source, const Tensor& clip) {
  const double factor = clip.defined() ? clip.data<double>()[1] : 1.0;
  const StepScalars sc = source.get();
  if (skips_update(factor)) return;
  const auto* rows = reinterpret_cast<const SegmentRow*>(segments.data<int64_t>());
  const int count = static_cast<int>(segments.size(0));
  SRU_DISPATCH_FLOATING(p.dtype(), "optimizer step", [&]<typename T>() {
    T* w = p.data<T>();
    const T* grad = g.data<T>();
    T* m0 = s0.data<T>();
    T* m1 = s1.data<T>();
    with_optimizer_kind(kind, [&]<OptimizerKind K>() {
      parallel_for(0, pieces, std::max<int64_t>(1, kParallelGrain / piece), [&](int64_t lo, int64_t hi) {
        for (int64_t c = lo; c < hi; ++c) {
          const SegmentPiece at = segment_piece(rows, count, c, piece);
          const int64_t offset = at.row.offset;
          StepScalars scalars = sc;
          if (at.row.flags & kSegmentNoWeightDecay) scalars.wd = 0.0;
          update_range<K, T>(w + offset, grad + offset, m0 + offset, m1 + offset, at.begin, at.end, scalars, factor);
        }
      });
    });
  });
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

void sum_squares_segments(const Tensor& g, const Tensor& segments, int64_t block_size, int64_t pieces,
                          const Tensor& partial) {
  const auto* rows = reinterpret_cast<const SegmentRow*>(segments.data<int64_t>());
  const int count = static_cast<int>(segments.size(0));
  double* out = partial.data<double>();
  SRU_DISPATCH_FLOATING(g.dtype(), "clip_grad_norm", [&]<typename T>() {
    const T* d = g.data<T>();
    parallel_for(0, pieces, 2, [&](int64_t lo, int64_t hi) {
      for (int64_t c = lo; c < hi; ++c) {
        const SegmentPiece at = segment_piece(rows, count, c, block_size);
        const T* member = d + at.row.offset;
        double s = 0.0;
        for (int64_t i = at.begin; i < at.end; ++i) s += static_cast<double>(member[i]) * member[i];
        out[c] = s;
      }
    });
  });
}

void finish_grad_norm(const Tensor& partial, double max_norm, const GradScaleSource& grad_scale, const Tensor& loss,
                      const Tensor& result) {
  const double* p = partial.data<double>();
  double total = 0.0;
  for (int64_t i = 0; i < partial.numel(); ++i) total += p[i];
  bool loss_finite = true;
  if (loss.defined())
    SRU_DISPATCH_FLOATING(loss.dtype(), "finish_grad_norm", [&]<typename T>() { loss_finite = std::isfinite(*loss.data<T>()); });
  finish_norm_and_factor(total, max_norm, grad_scale.get(), loss_finite, result.data<double>());
}

void scale_by_clip_factor(const Tensor& g, const Tensor& result) {
  const double factor = result.data<double>()[1];
  if (factor == 1.0 || skips_update(factor)) return;
  Tensor(g).mul_(factor);
}

}  // namespace sru::optim::cpu
