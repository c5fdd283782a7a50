// The CPU kernels of the fused SRU recurrence, as templates included by three translation units:
// cpu/sru_recurrence.cpp (baseline x86-64), cpu/sru_recurrence_avx2.cpp (compiled with -mavx2) and
// cpu/sru_recurrence_avx512.cpp (an AVX-512 target region), chosen at run time. Math per element: ops/sru_math.h; shapes and saved state: ops/sru_recurrence.h.
//
// One task per (batch b, direction): it walks time in its direction and updates the d units of
// that column block per step. The options (k, skip term, tanh, dropout mask) are template
// parameters, so each inner loop over units is branch-free and vectorises; U is read with stride k.
// Tasks are split across OpenMP threads. grad weight_c / bias are accumulated per task and reduced
// over the batch in index order afterwards, so results do not depend on the thread count.
// I/O type IO: the tensors a layer passes on (U, x, h and their gradients) are IO, the state, the
// parameters, the masks and all arithmetic T. IO = T, or IO = bf16 with T = float (bf16 I/O, the CUDA
// kernels' twin): loads widen exactly and stores round to nearest even inside the unit loops (the same
// bits as widening, running the float kernels and rounding the results after, without those passes).
// Define SRU_KERNEL_NAMESPACE before including.
#include <bit>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "ops/sru_math.h"
#include "ops/sru_recurrence.h"

namespace sru::cpu::SRU_KERNEL_NAMESPACE {

namespace {

// An I/O element as the compute type: itself, or a bf16 widened exactly.
template <typename T>
inline T widen(T v) {
  return v;
}
inline float widen(bf16 v) { return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16); }

// A computed value stored as an I/O element: itself, or rounded to bf16 by core/float16.h's rule (to
// nearest even, NaN -> 0x7FFF), written without branches so that the unit loops vectorise.
template <typename IO, typename T>
inline IO narrow(T v) {
  if constexpr (std::is_same_v<IO, T>) {
    return v;
  } else {
    static_assert(std::is_same_v<IO, bf16> && std::is_same_v<T, float>, "bf16 I/O computes in float");
    const uint32_t u = std::bit_cast<uint32_t>(v);
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    IO out;
    out.bits = static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? 0x7FFFu : rounded);
    return out;
  }
}

template <typename T, typename IO>
struct Args {
  int64_t L, B, d, D, out, k;
  const IO *U, *x;
  const T *weight_c, *bias, *c0, *mask_c;
  const uint8_t* pad;  // (L, B) or null
  T scale;
};

template <typename T, typename IO>
Args<T, IO> args_of(const SruTensors& in, const SruRecurrenceOptions& o, const std::vector<uint8_t>& pad) {
  const int64_t D = o.bidirectional ? 2 : 1;
  auto ptr = [](const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
  auto io = [](const Tensor& t) { return t.defined() ? t.data<IO>() : nullptr; };
  return {in.U.size(0), in.U.size(1), o.hidden_size, D, D * o.hidden_size, o.k, io(in.U), io(in.x),
          ptr(in.weight_c), ptr(in.bias), ptr(in.c0), ptr(in.mask_c), pad.empty() ? nullptr : pad.data(),
          in.scale_x.defined() ? *in.scale_x.data<T>() : static_cast<T>(o.scale_x)};
}

// The per-unit parameters of one (batch, direction) block.
template <typename T>
struct Block {
  const T *vf, *vr, *bf, *br, *mc;
  int64_t state_at;  // index of unit 0 in (B, out) tensors

  template <typename IO>
  Block(const Args<T, IO>& a, int64_t b, int64_t dir)
      : vf(a.weight_c + dir * a.d),
        vr(a.weight_c + a.out + dir * a.d),
        bf(a.bias + dir * a.d),
        br(a.bias + a.out + dir * a.d),
        mc(a.mask_c ? a.mask_c + b * a.out + dir * a.d : nullptr),
        state_at(b * a.out + dir * a.d) {}
};

// The step input of unit j; u points at U[t, b, dir*d*K], x_row at x[t, b, dir*d].
// The block's parameter arrays, passed to the unit loops as restrict parameters.
#define SRU_PARAM_ARGS                                                                                     \
  const T *__restrict vf, const T *__restrict vr, const T *__restrict bf, const T *__restrict br, \
      const T *__restrict mc
#define SRU_PARAMS_OF(blk) (blk).vf, (blk).vr, (blk).bf, (blk).br, (blk).mc

template <typename T, typename IO, int K, bool SKIP, bool MASK>
inline SruStepInput<T> step_input(const IO* __restrict u, const IO* __restrict x_row, SRU_PARAM_ARGS, T scale,
                                  int64_t j) {
  SruStepInput<T> in;
  in.u0 = widen(u[j * K]);
  in.u1 = widen(u[j * K + 1]);
  in.u2 = widen(u[j * K + 2]);
  if constexpr (K == 4) in.x_skip = widen(u[j * K + 3]);
  else if constexpr (SKIP) in.x_skip = scale * widen(x_row[j]);
  else in.x_skip = T(0);
  in.vf = vf[j];
  in.vr = vr[j];
  in.bf = bf[j];
  in.br = br[j];
  in.mask = MASK ? mc[j] : T(1);
  return in;
}

// One forward step for the d units of a block. The unit loops live in out-of-line functions so
// that every array is a restrict parameter: GCC honours restrict there (and loses it when the
// function is inlined), and without it the loops need more run-time alias checks than it will
// emit, and stay scalar. One call per step and block costs nothing next to the d-unit loop.
template <typename T, typename IO, int K, bool SKIP, bool TANH, bool MASK>
[[gnu::noinline]] void forward_units(int64_t d, const IO* __restrict u, const IO* __restrict x_row, SRU_PARAM_ARGS, T scale,
                   T* __restrict c, T* __restrict c_row, IO* __restrict h_row) {
  for (int64_t j = 0; j < d; ++j) {
    T hj;
    const T cj = sru_step_forward(step_input<T, IO, K, SKIP, MASK>(u, x_row, vf, vr, bf, br, mc, scale, j), c[j], TANH,
                                  SKIP, hj);
    c[j] = cj;
    c_row[j] = cj;
    h_row[j] = narrow<IO>(hj);
  }
}

template <typename T, typename IO, int K, bool SKIP, bool TANH, bool MASK>
[[gnu::noinline]] void backward_units(int64_t d, const IO* __restrict u, const IO* __restrict x_row, SRU_PARAM_ARGS, T scale,
                    const T* __restrict c_prev, const T* __restrict c_row, const IO* __restrict gh_row,
                    T* __restrict gc, IO* __restrict gu, IO* __restrict gx_row, T* __restrict acc_vf,
                    T* __restrict acc_vr, T* __restrict acc_bf, T* __restrict acc_br) {
  for (int64_t j = 0; j < d; ++j) {
    const SruStepGrads<T> g = sru_step_backward(step_input<T, IO, K, SKIP, MASK>(u, x_row, vf, vr, bf, br, mc, scale, j),
                                                c_prev[j], c_row[j], widen(gh_row[j]), gc[j], TANH, SKIP);
    gu[j * K] = narrow<IO>(g.u0);
    gu[j * K + 1] = narrow<IO>(g.u1);
    gu[j * K + 2] = narrow<IO>(g.u2);
    if constexpr (K == 4) gu[j * K + 3] = narrow<IO>(g.x_skip);
    if constexpr (K == 3 && SKIP) gx_row[j] = narrow<IO>(g.x_skip * scale);
    acc_vf[j] += g.vf;
    acc_vr[j] += g.vr;
    acc_bf[j] += g.u1;
    acc_br[j] += g.u2;
    gc[j] = g.c_prev;
  }
}

template <typename T, typename IO, int K, bool SKIP, bool TANH, bool MASK>
void forward_task(const Args<T, IO>& a, int64_t b, int64_t dir, T* c, IO* h, T* c_all, T* c_last) {
  const Block<T> blk(a, b, dir);
  const int64_t d = a.d;
  for (int64_t j = 0; j < d; ++j) c[j] = a.c0 ? a.c0[blk.state_at + j] : T(0);
  for (int64_t step = 0; step < a.L; ++step) {
    const int64_t t = dir == 0 ? step : a.L - 1 - step;
    const int64_t row = (t * a.B + b) * a.out + dir * a.d;  // unit 0 of this block in (L, B, out) tensors
    IO* h_row = h + row;
    T* c_row = c_all + row;
    if (a.pad && a.pad[t * a.B + b]) {
      for (int64_t j = 0; j < d; ++j) {
        h_row[j] = narrow<IO>(T(0));
        c_row[j] = c[j];
      }
      continue;
    }
    forward_units<T, IO, K, SKIP, TANH, MASK>(d, a.U + row * K, a.x ? a.x + row : nullptr, SRU_PARAMS_OF(blk), a.scale, c,
                                          c_row, h_row);
  }
  for (int64_t j = 0; j < d; ++j) c_last[blk.state_at + j] = c[j];
}

template <typename T, typename IO, int K, bool SKIP, bool TANH, bool MASK>
void backward_task(const Args<T, IO>& a, int64_t b, int64_t dir, const T* c_all, const IO* gh, const T* gc_last, IO* gU,
                   IO* gx, T* gc0, T* gc, const T* zeros, IO* scratch, T* acc /* 4*d: vf, vr, bf, br */) {
  const Block<T> blk(a, b, dir);
  const int64_t d = a.d;
  for (int64_t j = 0; j < d; ++j) gc[j] = gc_last ? gc_last[blk.state_at + j] : T(0);
  for (int64_t j = 0; j < 4 * d; ++j) acc[j] = T(0);
  for (int64_t step = a.L - 1; step >= 0; --step) {
    const int64_t t = dir == 0 ? step : a.L - 1 - step;
    const int64_t row = (t * a.B + b) * a.out + dir * a.d;
    IO* gu = gU + row * K;
    IO* gx_row = gx ? gx + row : scratch;  // scratch (d) takes the x gradient when nobody needs it
    if (a.pad && a.pad[t * a.B + b]) {  // c passed through unchanged: gc flows on as it is
      for (int64_t j = 0; j < d * K; ++j) gu[j] = narrow<IO>(T(0));
      for (int64_t j = 0; j < d; ++j) gx_row[j] = narrow<IO>(T(0));
      continue;
    }
    // The state before this step, in processing order.
    const T* c_prev = step == 0 ? (a.c0 ? a.c0 + blk.state_at : zeros)
                                : c_all + ((dir == 0 ? t - 1 : t + 1) * a.B + b) * a.out + dir * a.d;
    backward_units<T, IO, K, SKIP, TANH, MASK>(d, a.U + row * K, a.x ? a.x + row : nullptr, SRU_PARAMS_OF(blk), a.scale, c_prev,
                                           c_all + row, gh + row, gc, gu, gx_row, acc, acc + d, acc + 2 * d,
                                           acc + 3 * d);
  }
  if (gc0)
    for (int64_t j = 0; j < d; ++j) gc0[blk.state_at + j] = gc[j];
}

// Calls fn.template operator()<K, SKIP, TANH, MASK>() for the runtime options.
template <typename F>
void with_options(int k, bool skip, bool tanh, bool mask, const F& fn) {
  auto with_mask = [&]<int K, bool S, bool H>() {
    if (mask) fn.template operator()<K, S, H, true>();
    else fn.template operator()<K, S, H, false>();
  };
  auto with_tanh = [&]<int K, bool S>() {
    if (tanh) with_mask.template operator()<K, S, true>();
    else with_mask.template operator()<K, S, false>();
  };
  auto with_skip = [&]<int K>() {
    if (skip) with_tanh.template operator()<K, true>();
    else with_tanh.template operator()<K, false>();
  };
  if (k == 4) with_skip.template operator()<4>();
  else with_skip.template operator()<3>();
}

// Calls fn.template operator()<T, IO>() for the tensors' types: bf16 U (bf16 I/O, float arithmetic),
// else U's floating dtype for both.
template <typename F>
void with_io_types(const Tensor& U, const char* what, const F& fn) {
  if (U.dtype() == DType::BF16) return fn.template operator()<float, bf16>();
  SRU_DISPATCH_FLOATING(U.dtype(), what, [&]<typename T>() { fn.template operator()<T, T>(); });
}

}  // namespace

void forward(const SruTensors& in, const SruRecurrenceOptions& o, const std::vector<uint8_t>& pad, const Tensor& h,
             const Tensor& c_all, const Tensor& c_last) {
  with_io_types(in.U, "sru_recurrence", [&]<typename T, typename IO>() {
    const Args<T, IO> a = args_of<T, IO>(in, o, pad);
    IO* ph = h.data<IO>();
    T *pc = c_all.data<T>(), *plast = c_last.data<T>();
    with_options(o.k, o.has_skip_term, o.use_tanh, a.mask_c != nullptr, [&]<int K, bool S, bool H, bool M>() {
      parallel_for(0, a.B * a.D, 1, [&](int64_t lo, int64_t hi) {
        std::vector<T> c(a.d);
        for (int64_t task = lo; task < hi; ++task)
          forward_task<T, IO, K, S, H, M>(a, task / a.D, task % a.D, c.data(), ph, pc, plast);
      });
    });
  });
}

void backward(const SruTensors& in, const SruRecurrenceOptions& o, const std::vector<uint8_t>& pad,
              const Tensor& c_all, const Tensor& grad_h, const Tensor& grad_c_last, const Tensor& grad_U,
              const Tensor& grad_x, const Tensor& grad_weight_c, const Tensor& grad_bias, const Tensor& grad_c0) {
  with_io_types(in.U, "sru_recurrence_backward", [&]<typename T, typename IO>() {
    const Args<T, IO> a = args_of<T, IO>(in, o, pad);
    auto ptr = [](const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
    // Per-batch partial sums of d(vf, vr) and d(bf, br): (B, 2*out) each, reduced below.
    std::vector<T> part_v(a.B * 2 * a.out), part_b(a.B * 2 * a.out), zeros(a.d, T(0));
    with_options(o.k, o.has_skip_term, o.use_tanh, a.mask_c != nullptr, [&]<int K, bool S, bool H, bool M>() {
      parallel_for(0, a.B * a.D, 1, [&](int64_t lo, int64_t hi) {
        std::vector<T> gc(a.d), acc(4 * a.d);
        std::vector<IO> scratch(a.d);
        for (int64_t task = lo; task < hi; ++task) {
          const int64_t b = task / a.D, dir = task % a.D;
          backward_task<T, IO, K, S, H, M>(a, b, dir, c_all.data<T>(), grad_h.data<IO>(), ptr(grad_c_last),
                                           grad_U.data<IO>(), grad_x.defined() ? grad_x.data<IO>() : nullptr,
                                           ptr(grad_c0), gc.data(), zeros.data(), scratch.data(), acc.data());
          T* pv = part_v.data() + b * 2 * a.out;
          T* pb = part_b.data() + b * 2 * a.out;
          for (int64_t j = 0; j < a.d; ++j) {
            pv[dir * a.d + j] = acc[j];
            pv[a.out + dir * a.d + j] = acc[a.d + j];
            pb[dir * a.d + j] = acc[2 * a.d + j];
            pb[a.out + dir * a.d + j] = acc[3 * a.d + j];
          }
        }
      });
    });
    T* pgw = grad_weight_c.data<T>();
    T* pgb = grad_bias.data<T>();
    for (int64_t i = 0; i < 2 * a.out; ++i) {
      T sv = T(0), sb = T(0);
      for (int64_t b = 0; b < a.B; ++b) {
        sv += part_v[b * 2 * a.out + i];
        sb += part_b[b * 2 * a.out + i];
      }
      pgw[i] = sv;
      pgb[i] = sb;
    }
  });
}

#undef SRU_PARAM_ARGS
#undef SRU_PARAMS_OF

}  // namespace sru::cpu::SRU_KERNEL_NAMESPACE
