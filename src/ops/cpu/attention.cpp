// CPU kernels of the fused attention (contract: ops/attention.h; per-element rules:
// ops/attention_math.h). One task per (batch row b, head h), spread over the OpenMP threads. float32:
// blocks of 64 queries, the products as GEMMs on the strided rows (below). bf16 and float64: a task
// walks its queries one at a time: the scores of the keys the query sees, their max and sum of
// exponentials (two passes over a row buffer), then the weighted values. The backward recomputes each
// row's weights from the saved log-sum-exp and accumulates the task's own key and value gradients, so
// nothing is shared between tasks and results do not depend on the thread count. Arithmetic in
// compute_t<T> (float for f32 and bf16 storage, each output rounded once; double for f64), as the CUDA
// twin; the twin's online softmax and sum order differ by float rounding.
#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "ops/attention.h"
#include "ops/cpu/blas.h"

namespace sru::cpu {

namespace {

template <typename T>
struct Views {
  const T *q, *k, *v;
  const float* pad;  // (B, Lk) or null
};

template <typename C, typename T>
C dot(const T* a, const T* b, long long n) {
  C total = C(0);
  for (long long d = 0; d < n; ++d) total += static_cast<C>(a[d]) * static_cast<C>(b[d]);
  return total;
}

// The keys query i can see at all, [first, last] within [0, Lk - 1].
std::pair<long long, long long> key_range(const AttentionShape& s, long long i) {
  return {std::max<long long>(0, s.pattern.first_key(i)), s.pattern.last_key(i, s.Lk)};
}

// float32 heads, blocked: kQueryBlock queries at a time against the keys any of them can see, the two
// products of a block as GEMMs on their strided rows (blas.h; single-threaded inside a task), the
// softmax over a (queries, keys) scratch block. The same math as the per-query loops below (which
// serve bf16 and float64), in BLAS's summation order.
constexpr long long kQueryBlock = 64;

struct KeyBlock {
  long long i0, rows, j0, keys;  // queries [i0, i0 + rows), keys [j0, j0 + keys)
};
KeyBlock key_block(const AttentionShape& s, long long i0) {
  const long long rows = std::min(kQueryBlock, s.Lq - i0);
  const long long j0 = std::max<long long>(0, s.pattern.first_key(i0));
  const long long j1 = s.pattern.last_key(i0 + rows - 1, s.Lk);
  return {i0, rows, j0, std::max<long long>(0, j1 - j0 + 1)};
}

// The block's weights P (rows x keys, 0 where hidden) from the scores in `block`, in place, and each
// row's log-sum-exp when `lse_out` is given (forward) or P from the saved lse (backward, lse_in).
void block_weights(const AttentionShape& s, const float* pad, long long b, const KeyBlock& k, float* block,
                   float* lse_out, const float* lse_in) {
  const float minus_inf = -std::numeric_limits<float>::infinity();
  for (long long r = 0; r < k.rows; ++r) {
    float* row = block + r * k.keys;
    const long long i = k.i0 + r;
    for (long long c = 0; c < k.keys; ++c)
      if (!s.sees(pad, b, i, k.j0 + c)) row[c] = minus_inf;
    float top;
    if (lse_in) {
      top = lse_in[r];
    } else {
      top = minus_inf;
      for (long long c = 0; c < k.keys; ++c) top = std::max(top, row[c]);
    }
    if (top == minus_inf) {  // sees no key
      std::fill(row, row + k.keys, 0.0f);
      if (lse_out) lse_out[r] = minus_inf;
      continue;
    }
    float total = 0.0f;
    for (long long c = 0; c < k.keys; ++c) {
      row[c] = row[c] == minus_inf ? 0.0f : std::exp(row[c] - top);
      total += row[c];
    }
    if (lse_out) {
      for (long long c = 0; c < k.keys; ++c) row[c] /= total;
      lse_out[r] = top + std::log(total);
    }
  }
}

// Multiplies the block's weights by their dropout factors (0 or keep).
void drop_block(const AttentionShape& s, const AttentionDropout& drop, long long b, long long h, const KeyBlock& k,
                float* block) {
  if (!drop.active) return;
  const float keep = static_cast<float>(drop.keep);
  for (long long r = 0; r < k.rows; ++r)
    for (long long c = 0; c < k.keys; ++c) {
      float& w = block[r * k.keys + c];
      if (w != 0.0f) w = drop.kept(s.row(b, h, k.i0 + r) * s.Lk + k.j0 + c) ? w * keep : 0.0f;
    }
}

void forward_f32(const AttentionTensors& in, const AttentionShape& s, const AttentionDropout& drop, float* o,
                 float* stats) {
  const float *q = in.q.data<float>(), *kp = in.k.data<float>(), *v = in.v.data<float>();
  const float* pad = in.padding_data();
  parallel_for(0, s.B * s.H, 1, [&](int64_t first, int64_t last) {
    std::vector<float> block(static_cast<size_t>(kQueryBlock * s.Lk));
    for (int64_t task = first; task < last; ++task) {
      const long long b = task / s.H, h = task % s.H;
      for (long long i0 = 0; i0 < s.Lq; i0 += kQueryBlock) {
        const KeyBlock k = key_block(s, i0);
        float* lse = stats + s.row(b, h, i0);
        if (k.keys == 0) {
          for (long long r = 0; r < k.rows; ++r) {
            std::fill_n(o + s.o_at(i0 + r, b, h), s.dv, 0.0f);
            lse[r] = -std::numeric_limits<float>::infinity();
          }
          continue;
        }
        blas_gemm<float>(false, true, k.rows, k.keys, s.dh, static_cast<float>(s.scale), q + s.q_at(i0, b, h),
                         s.q.position, kp + s.k_at(k.j0, b, h), s.k.position, 0.0f, block.data(), k.keys);
        block_weights(s, pad, b, k, block.data(), lse, nullptr);
        drop_block(s, drop, b, h, k, block.data());
        blas_gemm<float>(false, false, k.rows, s.dv, k.keys, 1.0f, block.data(), k.keys, v + s.v_at(k.j0, b, h),
                         s.v.position, 0.0f, o + s.o_at(i0, b, h), s.o.position);
      }
    }
  });
}

void backward_f32(const AttentionTensors& in, const AttentionShape& s, const AttentionDropout& drop, const float* o,
                  const float* stats, const float* go, float* D, float* dq, float* dk, float* dv) {
  const float *q = in.q.data<float>(), *kp = in.k.data<float>(), *v = in.v.data<float>();
  const float* pad = in.padding_data();
  parallel_for(0, s.B * s.H, 1, [&](int64_t first, int64_t last) {
    std::vector<float> weights(static_cast<size_t>(kQueryBlock * s.Lk)), grad(weights.size());
    for (int64_t task = first; task < last; ++task) {
      const long long b = task / s.H, h = task % s.H;
      for (long long j = 0; j < s.Lk; ++j) {
        std::fill_n(dk + s.k_at(j, b, h), s.dh, 0.0f);
        std::fill_n(dv + s.v_at(j, b, h), s.dv, 0.0f);
      }
      for (long long i0 = 0; i0 < s.Lq; i0 += kQueryBlock) {
        const KeyBlock k = key_block(s, i0);
        for (long long r = 0; r < k.rows; ++r) {
          const long long i = i0 + r;
          D[s.row(b, h, i)] = dot<float>(go + s.o_at(i, b, h), o + s.o_at(i, b, h), s.dv);
          if (k.keys == 0) std::fill_n(dq + s.q_at(i, b, h), s.dh, 0.0f);
        }
        if (k.keys == 0) continue;
        // P from the saved lse, then P Z (the dropped weights) beside it.
        blas_gemm<float>(false, true, k.rows, k.keys, s.dh, static_cast<float>(s.scale), q + s.q_at(i0, b, h),
                         s.q.position, kp + s.k_at(k.j0, b, h), s.k.position, 0.0f, weights.data(), k.keys);
        block_weights(s, pad, b, k, weights.data(), nullptr, stats + s.row(b, h, i0));
        // grad = dO v^T, then dS = P (Z grad - D) in place; weights becomes P Z.
        blas_gemm<float>(false, true, k.rows, k.keys, s.dv, 1.0f, go + s.o_at(i0, b, h), s.o.position,
                         v + s.v_at(k.j0, b, h), s.v.position, 0.0f, grad.data(), k.keys);
        for (long long r = 0; r < k.rows; ++r) {
          const float Dr = D[s.row(b, h, i0 + r)];
          for (long long c = 0; c < k.keys; ++c) {
            float& p = weights[r * k.keys + c];
            const float z = drop.factor<float>(s.row(b, h, i0 + r) * s.Lk + k.j0 + c);
            grad[r * k.keys + c] = p * (z * grad[r * k.keys + c] - Dr);
            p *= z;
          }
        }
        const float scale = static_cast<float>(s.scale);
        blas_gemm<float>(false, false, k.rows, s.dh, k.keys, scale, grad.data(), k.keys, kp + s.k_at(k.j0, b, h),
                         s.k.position, 0.0f, dq + s.q_at(i0, b, h), s.q.position);
        blas_gemm<float>(true, false, k.keys, s.dh, k.rows, scale, grad.data(), k.keys, q + s.q_at(i0, b, h),
                         s.q.position, 1.0f, dk + s.k_at(k.j0, b, h), s.k.position);
        blas_gemm<float>(true, false, k.keys, s.dv, k.rows, 1.0f, weights.data(), k.keys, go + s.o_at(i0, b, h),
                         s.o.position, 1.0f, dv + s.v_at(k.j0, b, h), s.v.position);
      }
    }
  });
}

}  // namespace

void fused_attention_forward(const AttentionTensors& in, const AttentionShape& s, const AttentionDropout& drop,
                             const Tensor& out, const Tensor& lse) {
  if (in.q.dtype() == DType::F32) return forward_f32(in, s, drop, out.data<float>(), lse.data<float>());
  SRU_DISPATCH_FLOATING_BF16(in.q.dtype(), "fused_attention", [&]<typename T>() {
    using C = compute_t<T>;
    const Views<T> x{in.q.data<T>(), in.k.data<T>(), in.v.data<T>(),
                     in.padding_data()};
    T* o = out.data<T>();
    C* stats = lse.data<C>();
    const C scale = static_cast<C>(s.scale);
    parallel_for(0, s.B * s.H, 1, [&](int64_t first, int64_t last) {
      std::vector<C> score(s.Lk), acc(s.dv);
      for (int64_t task = first; task < last; ++task) {
        const long long b = task / s.H, h = task % s.H;
        for (long long i = 0; i < s.Lq; ++i) {
          const auto [j0, j1] = key_range(s, i);
          const T* qi = x.q + s.q_at(i, b, h);
          C row_max = -std::numeric_limits<C>::infinity();
          for (long long j = j0; j <= j1; ++j) {
            score[j] = s.sees(x.pad, b, i, j) ? scale * dot<C>(qi, x.k + s.k_at(j, b, h), s.dh)
                                               : -std::numeric_limits<C>::infinity();
            row_max = std::max(row_max, score[j]);
          }
          T* oi = o + s.o_at(i, b, h);
          const long long row = s.row(b, h, i);
          if (row_max == -std::numeric_limits<C>::infinity()) {  // sees no key
            for (long long d = 0; d < s.dv; ++d) oi[d] = T(0);
            stats[row] = row_max;
            continue;
          }
          C total = C(0);
          for (long long j = j0; j <= j1; ++j) {
            score[j] = score[j] == -std::numeric_limits<C>::infinity() ? C(0) : std::exp(score[j] - row_max);
            total += score[j];
          }
          std::fill(acc.begin(), acc.end(), C(0));
          for (long long j = j0; j <= j1; ++j) {
            const C factor = drop.factor<C>(row * s.Lk + j);
            if (score[j] == C(0) || factor == C(0)) continue;
            const C weight = score[j] * factor;
            const T* vj = x.v + s.v_at(j, b, h);
            for (long long d = 0; d < s.dv; ++d) acc[d] += weight * static_cast<C>(vj[d]);
          }
          for (long long d = 0; d < s.dv; ++d) oi[d] = static_cast<T>(acc[d] / total);
          stats[row] = row_max + std::log(total);
        }
      }
    });
  });
}

void fused_attention_backward(const AttentionTensors& in, const AttentionShape& s, const AttentionDropout& drop,
                              const Tensor& out, const Tensor& lse, const Tensor& grad_out, const Tensor& row_dot,
                              const Tensor& gq, const Tensor& gk, const Tensor& gv) {
  if (in.q.dtype() == DType::F32)
    return backward_f32(in, s, drop, out.data<float>(), lse.data<float>(), grad_out.data<float>(), row_dot.data<float>(),
                        gq.data<float>(), gk.data<float>(), gv.data<float>());
  SRU_DISPATCH_FLOATING_BF16(in.q.dtype(), "fused_attention_backward", [&]<typename T>() {
    using C = compute_t<T>;
    const Views<T> x{in.q.data<T>(), in.k.data<T>(), in.v.data<T>(),
                     in.padding_data()};
    const T *o = out.data<T>(), *go = grad_out.data<T>();
    const C* stats = lse.data<C>();
    C* D = row_dot.data<C>();
    T *dq = gq.data<T>(), *dk = gk.data<T>(), *dv = gv.data<T>();
    const C scale = static_cast<C>(s.scale);
    parallel_for(0, s.B * s.H, 1, [&](int64_t first, int64_t last) {
      std::vector<C> acc_k(s.Lk * s.dh), acc_v(s.Lk * s.dv), acc_q(s.dh);
      for (int64_t task = first; task < last; ++task) {
        const long long b = task / s.H, h = task % s.H;
        std::fill(acc_k.begin(), acc_k.end(), C(0));
        std::fill(acc_v.begin(), acc_v.end(), C(0));
        for (long long i = 0; i < s.Lq; ++i) {
          const long long row = s.row(b, h, i);
          const T *qi = x.q + s.q_at(i, b, h), *goi = go + s.o_at(i, b, h);
          D[row] = dot<C>(goi, o + s.o_at(i, b, h), s.dv);
          std::fill(acc_q.begin(), acc_q.end(), C(0));
          const C row_lse = stats[row];
          const auto [j0, j1] = key_range(s, i);
          for (long long j = j0; j <= j1 && row_lse != -std::numeric_limits<C>::infinity(); ++j) {
            if (!s.sees(x.pad, b, i, j)) continue;
            const T *kj = x.k + s.k_at(j, b, h), *vj = x.v + s.v_at(j, b, h);
            const C p = std::exp(scale * dot<C>(qi, kj, s.dh) - row_lse);
            const C z = drop.factor<C>(row * s.Lk + j);
            C* avj = acc_v.data() + j * s.dv;
            for (long long d = 0; d < s.dv; ++d) avj[d] += p * z * static_cast<C>(goi[d]);
            const C ds = p * (z * dot<C>(goi, vj, s.dv) - D[row]);
            C* akj = acc_k.data() + j * s.dh;
            for (long long d = 0; d < s.dh; ++d) {
              acc_q[d] += ds * static_cast<C>(kj[d]);
              akj[d] += ds * static_cast<C>(qi[d]);
            }
          }
          T* dqi = dq + s.q_at(i, b, h);
          for (long long d = 0; d < s.dh; ++d) dqi[d] = static_cast<T>(scale * acc_q[d]);
        }
        for (long long j = 0; j < s.Lk; ++j) {
          T *dkj = dk + s.k_at(j, b, h), *dvj = dv + s.v_at(j, b, h);
          for (long long d = 0; d < s.dh; ++d) dkj[d] = static_cast<T>(scale * acc_k[j * s.dh + d]);
          for (long long d = 0; d < s.dv; ++d) dvj[d] = static_cast<T>(acc_v[j * s.dv + d]);
        }
      }
    });
  });
}

}  // namespace sru::cpu
