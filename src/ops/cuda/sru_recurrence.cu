// CUDA kernels of the fused SRU recurrence (paper Algorithm 1), forward and backward, both directions
// in one launch: grid-stride loops over the thread bodies of ops/sru_recurrence_threads.h (one column a
// thread: B*out threads; with bf16 I/O, d even and the tensors aligned, two neighbouring columns a
// thread: B*out/2), the batch reduction of the weight_c / bias partial sums (deterministic, in a fixed
// order), and the launch choice. Math per element: ops/sru_math.h, the same SRU_HD code the CPU twins
// run (ops/cpu/sru_recurrence_kernels.h); shapes and saved state: ops/sru_recurrence.h. The padding mask
// is first turned into one int per (t, b).
//
// bf16 I/O: the kernels take the compute type T (float) and the storage type S of U, x, h and their
// gradients (bf16); every load widens S to T and every store of those rounds T to S once (core/float16.h,
// the CPU twin's rounding); c, the parameters and the weight_c / bias partial sums stay T. Bytes per
// (t, b, unit), forward + backward: 64 at float32, 36 with bf16 I/O (U 3 + x + h + grad h + grad U 3 +
// grad x at 2 bytes, c written and read at 4).
#include "ops/cuda/kernel_util.cuh"
#include "ops/sru_math.h"
#include "ops/sru_recurrence.h"
#include "ops/sru_recurrence_threads.h"

#include <type_traits>

namespace sru::cuda {

namespace {

using sru_kernels::Args;
using sru_kernels::StepWalk;

// Threads per block of the column kernels: small blocks spread few columns (B*out) over more SMs.
constexpr unsigned kColumnBlock = 64;

// One thread per (batch row, output column): ops/sru_recurrence_threads.h's one-column bodies.
template <typename T, typename S, int K, bool Pad>
__global__ void forward_kernel(Args<T, S> a, S* __restrict__ h, T* __restrict__ c_all, T* __restrict__ c_last) {
  SRU_GRID_STRIDE(idx, a.B * a.out) sru_kernels::column_forward_thread<T, S, K, Pad>(a, idx, h, c_all, c_last);
}

template <typename T, typename S, int K, bool Pad>
__global__ void backward_kernel(Args<T, S> a, const T* __restrict__ c_all, const S* __restrict__ gh,
                                const T* __restrict__ gc_last, S* __restrict__ gU, S* __restrict__ gx,
                                T* __restrict__ gc0, T* __restrict__ part_v, T* __restrict__ part_b /* (B, 2*out) each */) {
  SRU_GRID_STRIDE(idx, a.B * a.out)
    sru_kernels::column_backward_thread<T, S, K, Pad>(a, idx, c_all, gh, gc_last, gU, gx, gc0, part_v, part_b);
}

// bf16 I/O, two neighbouring columns a thread (ops/sru_recurrence_threads.h): B * out / 2 threads. The
// forward kernel is held to 96 registers without padding (ptxas: no spills; the padded variant spilled
// there and gets 128): 20 warps an SM put the paper's char-LM layer (B 128, out 1,312: 2,624 warps) in
// one wave on an H200's 132 SMs, where 120 registers gave 16 warps and 1.24 waves.
template <int K, bool Pad>
__global__ void __launch_bounds__(kColumnBlock, Pad ? 8 : 10) pair_forward_kernel(Args<float, bf16> a, bf16* __restrict__ h, float* __restrict__ c_all,
                                    float* __restrict__ c_last) {
  SRU_GRID_STRIDE(pair, a.B * a.out / 2) sru_kernels::pair_forward_thread<K, Pad>(a, pair, h, c_all, c_last);
}

template <int K, bool Pad>
__global__ void pair_backward_kernel(Args<float, bf16> a, sru_kernels::PairBackwardOutputs o) {
  SRU_GRID_STRIDE(pair, a.B * a.out / 2) sru_kernels::pair_backward_thread<K, Pad>(a, pair, o);
}

// grad_weight_c[i] = sum over b of part_v[b, i] (and grad_bias from part_b). A block per tile of 32
// columns x 32 lanes (grid-stride over tiles): lane y adds rows y, y + 32, ... of its column, then lane
// 0 adds the 32 lane sums in lane order (fixed, so every run gives the same bits; the CPU twin adds b in
// order, within float rounding of this). One thread per column looping over every b ran 2 * out
// threads (2,624 at the paper's d 1312) through B dependent loads each: 87 GB/s, 0.25 ms of an 8.75 ms
// enwik8 step at bf16 on an H200 (2026-11-28); floor of its 2 x B x 2 out x 4 bytes: ~1 us. With 8
// lanes (16 loads a thread at B 128, 82 blocks of 256 threads: under one block an SM) it took 13 us a
// launch (203 GB/s, H200, 2026-11-28 afternoon): latency of the loads in sequence, hence 32 lanes.
constexpr int kReduceColumns = 32, kReduceLanes = 32;

template <typename T>
__global__ void reduce_batch_kernel(const T* part_v, const T* part_b, long long B, long long width, T* gw, T* gb) {
  __shared__ T lane_v[kReduceLanes][kReduceColumns], lane_b[kReduceLanes][kReduceColumns];
  for (long long tile = blockIdx.x; tile * kReduceColumns < width; tile += gridDim.x) {
    const long long i = tile * kReduceColumns + threadIdx.x;
    T sv = T(0), sb = T(0);
    if (i < width)
#pragma unroll 4
      for (long long b = threadIdx.y; b < B; b += kReduceLanes) {
        sv += part_v[b * width + i];
        sb += part_b[b * width + i];
      }
    lane_v[threadIdx.y][threadIdx.x] = sv;
    lane_b[threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y == 0 && i < width) {
      T tv = lane_v[0][threadIdx.x], tb = lane_b[0][threadIdx.x];
      for (int y = 1; y < kReduceLanes; ++y) {
        tv += lane_v[y][threadIdx.x];
        tb += lane_b[y][threadIdx.x];
      }
      gw[i] = tv;
      gb[i] = tb;
    }
    __syncthreads();  // the lane sums are reused by the next tile
  }
}

// Calls launch(K, Pad) with the kernels' compile-time variant for k (3 or 4) and whether there is
// padding, as std::integral_constant values, so that both launches choose their kernel in one place.
template <typename Launch>
void with_variant(int k, bool pad, Launch&& launch) {
  using K3 = std::integral_constant<int, 3>;
  using K4 = std::integral_constant<int, 4>;
  if (k == 4 && pad) launch(K4{}, std::true_type{});
  else if (k == 4) launch(K4{}, std::false_type{});
  else if (pad) launch(K3{}, std::true_type{});
  else launch(K3{}, std::false_type{});
}

template <typename T, typename S>
Args<T, S> args_of(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& pad) {
  return sru_kernels::kernel_args<T, S>(in, o, data_or_null<int32_t>(pad));
}

// Calls run.template operator()<T, S>() with the compute type T and the storage type S of U (float and
// bf16 under bf16 I/O, else both U's dtype).
template <typename Run>
void with_types(DType io, const char* op, Run&& run) {
  if (io == DType::BF16) return run.template operator()<float, bf16>();
  SRU_DISPATCH_FLOATING(io, op, [&]<typename T>() { run.template operator()<T, T>(); });
}

}  // namespace

void sru_recurrence_forward(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& h, const Tensor& c_all,
                            const Tensor& c_last) {
  const Tensor pad = padding_as_int32(in.mask_pad);
  with_types(in.U.dtype(), "sru_recurrence", [&]<typename T, typename S>() {
    const Args<T, S> a = args_of<T, S>(in, o, pad);
    const long long threads = a.B * a.out;
    if (threads == 0) return;
    const cudaStream_t s = stream_of(in.U);
    S* hp = h.data<S>();
    T *cp = c_all.data<T>(), *lp = c_last.data<T>();
    if constexpr (std::is_same_v<S, bf16>) {
      const void* const bf16_tensors[] = {a.U, a.x, hp};
      if (sru_column_pairs() && sru_kernels::column_pairs_fit(a, bf16_tensors, cp)) {
        with_variant(o.k, a.pad != nullptr, [&](auto k, auto pad) {
          pair_forward_kernel<k(), pad()><<<grid_for(threads / 2, kColumnBlock), kColumnBlock, 0, s>>>(a, hp, cp, lp);
        });
        SRU_CUDA_LAUNCH_CHECK("sru pair_forward_kernel");
        return;
      }
    }
    const unsigned grid = grid_for(threads, kColumnBlock);
    with_variant(o.k, a.pad != nullptr, [&](auto k, auto pad) {
      forward_kernel<T, S, k(), pad()><<<grid, kColumnBlock, 0, s>>>(a, hp, cp, lp);
    });
    SRU_CUDA_LAUNCH_CHECK("sru forward_kernel");
  });
}

void sru_recurrence_backward(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& c_all,
                             const Tensor& grad_h, const Tensor& grad_c_last, const Tensor& grad_U,
                             const Tensor& grad_x, const Tensor& grad_weight_c, const Tensor& grad_bias,
                             const Tensor& grad_c0) {
  const Tensor pad = padding_as_int32(in.mask_pad);
  with_types(in.U.dtype(), "sru_recurrence_backward", [&]<typename T, typename S>() {
    const Args<T, S> a = args_of<T, S>(in, o, pad);
    const Shape part_shape{static_cast<int64_t>(a.B), static_cast<int64_t>(2 * a.out)};
    Tensor part_v = Tensor::empty(part_shape, in.weight_c.dtype(), in.U.device());
    Tensor part_b = Tensor::empty(part_shape, in.weight_c.dtype(), in.U.device());
    const cudaStream_t s = stream_of(in.U);
    const long long threads = a.B * a.out;
    if (threads > 0) {
      const unsigned grid = grid_for(threads, kColumnBlock);
      S *gU = grad_U.data<S>(), *gx = data_or_null<S>(grad_x);
      T* gc0 = data_or_null<T>(grad_c0);
      T *pv = part_v.data<T>(), *pb = part_b.data<T>();
      const T *c = c_all.data<T>(), *gc_last = data_or_null<T>(grad_c_last);
      const S* gh = grad_h.data<S>();
      bool paired = false;
      if constexpr (std::is_same_v<S, bf16>) {
        const void* const bf16_tensors[] = {a.U, a.x, gh, gU, gx};
        paired = sru_column_pairs() && sru_kernels::column_pairs_fit(a, bf16_tensors, c);
        if (paired) {
          const sru_kernels::PairBackwardOutputs out{c, gh, gc_last, gU, gx, gc0, pv, pb};
          with_variant(o.k, a.pad != nullptr, [&](auto k, auto pad) {
            pair_backward_kernel<k(), pad()><<<grid_for(threads / 2, kColumnBlock), kColumnBlock, 0, s>>>(a, out);
          });
          SRU_CUDA_LAUNCH_CHECK("sru pair_backward_kernel");
        }
      }
      if (!paired) {
        with_variant(o.k, a.pad != nullptr, [&](auto k, auto pad) {
          backward_kernel<T, S, k(), pad()><<<grid, kColumnBlock, 0, s>>>(a, c, gh, gc_last, gU, gx, gc0, pv, pb);
        });
        SRU_CUDA_LAUNCH_CHECK("sru backward_kernel");
      }
    }
    const long long tiles = (2 * a.out + kReduceColumns - 1) / kReduceColumns;
    reduce_batch_kernel<<<grid_for(tiles, 1), dim3(kReduceColumns, kReduceLanes), 0, s>>>(
        part_v.data<T>(), part_b.data<T>(), a.B, 2 * a.out, grad_weight_c.data<T>(), grad_bias.data<T>());
    SRU_CUDA_LAUNCH_CHECK("sru reduce_batch_kernel");
  });
}

}  // namespace sru::cuda
