// CPU kernels of the fused SRU recurrence (shapes and saved state: ops/sru_recurrence.h; per-element
// math: ops/sru_math.h). One task per (batch b, direction): it walks time in its direction and
// updates all d units of that column block per step, so the inner loop runs over contiguous units.
// Tasks are split across OpenMP threads. grad weight_c / bias are accumulated per task and reduced
// over the batch in index order afterwards, so results do not depend on the thread count.
#include <vector>

#include "core/parallel.h"
#include "ops/sru_math.h"
#include "ops/sru_recurrence.h"

namespace sru::cpu {

namespace {

struct Dims {
  int64_t L, B, d, D, out, k;
};

Dims dims_of(const SruTensors& in, const SruRecurrenceOptions& o) {
  const int64_t D = o.bidirectional ? 2 : 1;
  return {in.U.size(0), in.U.size(1), o.hidden_size, D, D * o.hidden_size, o.k};
}

// Padded steps as bytes, (L, B); empty when there is no mask.
std::vector<uint8_t> padding_of(const Tensor& mask_pad) {
  std::vector<uint8_t> pad;
  if (!mask_pad.defined()) return pad;
  SRU_DISPATCH_ALL(mask_pad.dtype(), "mask_pad", [&]<typename M>() {
    const M* p = mask_pad.data<M>();
    pad.resize(mask_pad.numel());
    for (size_t i = 0; i < pad.size(); ++i) pad[i] = p[i] != M(0);
  });
  return pad;
}

// Pointers into every tensor for one (b, dir) task, typed.
template <typename T>
struct Column {
  const T *U, *x, *vf, *vr, *bf, *br, *mask_c;
  T scale;
  bool skip_from_x;

  Column(const SruTensors& in, const SruRecurrenceOptions& o, const Dims& s, int64_t b, int64_t dir)
      : U(in.U.data<T>()),
        x(in.x.defined() ? in.x.data<T>() : nullptr),
        vf(in.weight_c.data<T>() + dir * s.d),
        vr(in.weight_c.data<T>() + s.out + dir * s.d),
        bf(in.bias.data<T>() + dir * s.d),
        br(in.bias.data<T>() + s.out + dir * s.d),
        mask_c(in.mask_c.defined() ? in.mask_c.data<T>() + b * s.out + dir * s.d : nullptr),
        scale(static_cast<T>(o.scale_x)),
        skip_from_x(o.has_skip_term && o.k == 3) {}

  // The step input of unit j at time t; u points at U[t, b, dir*d*k].
  SruStepInput<T> input(const T* u, const T* x_row, int64_t j, int64_t k) const {
    SruStepInput<T> in;
    in.u0 = u[j * k];
    in.u1 = u[j * k + 1];
    in.u2 = u[j * k + 2];
    in.x_skip = k == 4 ? u[j * k + 3] : (skip_from_x ? scale * x_row[j] : T(0));
    in.vf = vf[j];
    in.vr = vr[j];
    in.bf = bf[j];
    in.br = br[j];
    in.mask = mask_c ? mask_c[j] : T(1);
    return in;
  }
};

}  // namespace

void sru_recurrence_forward(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& h, const Tensor& c_all,
                            const Tensor& c_last) {
  const Dims s = dims_of(in, o);
  const std::vector<uint8_t> pad = padding_of(in.mask_pad);
  SRU_DISPATCH_FLOATING(in.U.dtype(), "sru_recurrence", [&]<typename T>() {
    T *ph = h.data<T>(), *pc = c_all.data<T>(), *plast = c_last.data<T>();
    const T* pc0 = in.c0.defined() ? in.c0.data<T>() : nullptr;
    parallel_for(0, s.B * s.D, 1, [&](int64_t lo, int64_t hi) {
      std::vector<T> c(s.d);
      for (int64_t task = lo; task < hi; ++task) {
        const int64_t b = task / s.D, dir = task % s.D;
        const Column<T> col(in, o, s, b, dir);
        const int64_t state_at = b * s.out + dir * s.d;
        for (int64_t j = 0; j < s.d; ++j) c[j] = pc0 ? pc0[state_at + j] : T(0);
        for (int64_t step = 0; step < s.L; ++step) {
          const int64_t t = dir == 0 ? step : s.L - 1 - step;
          const int64_t row = (t * s.B + b) * s.out + dir * s.d;  // index of unit 0 in (L, B, out) tensors
          T* h_row = ph + row;
          T* c_row = pc + row;
          if (!pad.empty() && pad[t * s.B + b]) {
            for (int64_t j = 0; j < s.d; ++j) {
              h_row[j] = T(0);
              c_row[j] = c[j];
            }
            continue;
          }
          const T* u = col.U + row * s.k;
          const T* x_row = col.x ? col.x + row : nullptr;
          for (int64_t j = 0; j < s.d; ++j) {
            c[j] = sru_step_forward(col.input(u, x_row, j, s.k), c[j], o.use_tanh, o.has_skip_term, h_row[j]);
            c_row[j] = c[j];
          }
        }
        for (int64_t j = 0; j < s.d; ++j) plast[state_at + j] = c[j];
      }
    });
  });
}

void sru_recurrence_backward(const SruTensors& in, const SruRecurrenceOptions& o, const Tensor& c_all,
                             const Tensor& grad_h, const Tensor& grad_c_last, const Tensor& grad_U,
                             const Tensor& grad_x, const Tensor& grad_weight_c, const Tensor& grad_bias,
                             const Tensor& grad_c0) {
  const Dims s = dims_of(in, o);
  const std::vector<uint8_t> pad = padding_of(in.mask_pad);
  SRU_DISPATCH_FLOATING(in.U.dtype(), "sru_recurrence_backward", [&]<typename T>() {
    const T *pc = c_all.data<T>(), *pgh = grad_h.data<T>();
    const T* pgc_last = grad_c_last.defined() ? grad_c_last.data<T>() : nullptr;
    const T* pc0 = in.c0.defined() ? in.c0.data<T>() : nullptr;
    T* pgU = grad_U.data<T>();
    T* pgx = grad_x.defined() ? grad_x.data<T>() : nullptr;
    T* pgc0 = grad_c0.defined() ? grad_c0.data<T>() : nullptr;
    // Per-batch partial sums of d(vf, vr) and d(bf, br): (B, 2*out) each, reduced below.
    std::vector<T> part_v(s.B * 2 * s.out), part_b(s.B * 2 * s.out);
    parallel_for(0, s.B * s.D, 1, [&](int64_t lo, int64_t hi) {
      std::vector<T> gc(s.d), c_prev(s.d), acc_vf(s.d), acc_vr(s.d), acc_bf(s.d), acc_br(s.d);
      for (int64_t task = lo; task < hi; ++task) {
        const int64_t b = task / s.D, dir = task % s.D;
        const Column<T> col(in, o, s, b, dir);
        const int64_t state_at = b * s.out + dir * s.d;
        for (int64_t j = 0; j < s.d; ++j) {
          gc[j] = pgc_last ? pgc_last[state_at + j] : T(0);
          acc_vf[j] = acc_vr[j] = acc_bf[j] = acc_br[j] = T(0);
        }
        for (int64_t step = s.L - 1; step >= 0; --step) {
          const int64_t t = dir == 0 ? step : s.L - 1 - step;
          const int64_t row = (t * s.B + b) * s.out + dir * s.d;
          T* gu = pgU + row * s.k;
          T* gx_row = pgx ? pgx + row : nullptr;
          if (!pad.empty() && pad[t * s.B + b]) {  // c passed through unchanged: gc flows on as is
            for (int64_t j = 0; j < s.d * s.k; ++j) gu[j] = T(0);
            if (gx_row)
              for (int64_t j = 0; j < s.d; ++j) gx_row[j] = T(0);
            continue;
          }
          // c before this step, in processing order.
          const int64_t prev_t = dir == 0 ? t - 1 : t + 1;
          const bool first = step == 0;
          const T* prev_row = first ? nullptr : pc + (prev_t * s.B + b) * s.out + dir * s.d;
          for (int64_t j = 0; j < s.d; ++j) c_prev[j] = first ? (pc0 ? pc0[state_at + j] : T(0)) : prev_row[j];
          const T* u = col.U + row * s.k;
          const T* x_row = col.x ? col.x + row : nullptr;
          const T* c_row = pc + row;
          const T* gh_row = pgh + row;
          for (int64_t j = 0; j < s.d; ++j) {
            const SruStepGrads<T> g = sru_step_backward(col.input(u, x_row, j, s.k), c_prev[j], c_row[j], gh_row[j],
                                                        gc[j], o.use_tanh, o.has_skip_term);
            gu[j * s.k] = g.u0;
            gu[j * s.k + 1] = g.u1;
            gu[j * s.k + 2] = g.u2;
            if (s.k == 4) gu[j * s.k + 3] = g.x_skip;
            if (gx_row) gx_row[j] = col.skip_from_x ? g.x_skip * col.scale : T(0);
            acc_vf[j] += g.vf;
            acc_vr[j] += g.vr;
            acc_bf[j] += g.u1;
            acc_br[j] += g.u2;
            gc[j] = g.c_prev;
          }
        }
        T* pv = part_v.data() + b * 2 * s.out;
        T* pb = part_b.data() + b * 2 * s.out;
        for (int64_t j = 0; j < s.d; ++j) {
          if (pgc0) pgc0[state_at + j] = gc[j];
          pv[dir * s.d + j] = acc_vf[j];
          pv[s.out + dir * s.d + j] = acc_vr[j];
          pb[dir * s.d + j] = acc_bf[j];
          pb[s.out + dir * s.d + j] = acc_br[j];
        }
      }
    });
    T* pgw = grad_weight_c.data<T>();
    T* pgb = grad_bias.data<T>();
    for (int64_t i = 0; i < 2 * s.out; ++i) {
      T sv = T(0), sb = T(0);
      for (int64_t b = 0; b < s.B; ++b) {
        sv += part_v[b * 2 * s.out + i];
        sb += part_b[b * 2 * s.out + i];
      }
      pgw[i] = sv;
      pgb[i] = sb;
    }
  });
}

}  // namespace sru::cpu
