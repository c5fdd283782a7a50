// CPU kernels of the SSRU recurrence. Math per element: ops/ssru_math.h; shapes and saved state:
// ops/ssru_recurrence.h.
//
// One task per batch row b: it walks time and updates the row's d units per step; tasks are spread over
// the OpenMP threads. The unit loops are out-of-line functions with restrict arrays (GCC drops restrict
// on inlining), as cpu/embed_sru_recurrence.cpp. No gradient is shared between steps or rows, so there
// is no reduction and results do not depend on the thread count.
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/padding.h"
#include "ops/ssru_math.h"
#include "ops/ssru_recurrence.h"

namespace sru::cpu {

namespace {

template <typename T>
struct Args {
  int64_t L, B, d;
  const T *U, *bias, *c0;
  std::vector<uint8_t> pad;  // (L, B), empty when nothing is padded

  bool padded(int64_t t, int64_t b) const { return !pad.empty() && pad[t * B + b]; }
  // Step t of row b: z at U[row_u], u_f at U[row_u + d]; h, c at row.
  int64_t row_u(int64_t t, int64_t b) const { return (t * B + b) * 2 * d; }
  int64_t row(int64_t t, int64_t b) const { return (t * B + b) * d; }
};

template <typename T>
Args<T> args_of(const SsruTensors& in) {
  auto ptr = [](const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
  return {in.U.size(0), in.U.size(1), in.U.size(2) / 2, in.U.data<T>(), ptr(in.forget_bias), ptr(in.c0),
          padding_bytes(in.mask_pad)};
}

template <typename T>
[[gnu::noinline]] void forward_units(int64_t d, const T* __restrict z, const T* __restrict uf, const T* __restrict bf,
                                     T* __restrict c,
                                     T* __restrict c_row, T* __restrict h_row) {
  for (int64_t j = 0; j < d; ++j) {
    T hj;
    const T cj = ssru_step_forward<T>(z[j], uf[j], bf[j], c[j], hj);
    c[j] = cj;
    c_row[j] = cj;
    h_row[j] = hj;
  }
}

template <typename T>
[[gnu::noinline]] void backward_units(int64_t d, const T* __restrict z, const T* __restrict uf,
                                      const T* __restrict bf, const T* __restrict c_prev, const T* __restrict c_row, const T* __restrict gh_row,
                                      T* __restrict gc, T* __restrict gz, T* __restrict guf) {
  for (int64_t j = 0; j < d; ++j) {
    const SsruStepGrads<T> g = ssru_step_backward<T>(z[j], uf[j], bf[j], c_prev[j], c_row[j], gh_row[j], gc[j]);
    gz[j] = g.z;
    guf[j] = g.u_f;
    gc[j] = g.c_prev;
  }
}

template <typename T>
void forward_row(const Args<T>& a, int64_t b, const T* bias, T* c, T* h, T* c_all, T* c_last) {
  const int64_t d = a.d;
  for (int64_t j = 0; j < d; ++j) c[j] = a.c0 ? a.c0[b * d + j] : T(0);
  for (int64_t t = 0; t < a.L; ++t) {
    const int64_t row = a.row(t, b);
    if (a.padded(t, b)) {
      for (int64_t j = 0; j < d; ++j) {
        h[row + j] = T(0);
        c_all[row + j] = c[j];
      }
      continue;
    }
    const T* u = a.U + a.row_u(t, b);
    forward_units<T>(d, u, u + d, bias, c, c_all + row, h + row);
  }
  for (int64_t j = 0; j < d; ++j) c_last[b * d + j] = c[j];
}

template <typename T>
void backward_row(const Args<T>& a, int64_t b, const T* bias, const T* c_all, const T* gh, const T* gc_last, T* gU,
                  T* gc0, T* gc, const T* zeros) {
  const int64_t d = a.d;
  for (int64_t j = 0; j < d; ++j) gc[j] = gc_last ? gc_last[b * d + j] : T(0);
  for (int64_t t = a.L - 1; t >= 0; --t) {
    const int64_t row = a.row(t, b), row_u = a.row_u(t, b);
    if (a.padded(t, b)) {  // c passed through unchanged: gc flows on as it is
      for (int64_t j = 0; j < 2 * d; ++j) gU[row_u + j] = T(0);
      continue;
    }
    const T* c_prev = t == 0 ? (a.c0 ? a.c0 + b * d : zeros) : c_all + a.row(t - 1, b);
    const T* u = a.U + row_u;
    backward_units<T>(d, u, u + d, bias, c_prev, c_all + row, gh + row, gc, gU + row_u, gU + row_u + d);
  }
  if (gc0)
    for (int64_t j = 0; j < d; ++j) gc0[b * d + j] = gc[j];
}

}  // namespace

void ssru_recurrence_forward(const SsruTensors& in, const Tensor& h, const Tensor& c_all, const Tensor& c_last) {
  SRU_DISPATCH_FLOATING(in.U.dtype(), "ssru_recurrence", [&]<typename T>() {
    const Args<T> a = args_of<T>(in);
    T *ph = h.data<T>(), *pc = c_all.data<T>(), *plast = c_last.data<T>();
    const std::vector<T> zeros(a.d, T(0));
    const T* bias = a.bias ? a.bias : zeros.data();
    parallel_for(0, a.B, 1, [&](int64_t lo, int64_t hi) {
      std::vector<T> c(a.d);
      for (int64_t b = lo; b < hi; ++b) forward_row<T>(a, b, bias, c.data(), ph, pc, plast);
    });
  });
}

void ssru_recurrence_backward(const SsruTensors& in, const Tensor& c_all, const Tensor& grad_h,
                              const Tensor& grad_c_last, const Tensor& grad_U, const Tensor& grad_c0) {
  SRU_DISPATCH_FLOATING(in.U.dtype(), "ssru_recurrence_backward", [&]<typename T>() {
    const Args<T> a = args_of<T>(in);
    const std::vector<T> zeros(a.d, T(0));
    const T* bias = a.bias ? a.bias : zeros.data();
    const T* gc_last = grad_c_last.defined() ? grad_c_last.data<T>() : nullptr;
    T* gc0 = grad_c0.defined() ? grad_c0.data<T>() : nullptr;
    parallel_for(0, a.B, 1, [&](int64_t lo, int64_t hi) {
      std::vector<T> gc(a.d);
      for (int64_t b = lo; b < hi; ++b)
        backward_row<T>(a, b, bias, c_all.data<T>(), grad_h.data<T>(), gc_last, grad_U.data<T>(), gc0, gc.data(),
                        zeros.data());
    });
  });
}

}  // namespace sru::cpu
