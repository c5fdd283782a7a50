// CUDA kernels of the optimisers and of gradient clipping (contracts in optim/optimizer.h; CPU twins in
// optim/cpu/optimizer.cpp).
// optimizer_update: a multi-tensor launch (apex's multi_tensor_apply and PyTorch's fused Adam do the
// same) per up to kMaxTensorsPerLaunch parameters: their pointers and sizes travel in one kernel
// argument (TensorTable), each tensor cut into chunks of kChunk elements; CUDA block c (grid-stride)
// finds its tensor by binary search over the chunk offsets and its threads run update_element
// (optim/optimizer_math.h, the code the CPU loop runs) over the chunk in double arithmetic, each
// gradient multiplied first by the clip factor it reads on the device (clip[1], as the gradient's
// dtype, when it is not 1). Reads g, w, s0, s1 and writes w, s0, s1: 28 bytes an element for f32 Adam.
// optimizer_update_segments: the same over a flat group's whole buffers in one launch, whatever the
// number of members: CUDA block c takes piece c of the segment table (SegmentRow rows in device memory,
// made once by the optimiser; binary search over first_piece, the rows' settings applied), so the
// launch carries no pointer table and no limit on the tensors.
// Clipping, with no value leaving the device: sum_squares_blocks writes the sum of g[i]^2 over each
// 64 Ki-element block of each gradient into its place in one partial buffer (one CUDA block per block,
// fixed-tree reduction in double; the same table, one launch per up to kMaxTensorsPerLaunch
// gradients), sum_squares_segments the same over a flat gradient buffer's members in one launch (its
// segment table's pieces are the blocks); finish_grad_norm adds the partial sums in order on one thread (as the CPU does) and
// writes the norm and the clip factor; scale_by_clip_factor (clip_grad_norm's own scaling, outside the
// training step) multiplies one gradient by the factor it reads on the device.
#include "ops/cuda/kernel_util.cuh"
#include "optim/optimizer.h"

namespace sru::optim::cuda {

namespace {

constexpr long long kChunk = kUpdatePiece;  // elements of one tensor per CUDA block of the update

// The tensors of one multi-tensor launch, passed by value as the kernel's argument (2.3 KiB for 48;
// __grid_constant__, so that indexing it by a run-time tensor number reads the argument in place
// instead of copying it to each thread's local memory).
template <typename T>
struct TensorTable {
  T* w[kMaxTensorsPerLaunch];
  const T* g[kMaxTensorsPerLaunch];
  T* s0[kMaxTensorsPerLaunch];
  T* s1[kMaxTensorsPerLaunch];
  long long n[kMaxTensorsPerLaunch];
  long long first[kMaxTensorsPerLaunch + 1];  // pieces (chunks or norm blocks) before tensor k; [count] = all
  int count;
};

// The tensor that piece c belongs to: the largest k with first[k] <= c (tensors of no pieces are skipped).
template <typename T>
__device__ int tensor_of_piece(const TensorTable<T>& t, long long c) {
  int lo = 0, hi = t.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (t.first[mid] <= c) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// g * f rounded to T as a store would round it: the intrinsics are never contracted into a fused
// multiply-add with the update's arithmetic (nvcc contracts by default), so the folded factor equals
// the scaling pass's to the bit in float64 too.
__device__ inline float rounded_product(float g, float f) { return __fmul_rn(g, f); }
__device__ inline double rounded_product(double g, double f) { return __dmul_rn(g, f); }

template <OptimizerKind K, typename T>
__global__ void update_many_kernel(const __grid_constant__ TensorTable<T> t, const StepScalarsSource source,
                                   const double* clip) {
  const double factor = clip ? clip[1] : 1.0;
  if (skips_update(factor)) return;
  const StepScalars o = source.get();
  const T f = static_cast<T>(factor);
  SRU_ROW_STRIDE(c, t.first[t.count]) {
    const int k = tensor_of_piece(t, c);
    const long long begin = (c - t.first[k]) * kChunk, end = begin + kChunk < t.n[k] ? begin + kChunk : t.n[k];
    T* w = t.w[k];
    const T* g = t.g[k];
    T* s0 = t.s0[k];
    T* s1 = t.s1[k];
    for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const T grad = factor == 1.0 ? g[i] : rounded_product(g[i], f);
      update_element<K, T>(w[i], grad, s0[i], s1[i], o);
    }
  }
}

template <OptimizerKind K, typename T>
__global__ void update_segments_kernel(T* w, const T* g, T* s0, T* s1, const SegmentRow* rows, int count,
                                       long long piece, long long pieces, const StepScalarsSource source,
                                       const double* clip) {
  const double factor = clip ? clip[1] : 1.0;
  if (skips_update(factor)) return;
  const StepScalars scalars = source.get();
  const T f = static_cast<T>(factor);
  SRU_ROW_STRIDE(c, pieces) {
    const SegmentPiece at = segment_piece(rows, count, c, piece);
    StepScalars o = scalars;
    if (at.row.flags & kSegmentNoWeightDecay) o.wd = 0.0;
    for (long long i = at.row.offset + at.begin + threadIdx.x; i < at.row.offset + at.end; i += blockDim.x) {
      const T grad = factor == 1.0 ? g[i] : rounded_product(g[i], f);
      update_element<K, T>(w[i], grad, s0[i], s1[i], o);
    }
  }
}

template <typename T>
__global__ void block_squares_segments_kernel(const T* g, const SegmentRow* rows, int count, long long block,
                                              long long pieces, double* out) {
  __shared__ double shared[sru::cuda::kBlock];
  SRU_ROW_STRIDE(c, pieces) {
    const SegmentPiece at = segment_piece(rows, count, c, block);
    const T* member = g + at.row.offset;
    double s = 0.0;
    for (long long i = at.begin + threadIdx.x; i < at.end; i += sru::cuda::kBlock) s += static_cast<double>(member[i]) * member[i];
    s = sru::cuda::block_sum(s, shared);
    if (threadIdx.x == 0) out[c] = s;
  }
}

template <typename T>
__global__ void block_squares_many_kernel(const __grid_constant__ TensorTable<T> t, long long block, double* out) {
  __shared__ double shared[sru::cuda::kBlock];
  SRU_ROW_STRIDE(b, t.first[t.count]) {
    const int k = tensor_of_piece(t, b);
    const long long begin = (b - t.first[k]) * block, end = begin + block < t.n[k] ? begin + block : t.n[k];
    const T* g = t.g[k];
    double s = 0.0;
    for (long long i = begin + threadIdx.x; i < end; i += sru::cuda::kBlock) s += static_cast<double>(g[i]) * g[i];
    s = sru::cuda::block_sum(s, shared);
    if (threadIdx.x == 0) out[b] = s;
  }
}

// Fills tables of up to kMaxTensorsPerLaunch tensors from the lists in order (w, s0, s1 may be
// empty: the norm reads g only), each tensor cut into pieces of `piece` elements, and calls
// launch(table) for each; tensors without elements are left out.
template <typename T, typename Launch>
void for_each_table(const std::vector<Tensor>& w, const std::vector<Tensor>& g, const std::vector<Tensor>& s0,
                    const std::vector<Tensor>& s1, long long piece, const Launch& launch) {
  TensorTable<T> t{};
  const auto flush = [&] {
    if (t.count > 0) launch(t);
    t = TensorTable<T>{};
  };
  for (size_t k = 0; k < g.size(); ++k) {
    const long long n = g[k].numel();
    if (n == 0) continue;
    const int i = t.count;
    t.g[i] = g[k].data<T>();
    if (!w.empty()) {
      t.w[i] = w[k].data<T>();
      t.s0[i] = s0[k].data<T>();
      t.s1[i] = s1[k].data<T>();
    }
    t.n[i] = n;
    t.first[i + 1] = t.first[i] + (n + piece - 1) / piece;
    if (++t.count == kMaxTensorsPerLaunch) flush();
  }
  flush();
}

// loss: the step's loss (0-d) or null.
template <typename L>
__global__ void finish_norm_kernel(const double* partial, long long n, double max_norm, GradScaleSource grad_scale,
                                   const L* loss, double* result) {
  double total = 0.0;
  for (long long i = 0; i < n; ++i) total += partial[i];
  finish_norm_and_factor(total, max_norm, grad_scale.get(), loss == nullptr || isfinite(static_cast<double>(*loss)), result);
}

template <typename T>
__global__ void scale_kernel(T* g, long long n, const double* result) {
  const double factor = result[1];
  if (factor == 1.0 || skips_update(factor)) return;
  const T f = static_cast<T>(factor);
  SRU_GRID_STRIDE(i, n) g[i] *= f;
}

}  // namespace

void optimizer_update(OptimizerKind kind, const std::vector<Tensor>& p, const std::vector<Tensor>& g,
                      const std::vector<Tensor>& s0, const std::vector<Tensor>& s1, const StepScalarsSource& scalars,
                      const Tensor& clip) {
  if (p.empty()) return;
  const cudaStream_t stream = sru::cuda::stream_of(p.front());
  const double* factor = clip.defined() ? clip.data<double>() : nullptr;
  SRU_DISPATCH_FLOATING(p.front().dtype(), "optimizer step", [&]<typename T>() {
    with_optimizer_kind(kind, [&]<OptimizerKind K>() {
      for_each_table<T>(p, g, s0, s1, kChunk, [&](const TensorTable<T>& t) {
        update_many_kernel<K, T><<<sru::cuda::rows_grid(t.first[t.count]), sru::cuda::kBlock, 0, stream>>>(t, scalars, factor);
        SRU_CUDA_LAUNCH_CHECK("optimizer update_many_kernel");
      });
    });
  });
}

void optimizer_update_segments(OptimizerKind kind, const Tensor& p, const Tensor& g, const Tensor& s0,
                               const Tensor& s1, const Tensor& segments, int64_t piece, int64_t pieces,
                               const StepScalarsSource& scalars, const Tensor& clip) {
  if (pieces == 0) return;
  const cudaStream_t stream = sru::cuda::stream_of(p);
  const double* factor = clip.defined() ? clip.data<double>() : nullptr;
  const auto* rows = reinterpret_cast<const SegmentRow*>(segments.data<int64_t>());
  const int count = static_cast<int>(segments.size(0));
  SRU_DISPATCH_FLOATING(p.dtype(), "optimizer step", [&]<typename T>() {
    with_optimizer_kind(kind, [&]<OptimizerKind K>() {
      update_segments_kernel<K, T><<<sru::cuda::rows_grid(pieces), sru::cuda::kBlock, 0, stream>>>(
          p.data<T>(), g.data<T>(), s0.data<T>(), s1.data<T>(), rows, count, piece, pieces, scalars, factor);
      SRU_CUDA_LAUNCH_CHECK("optimizer update_segments_kernel");
    });
  });
}

void sum_squares_segments(const Tensor& g, const Tensor& segments, int64_t block_size, int64_t pieces,
                          const Tensor& partial) {
  if (pieces == 0) return;
  const auto* rows = reinterpret_cast<const SegmentRow*>(segments.data<int64_t>());
  const int count = static_cast<int>(segments.size(0));
  SRU_DISPATCH_FLOATING(g.dtype(), "clip_grad_norm", [&]<typename T>() {
    block_squares_segments_kernel<<<sru::cuda::rows_grid(pieces), sru::cuda::kBlock, 0, sru::cuda::stream_of(partial)>>>(
        g.data<T>(), rows, count, block_size, pieces, partial.data<double>());
    SRU_CUDA_LAUNCH_CHECK("block_squares_segments_kernel");
  });
}

void sum_squares_blocks(const std::vector<Tensor>& grads, int64_t block_size, const Tensor& partial) {
  if (grads.empty()) return;
  const cudaStream_t stream = sru::cuda::stream_of(partial);
  double* out = partial.data<double>();
  SRU_DISPATCH_FLOATING(grads.front().dtype(), "clip_grad_norm", [&]<typename T>() {
    for_each_table<T>({}, grads, {}, {}, block_size, [&](const TensorTable<T>& t) {
      block_squares_many_kernel<<<sru::cuda::rows_grid(t.first[t.count]), sru::cuda::kBlock, 0, stream>>>(t, block_size, out);
      SRU_CUDA_LAUNCH_CHECK("block_squares_many_kernel");
      out += t.first[t.count];
    });
  });
}

void finish_grad_norm(const Tensor& partial, double max_norm, const GradScaleSource& grad_scale, const Tensor& loss,
                      const Tensor& result) {
  const cudaStream_t stream = sru::cuda::stream_of(result);
  if (!loss.defined()) {
    finish_norm_kernel<double><<<1, 1, 0, stream>>>(partial.data<double>(), partial.numel(), max_norm, grad_scale,
                                                    nullptr, result.data<double>());
  } else {
    SRU_DISPATCH_FLOATING(loss.dtype(), "finish_grad_norm", [&]<typename L>() {
      finish_norm_kernel<L><<<1, 1, 0, stream>>>(partial.data<double>(), partial.numel(), max_norm, grad_scale,
                                                 loss.data<L>(), result.data<double>());
    });
  }
  SRU_CUDA_LAUNCH_CHECK("finish_norm_kernel");
}

void scale_by_clip_factor(const Tensor& g, const Tensor& result) {
  const long long n = g.numel();
  if (n == 0) return;
  SRU_DISPATCH_FLOATING(g.dtype(), "clip_grad_norm", [&]<typename T>() {
    scale_kernel<<<sru::cuda::grid_for(n), sru::cuda::kBlock, 0, sru::cuda::stream_of(g)>>>(g.data<T>(), n,
                                                                                             result.data<double>());
    SRU_CUDA_LAUNCH_CHECK("scale_kernel");
  });
}

}  // namespace sru::optim::cuda
