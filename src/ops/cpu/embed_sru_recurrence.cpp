// CPU kernels of the Embed-SRU / Super-Embed-SRU recurrence. Math per element: ops/embed_sru_math.h;
// shapes and saved state: ops/embed_sru_recurrence.h.
//
// One task per batch row b: it walks time and updates the row's d units per step; tasks are spread
// over the OpenMP threads. The form (Embed / Super-Embed), tanh and the dropout mask are template
// parameters, so each unit loop is branch-free; the unit loops are out-of-line functions whose arrays
// are restrict parameters (as in cpu/sru_recurrence_kernels.h: GCC drops restrict on inlining). No
// gradient is shared between steps or rows, so there is no reduction and results do not depend on
// the thread count.
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/padding.h"
#include "ops/embed_sru_math.h"
#include "ops/embed_sru_recurrence.h"

namespace sru::cpu {

namespace {

template <typename T>
struct Args {
  int64_t L, B, d;
  const T *u, *f, *r, *x, *c0, *mask_c;
  std::vector<uint8_t> pad;  // (L, B), empty when nothing is padded

  bool padded(int64_t t, int64_t b) const { return !pad.empty() && pad[t * B + b]; }
};

template <typename T>
Args<T> args_of(const EmbedSruTensors& in) {
  auto ptr = [](const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
  return {in.u.size(0), in.u.size(1), in.u.size(2), ptr(in.u), ptr(in.f), ptr(in.r), ptr(in.x), ptr(in.c0),
          ptr(in.mask_c), padding_bytes(in.mask_pad)};
}

// The per-step inputs of one row, as restrict parameters of the unit loops.
#define EMBED_SRU_ROW_ARGS \
  const T *__restrict u, const T *__restrict f, const T *__restrict r, const T *__restrict x, const T *__restrict mc
#define EMBED_SRU_ROW_OF(a, row, b) \
  (a).u + (row), (a).f + (row), (a).r + (row), (a).x + (row), (a).mask_c ? (a).mask_c + (b) * (a).d : nullptr

template <typename T, bool MASK>
inline EmbedSruStepInput<T> step_input(EMBED_SRU_ROW_ARGS, int64_t j) {
  return {u[j], f[j], r[j], x[j], MASK ? mc[j] : T(1)};
}

template <typename T, bool SUPER, bool TANH, bool MASK>
[[gnu::noinline]] void forward_units(int64_t d, EMBED_SRU_ROW_ARGS, T* __restrict c, T* __restrict c_row,
                                     T* __restrict h_row) {
  for (int64_t j = 0; j < d; ++j) {
    T hj;
    const T cj = embed_sru_step_forward<T, SUPER>(step_input<T, MASK>(u, f, r, x, mc, j), c[j], TANH, hj);
    c[j] = cj;
    c_row[j] = cj;
    h_row[j] = hj;
  }
}

template <typename T, bool SUPER, bool TANH, bool MASK>
[[gnu::noinline]] void backward_units(int64_t d, EMBED_SRU_ROW_ARGS, const T* __restrict c_prev,
                                      const T* __restrict c_row, const T* __restrict gh_row, T* __restrict gc,
                                      T* __restrict gu, T* __restrict gf, T* __restrict gr, T* __restrict gx) {
  for (int64_t j = 0; j < d; ++j) {
    const EmbedSruStepGrads<T> g = embed_sru_step_backward<T, SUPER>(step_input<T, MASK>(u, f, r, x, mc, j), c_prev[j],
                                                                    c_row[j], gh_row[j], gc[j], TANH);
    gu[j] = g.u;
    gf[j] = g.f;
    gr[j] = g.r;
    gx[j] = g.x;
    gc[j] = g.c_prev;
  }
}

template <typename T, bool SUPER, bool TANH, bool MASK>
void forward_row(const Args<T>& a, int64_t b, T* c, T* h, T* c_all, T* c_last) {
  const int64_t d = a.d;
  for (int64_t j = 0; j < d; ++j) c[j] = a.c0 ? a.c0[b * d + j] : T(0);
  for (int64_t t = 0; t < a.L; ++t) {
    const int64_t row = (t * a.B + b) * d;
    if (a.padded(t, b)) {
      for (int64_t j = 0; j < d; ++j) {
        h[row + j] = T(0);
        c_all[row + j] = c[j];
      }
      continue;
    }
    forward_units<T, SUPER, TANH, MASK>(d, EMBED_SRU_ROW_OF(a, row, b), c, c_all + row, h + row);
  }
  for (int64_t j = 0; j < d; ++j) c_last[b * d + j] = c[j];
}

template <typename T, bool SUPER, bool TANH, bool MASK>
void backward_row(const Args<T>& a, int64_t b, const T* c_all, const T* gh, const T* gc_last, T* gu, T* gf, T* gr,
                  T* gx, T* gc0, T* gc, const T* zeros) {
  const int64_t d = a.d;
  for (int64_t j = 0; j < d; ++j) gc[j] = gc_last ? gc_last[b * d + j] : T(0);
  for (int64_t t = a.L - 1; t >= 0; --t) {
    const int64_t row = (t * a.B + b) * d;
    if (a.padded(t, b)) {  // c passed through unchanged: gc flows on as it is
      for (int64_t j = 0; j < d; ++j) gu[row + j] = gf[row + j] = gr[row + j] = gx[row + j] = T(0);
      continue;
    }
    const T* c_prev = t == 0 ? (a.c0 ? a.c0 + b * d : zeros) : c_all + ((t - 1) * a.B + b) * d;
    backward_units<T, SUPER, TANH, MASK>(d, EMBED_SRU_ROW_OF(a, row, b), c_prev, c_all + row, gh + row, gc, gu + row,
                                         gf + row, gr + row, gx + row);
  }
  if (gc0)
    for (int64_t j = 0; j < d; ++j) gc0[b * d + j] = gc[j];
}

#undef EMBED_SRU_ROW_ARGS
#undef EMBED_SRU_ROW_OF

// Calls fn.template operator()<SUPER, TANH, MASK>() for the runtime options.
template <typename F>
void with_options(bool super_embed, bool tanh, bool mask, const F& fn) {
  auto with_mask = [&]<bool S, bool H>() {
    if (mask) fn.template operator()<S, H, true>();
    else fn.template operator()<S, H, false>();
  };
  auto with_tanh = [&]<bool S>() {
    if (tanh) with_mask.template operator()<S, true>();
    else with_mask.template operator()<S, false>();
  };
  if (super_embed) with_tanh.template operator()<true>();
  else with_tanh.template operator()<false>();
}

}  // namespace

void embed_sru_recurrence_forward(const EmbedSruTensors& in, const EmbedSruRecurrenceOptions& o, const Tensor& h,
                                  const Tensor& c_all, const Tensor& c_last) {
  SRU_DISPATCH_FLOATING(in.u.dtype(), "embed_sru_recurrence", [&]<typename T>() {
    const Args<T> a = args_of<T>(in);
    T *ph = h.data<T>(), *pc = c_all.data<T>(), *plast = c_last.data<T>();
    with_options(o.super_embed, o.use_tanh, a.mask_c != nullptr, [&]<bool S, bool H, bool M>() {
      parallel_for(0, a.B, 1, [&](int64_t lo, int64_t hi) {
        std::vector<T> c(a.d);
        for (int64_t b = lo; b < hi; ++b) forward_row<T, S, H, M>(a, b, c.data(), ph, pc, plast);
      });
    });
  });
}

void embed_sru_recurrence_backward(const EmbedSruTensors& in, const EmbedSruRecurrenceOptions& o, const Tensor& c_all,
                                   const Tensor& grad_h, const Tensor& grad_c_last, const Tensor& grad_u,
                                   const Tensor& grad_f, const Tensor& grad_r, const Tensor& grad_x,
                                   const Tensor& grad_c0) {
  SRU_DISPATCH_FLOATING(in.u.dtype(), "embed_sru_recurrence_backward", [&]<typename T>() {
    const Args<T> a = args_of<T>(in);
    auto ptr = [](const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
    const std::vector<T> zeros(a.d, T(0));
    with_options(o.super_embed, o.use_tanh, a.mask_c != nullptr, [&]<bool S, bool H, bool M>() {
      parallel_for(0, a.B, 1, [&](int64_t lo, int64_t hi) {
        std::vector<T> gc(a.d);
        for (int64_t b = lo; b < hi; ++b)
          backward_row<T, S, H, M>(a, b, c_all.data<T>(), grad_h.data<T>(), ptr(grad_c_last), grad_u.data<T>(),
                                   grad_f.data<T>(), grad_r.data<T>(), grad_x.data<T>(), ptr(grad_c0), gc.data(),
                                   zeros.data());
      });
    });
  });
}

}  // namespace sru::cpu
