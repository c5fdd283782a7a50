// CUDA kernels of the fused attention (contract and math: ops/attention.h; per-element rules:
// ops/attention_math.h; CPU twin: ops/cpu/attention.cpp). Shapes: q (Lq, B, H*dh), k (Lk, B, H*dh),
// v (Lk, B, H*dv), heads read in place; dh, dv <= 32 W (W = 1, 2, 4 values a lane; f64: W <= 2).
//
// Forward: a block of kRows warps per (b, h) and kRows consecutive queries, a warp per query. The
// block walks the keys its queries can see in tiles of kTile, loaded into shared memory (float32, or
// double for f64) by all its threads; in a tile lane j scores key j against the warp's query (dh
// FMAs), the warp takes the tile's max (shuffles), rescales its running sum and output (online softmax,
// FP32), and every lane adds the tile's dropped-out weights times the values of its dv / 32 output
// features (one shuffle a key). Ends with out = acc / sum and lse = max + log(sum) per query.
// Backward, two kernels after the forward's statistics: (1) a warp per query, as the forward: the
// query's D = dO . out (shuffles; kept in row_dot), then per key tile dS_ij = P_ij (Z_ij dO_i . v_j - D_i)
// with P recomputed from lse, and dq_i = scale sum_j dS_ij k_j; (2) a warp per key, walking tiles of
// the queries that can see it: dv_j = sum_i P_ij Z_ij dO_i, dk_j = scale sum_i dS_ij q_i. No atomics:
// every gradient row is one warp's, so results are the same every run. Causal tiles that no row of the
// block can see are skipped (a block's rows share the tile loads, so the skip is per block).
// Floors (wmt-base at tf32 on Multi30k: B*H = 2,624 heads of Lq, Lk ~ 16-30, dh = 64): the forward
// reads q, k, v once and writes out (4 x 2.5 M floats, 40 MB: 10 us at 4 TB/s), the backward reads
// them with dO and writes three gradients (~80 MB: 20 us); the FLOPs (~4 Lq Lk d per head forward, ~2.5x
// that backward) are far under the SIMT rate at these lengths.
#include <type_traits>

#include "ops/attention.h"
#include "ops/cuda/attention_tensor_cores.cuh"
#include "ops/cuda/kernel_util.cuh"

namespace sru::cuda {

namespace {

constexpr int kTile = 32;  // keys (forward, dq) or queries (dk, dv) a tile: a lane each
constexpr int kRows = 8;   // queries (forward, dq) or keys (dk, dv) a block: a warp each

template <typename C>
__device__ C exp_of(C x) {
  if constexpr (std::is_same_v<C, float>) return expf(x);
  else return ::exp(x);
}
template <typename C>
__device__ C log_of(C x) {
  if constexpr (std::is_same_v<C, float>) return logf(x);
  else return ::log(x);
}
template <typename C>
__device__ C warp_sum(C v) {
  for (int lanes = 16; lanes > 0; lanes >>= 1) v += __shfl_xor_sync(0xffffffffu, v, lanes);
  return v;
}
// max that keeps a NaN (fmax drops it): a NaN score makes the row's output and statistics NaN, as the
// CPU twin's sums do, instead of being skipped.
template <typename C>
__device__ C nan_max(C a, C b) {
  return (b > a || b != b) ? b : a;
}
template <typename C>
__device__ C warp_max(C v) {
  for (int lanes = 16; lanes > 0; lanes >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, lanes));
  return v;
}
template <typename C>
__device__ C minus_infinity() {
  return static_cast<C>(-INFINITY);
}

// a . b over n values of shared rows.
template <typename C>
__device__ C shared_dot(const C* a, const C* b, long long n) {
  C total = C(0);
  for (long long d = 0; d < n; ++d) total += a[d] * b[d];
  return total;
}

// Rows r of a tile (rows first + r < count), `width` features of head (b, h) into shared `dst` with a
// pitch of `pitch`, by all the block's threads; rows past count are zeros.
template <typename T, typename C, typename At>
__device__ void load_tile(C* dst, int pitch, const T* src, At at, long long first, long long count, long long width) {
  const int w = static_cast<int>(width);  // <= 128: 32-bit division
  for (int e = threadIdx.x; e < kTile * w; e += blockDim.x) {
    const int r = e / w, d = e - r * w;
    const long long row = first + r;
    dst[r * pitch + d] = row < count ? static_cast<C>(src[at(row) + d]) : C(0);
  }
}

template <typename T, int W>
__global__ void attention_forward_kernel(const T* q, const T* k, const T* v, const float* pad, AttentionShape s,
                                         AttentionDropout drop, T* out, compute_t<T>* lse) {
  drop.offset = PhiloxOffset{drop.offset.value()};  // a captured step's base read once, not per weight
  using C = compute_t<T>;
  constexpr int D = 32 * W;
  __shared__ C ks[kTile][D + 1];  // lane j reads row j: the pitch D + 1 puts the lanes in distinct banks
  __shared__ C vs[kTile][D];      // lanes read consecutive features of one row
  __shared__ C qs[kRows][D];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const long long bh = blockIdx.x, b = bh / s.H, h = bh % s.H;
  const long long i0 = static_cast<long long>(blockIdx.y) * kRows, i = i0 + warp;
  const bool active = i < s.Lq;
  if (active)
    for (long long d = lane; d < s.dh; d += 32) qs[warp][d] = static_cast<C>(q[s.q_at(i, b, h) + d]);
  const C scale = static_cast<C>(s.scale);
  C m = minus_infinity<C>(), l = C(0), acc[W];
#pragma unroll
  for (int c = 0; c < W; ++c) acc[c] = C(0);
  long long begin, end;
  s.pattern.keys_seen_by(i0, min(i0 + kRows, s.Lq) - 1, s.Lk, begin, end);
  const long long row = s.row(b, h, i);
  for (long long t0 = begin - begin % kTile; t0 <= end; t0 += kTile) {
    __syncthreads();  // the previous tile is read
    load_tile<T, C>(&ks[0][0], D + 1, k, [&](long long j) { return s.k_at(j, b, h); }, t0, s.Lk, s.dh);
    load_tile<T, C>(&vs[0][0], D, v, [&](long long j) { return s.v_at(j, b, h); }, t0, s.Lk, s.dv);
    __syncthreads();
    if (!active) continue;
    const long long j = t0 + lane;
    const bool sees = j < s.Lk && s.sees(pad, b, i, j);
    const C score = sees ? scale * shared_dot(qs[warp], ks[lane], s.dh) : minus_infinity<C>();
    const C m_new = nan_max(m, warp_max(score));
    if (m_new == minus_infinity<C>()) continue;  // no key seen yet (warp-uniform)
    const C alpha = m == minus_infinity<C>() ? C(0) : exp_of(m - m_new);
    const C p = sees ? exp_of(score - m_new) : C(0);
    l = l * alpha + warp_sum(p);
    const C weight = sees ? p * drop.factor<C>(row * s.Lk + j) : C(0);
#pragma unroll
    for (int c = 0; c < W; ++c) acc[c] *= alpha;
    for (int jj = 0; jj < kTile; ++jj) {
      const C w = __shfl_sync(0xffffffffu, weight, jj);
      if (w == C(0)) continue;  // warp-uniform
#pragma unroll
      for (int c = 0; c < W; ++c)
        if (lane + 32 * c < s.dv) acc[c] += w * vs[jj][lane + 32 * c];
    }
    m = m_new;
  }
  if (!active) return;
  // A query that saw a key has m > -inf (or NaN, which then reaches out and lse).
  const bool seen = m != minus_infinity<C>();
  const C inv = seen ? C(1) / l : C(0);
#pragma unroll
  for (int c = 0; c < W; ++c)
    if (lane + 32 * c < s.dv) out[s.o_at(i, b, h) + lane + 32 * c] = static_cast<T>(acc[c] * inv);
  if (lane == 0) lse[row] = seen ? m + log_of(l) : minus_infinity<C>();
}

// Backward (1): D_i and dq_i, a warp per query.
template <typename T, int W>
__global__ void attention_backward_dq_kernel(const T* q, const T* k, const T* v, const float* pad, AttentionShape s,
                                             AttentionDropout drop, const T* out, const T* grad_out,
                                             const compute_t<T>* lse, compute_t<T>* row_dot, T* gq) {
  drop.offset = PhiloxOffset{drop.offset.value()};  // a captured step's base read once, not per weight
  using C = compute_t<T>;
  constexpr int D = 32 * W;
  __shared__ C ks[kTile][D + 1], vs[kTile][D + 1];  // lanes read rows (scores, dO . v) and features (dq)
  __shared__ C qs[kRows][D], gos[kRows][D];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const long long bh = blockIdx.x, b = bh / s.H, h = bh % s.H;
  const long long i0 = static_cast<long long>(blockIdx.y) * kRows, i = i0 + warp;
  const bool active = i < s.Lq;
  const long long row = s.row(b, h, i);
  C Di = C(0), row_lse = minus_infinity<C>();
  if (active) {
    C part = C(0);
    for (long long d = lane; d < s.dh; d += 32) qs[warp][d] = static_cast<C>(q[s.q_at(i, b, h) + d]);
    for (long long d = lane; d < s.dv; d += 32) {
      const C g = static_cast<C>(grad_out[s.o_at(i, b, h) + d]);
      gos[warp][d] = g;
      part += g * static_cast<C>(out[s.o_at(i, b, h) + d]);
    }
    Di = warp_sum(part);
    if (lane == 0) row_dot[row] = Di;
    row_lse = lse[row];
  }
  const bool sees_any = active && row_lse != minus_infinity<C>();
  const C scale = static_cast<C>(s.scale);
  C acc[W];
#pragma unroll
  for (int c = 0; c < W; ++c) acc[c] = C(0);
  long long begin, end;
  s.pattern.keys_seen_by(i0, min(i0 + kRows, s.Lq) - 1, s.Lk, begin, end);
  for (long long t0 = begin - begin % kTile; t0 <= end; t0 += kTile) {
    __syncthreads();
    load_tile<T, C>(&ks[0][0], D + 1, k, [&](long long j) { return s.k_at(j, b, h); }, t0, s.Lk, s.dh);
    load_tile<T, C>(&vs[0][0], D + 1, v, [&](long long j) { return s.v_at(j, b, h); }, t0, s.Lk, s.dv);
    __syncthreads();
    if (!sees_any) continue;
    const long long j = t0 + lane;
    C ds = C(0);
    if (j < s.Lk && s.sees(pad, b, i, j)) {
      const C p = exp_of(scale * shared_dot(qs[warp], ks[lane], s.dh) - row_lse);
      const C z = drop.factor<C>(row * s.Lk + j);
      ds = p * (z * shared_dot(gos[warp], vs[lane], s.dv) - Di);
    }
    for (int jj = 0; jj < kTile; ++jj) {
      const C w = __shfl_sync(0xffffffffu, ds, jj);
      if (w == C(0)) continue;
#pragma unroll
      for (int c = 0; c < W; ++c)
        if (lane + 32 * c < s.dh) acc[c] += w * ks[jj][lane + 32 * c];
    }
  }
  if (!active) return;
#pragma unroll
  for (int c = 0; c < W; ++c)
    if (lane + 32 * c < s.dh) gq[s.q_at(i, b, h) + lane + 32 * c] = static_cast<T>(scale * acc[c]);
}

// Backward (2): dk_j and dv_j, a warp per key, over tiles of the queries that can see the block's keys.
template <typename T, int W>
__global__ void attention_backward_dkv_kernel(const T* q, const T* k, const T* v, const float* pad, AttentionShape s,
                                              AttentionDropout drop, const T* grad_out, const compute_t<T>* lse,
                                              const compute_t<T>* row_dot, T* gk, T* gv) {
  drop.offset = PhiloxOffset{drop.offset.value()};  // a captured step's base read once, not per weight
  using C = compute_t<T>;
  constexpr int D = 32 * W;
  __shared__ C qs[kTile][D + 1], gos[kTile][D + 1];
  __shared__ C kw[kRows][D], vw[kRows][D];
  __shared__ C lse_t[kTile], dot_t[kTile];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const long long bh = blockIdx.x, b = bh / s.H, h = bh % s.H;
  const long long j0 = static_cast<long long>(blockIdx.y) * kRows, j = j0 + warp;
  const bool active = j < s.Lk;
  const bool visible = active && !s.key_padded(pad, b, j);
  if (active) {
    for (long long d = lane; d < s.dh; d += 32) kw[warp][d] = static_cast<C>(k[s.k_at(j, b, h) + d]);
    for (long long d = lane; d < s.dv; d += 32) vw[warp][d] = static_cast<C>(v[s.v_at(j, b, h) + d]);
  }
  const C scale = static_cast<C>(s.scale);
  C dk[W], dv[W];
#pragma unroll
  for (int c = 0; c < W; ++c) dk[c] = dv[c] = C(0);
  long long begin, end;  // the queries that can see the block's keys
  s.pattern.queries_seeing(j0, min(j0 + kRows, s.Lk) - 1, s.Lq, begin, end);
  for (long long t0 = begin - begin % kTile; t0 <= end; t0 += kTile) {
    __syncthreads();
    load_tile<T, C>(&qs[0][0], D + 1, q, [&](long long i) { return s.q_at(i, b, h); }, t0, s.Lq, s.dh);
    load_tile<T, C>(&gos[0][0], D + 1, grad_out, [&](long long i) { return s.o_at(i, b, h); }, t0, s.Lq, s.dv);
    if (threadIdx.x < kTile) {
      const long long i = t0 + threadIdx.x;
      lse_t[threadIdx.x] = i < s.Lq ? lse[s.row(b, h, i)] : minus_infinity<C>();
      dot_t[threadIdx.x] = i < s.Lq ? row_dot[s.row(b, h, i)] : C(0);
    }
    __syncthreads();
    if (!visible) continue;
    const long long i = t0 + lane;
    C pz = C(0), ds = C(0);
    if (i < s.Lq && s.pattern.sees(i, j) && lse_t[lane] != minus_infinity<C>()) {
      const C p = exp_of(scale * shared_dot(qs[lane], kw[warp], s.dh) - lse_t[lane]);
      const C z = drop.factor<C>(s.row(b, h, i) * s.Lk + j);
      pz = p * z;
      ds = p * (z * shared_dot(gos[lane], vw[warp], s.dv) - dot_t[lane]);
    }
    for (int ii = 0; ii < kTile; ++ii) {
      const C a = __shfl_sync(0xffffffffu, pz, ii), g = __shfl_sync(0xffffffffu, ds, ii);
      if (a != C(0)) {
#pragma unroll
        for (int c = 0; c < W; ++c)
          if (lane + 32 * c < s.dv) dv[c] += a * gos[ii][lane + 32 * c];
      }
      if (g != C(0)) {
#pragma unroll
        for (int c = 0; c < W; ++c)
          if (lane + 32 * c < s.dh) dk[c] += g * qs[ii][lane + 32 * c];
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int c = 0; c < W; ++c) {
    if (lane + 32 * c < s.dh) gk[s.k_at(j, b, h) + lane + 32 * c] = static_cast<T>(scale * dk[c]);
    if (lane + 32 * c < s.dv) gv[s.v_at(j, b, h) + lane + 32 * c] = static_cast<T>(dv[c]);
  }
}

// Calls f.template operator()<W>() with the values a lane holds for heads of dh, dv features.
template <typename T, typename F>
void with_head_width(const AttentionShape& s, F&& f) {
  const long long widest = s.dh > s.dv ? s.dh : s.dv;
  if (widest <= 32) f.template operator()<1>();
  else if (widest <= 64) f.template operator()<2>();
  else if constexpr (!std::is_same_v<T, double>) f.template operator()<4>();
  else SRU_FAIL("fused_attention: float64 heads of ", widest, " features exceed the CUDA kernels' 64");
}

dim3 grid_of(long long heads_total, long long rows) {
  const long long tiles = (rows + kRows - 1) / kRows;
  SRU_CHECK(heads_total <= 2147483647LL && tiles <= 65535, "fused_attention: ", heads_total, " heads x ", rows,
            " rows exceed one launch's grid");
  return dim3(static_cast<unsigned>(heads_total), static_cast<unsigned>(tiles < 1 ? 1 : tiles));
}


}  // namespace

void fused_attention_forward(const AttentionTensors& in, const AttentionShape& s, const AttentionDropout& drop,
                             const Tensor& out, const Tensor& lse) {
  if (s.B * s.H == 0 || s.Lq == 0) return;
  if (tensor_core_attention_applies(in, s, {&out})) return tensor_core_attention_forward(in, s, drop, out, lse);
  SRU_DISPATCH_FLOATING_BF16(in.q.dtype(), "fused_attention", [&]<typename T>() {
    using C = compute_t<T>;
    with_head_width<T>(s, [&]<int W>() {
      attention_forward_kernel<T, W><<<grid_of(s.B * s.H, s.Lq), kRows * 32, 0, stream_of(in.q)>>>(
          in.q.data<T>(), in.k.data<T>(), in.v.data<T>(), in.padding_data(), s, drop, out.data<T>(), lse.data<C>());
    });
    SRU_CUDA_LAUNCH_CHECK("attention_forward_kernel");
  });
}

void fused_attention_backward(const AttentionTensors& in, const AttentionShape& s, const AttentionDropout& drop,
                              const Tensor& out, const Tensor& lse, const Tensor& grad_out, const Tensor& row_dot,
                              const Tensor& gq, const Tensor& gk, const Tensor& gv) {
  if (s.B * s.H == 0) return;
  if (tensor_core_attention_applies(in, s, {&out, &grad_out, &gq, &gk, &gv}))
    return tensor_core_attention_backward(in, s, drop, out, lse, grad_out, row_dot, gq, gk, gv);
  SRU_DISPATCH_FLOATING_BF16(in.q.dtype(), "fused_attention_backward", [&]<typename T>() {
    using C = compute_t<T>;
    const cudaStream_t stream = stream_of(in.q);
    with_head_width<T>(s, [&]<int W>() {
      if (s.Lq > 0)
        attention_backward_dq_kernel<T, W><<<grid_of(s.B * s.H, s.Lq), kRows * 32, 0, stream>>>(
            in.q.data<T>(), in.k.data<T>(), in.v.data<T>(), in.padding_data(), s, drop, out.data<T>(),
            grad_out.data<T>(), lse.data<C>(), row_dot.data<C>(), gq.data<T>());
      if (s.Lk > 0)
        attention_backward_dkv_kernel<T, W><<<grid_of(s.B * s.H, s.Lk), kRows * 32, 0, stream>>>(
            in.q.data<T>(), in.k.data<T>(), in.v.data<T>(), in.padding_data(), s, drop, grad_out.data<T>(),
            lse.data<C>(), row_dot.data<C>(), gk.data<T>(), gv.data<T>());
    });
    SRU_CUDA_LAUNCH_CHECK("attention_backward kernels");
  });
}

}  // namespace sru::cuda
