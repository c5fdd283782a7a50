// CPU kernels of the fused attention (contract: ops/attention.h; per-element rules:
// ops/attention_math.h). One task per (batch row b, head h), spread over the OpenMP threads; a task
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

namespace sru::cpu {

namespace {

template <typename T>
struct Views {
  const T *q, *k, *v;
  const float* pad;  // (B, Lk) or null
};

// Whether query i of batch row b sees key j.
bool sees(const AttentionShape& s, const float* pad, long long b, long long i, long long j) {
  return s.pattern.sees(i, j) && !(pad && pad[b * s.Lk + j] != 0.0f);
}

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

}  // namespace

void fused_attention_forward(const AttentionTensors& in, const AttentionShape& s, const AttentionDropout& drop,
                             const Tensor& out, const Tensor& lse) {
  SRU_DISPATCH_FLOATING_BF16(in.q.dtype(), "fused_attention", [&]<typename T>() {
    using C = compute_t<T>;
    const Views<T> x{in.q.data<T>(), in.k.data<T>(), in.v.data<T>(),
                     in.key_padding.defined() ? in.key_padding.data<float>() : nullptr};
    T* o = out.data<T>();
    C* stats = lse.data<C>();
    const C scale = static_cast<C>(s.scale), keep = static_cast<C>(drop.keep);
    parallel_for(0, s.B * s.H, 1, [&](int64_t first, int64_t last) {
      std::vector<C> score(s.Lk), acc(s.dv);
      for (int64_t task = first; task < last; ++task) {
        const long long b = task / s.H, h = task % s.H;
        for (long long i = 0; i < s.Lq; ++i) {
          const auto [j0, j1] = key_range(s, i);
          const T* qi = x.q + s.q_at(i, b, h);
          C row_max = -std::numeric_limits<C>::infinity();
          for (long long j = j0; j <= j1; ++j) {
            score[j] = sees(s, x.pad, b, i, j) ? scale * dot<C>(qi, x.k + s.k_at(j, b, h), s.dh)
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
            if (score[j] == C(0) || !drop.kept(row * s.Lk + j)) continue;
            const C weight = drop.active ? score[j] * keep : score[j];
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
  SRU_DISPATCH_FLOATING_BF16(in.q.dtype(), "fused_attention_backward", [&]<typename T>() {
    using C = compute_t<T>;
    const Views<T> x{in.q.data<T>(), in.k.data<T>(), in.v.data<T>(),
                     in.key_padding.defined() ? in.key_padding.data<float>() : nullptr};
    const T *o = out.data<T>(), *go = grad_out.data<T>();
    const C* stats = lse.data<C>();
    C* D = row_dot.data<C>();
    T *dq = gq.data<T>(), *dk = gk.data<T>(), *dv = gv.data<T>();
    const C scale = static_cast<C>(s.scale), keep = static_cast<C>(drop.keep);
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
            if (!sees(s, x.pad, b, i, j)) continue;
            const T *kj = x.k + s.k_at(j, b, h), *vj = x.v + s.v_at(j, b, h);
            const C p = std::exp(scale * dot<C>(qi, kj, s.dh) - row_lse);
            const C z = drop.kept(row * s.Lk + j) ? (drop.active ? keep : C(1)) : C(0);
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
