// The SRU recurrence's CUDA thread bodies as SRU_HD functions: ops/cuda/sru_recurrence.cu's kernels are
// grid-stride loops over them, and the CPU runs every thread of a launch in turn
// (tests/unit/test_sru_recurrence_threads.cpp) to compare them with the CPU twin bit for bit (on the
// host the gates take the CPU's exp, so only the device's __expf and its memory accesses differ). Math
// per element: ops/sru_math.h; shapes and saved state: ops/sru_recurrence.h.
//
// One column a thread (every storage type): a thread owns batch row b and output column col = dir*d + j,
// walks time in its direction carrying c in a register, and loads the next chunk of steps into a
// second register buffer while it computes the current one, so its loads stay in flight behind the
// arithmetic. U is read at ((t*B + b)*out + col)*k + m, so neighbouring threads read neighbouring
// columns. The backward thread accumulates d vf, d vr, d bf, d br of its column in T over time and
// writes them per batch row; a second kernel sums the B rows per column in order. Padded steps
// (mask_pad != 0) keep c and output h = 0.
//
// Two neighbouring columns a thread (bf16 I/O): batch row b, columns col and col + 1 (col even, both in
// one direction: d even), both c values carried, chunks as above. Why pairs (docs/gpu-notes.md, "the
// bf16 recurrence two columns a thread"): at the paper's char-LM sizes the bf16 kernels moved 2.1 TB/s
// where the float32 ones moved 3.4 with the same structure, and a bf16 value loaded alone fills a
// 32-bit register with 16 bits, so a thread's buffered chunk held half the bytes a float32 thread's
// did. Two columns fill each register: U's 2k values of a pair are k 32-bit words (element e of the
// pair in word e / 2, low half first), x, h, grad h and grad x one word each, c a float pair; every
// bf16 word is stored with one cvt.rn.bf16x2.f32 (core/float16.h's rounding on the host). Requirements
// (checked by the launcher, which otherwise runs the one-column kernels): d even, the bf16 tensors
// 4-byte aligned and c_all 8-byte aligned; then every pair's element position is even.
#pragma once

#include <cstdint>
#include <cstring>
#include <cstddef>

#include "core/float16.h"
#include "core/hd.h"
#include "ops/dropout.h"
#include "ops/sru_math.h"
#include "ops/sru_recurrence.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#define SRU_UNROLL _Pragma("unroll")
#else
#define SRU_UNROLL
#endif

namespace sru::sru_kernels {

// The recurrence kernels' arguments (T: compute type, S: storage type of U, x, h and their gradients).
template <typename T, typename S>
struct Args {
  long long L, B, d, out;
  const S *U, *x;
  const T *weight_c, *bias, *c0, *mask_c;
  const int32_t* pad;  // (L, B) or null
  const T* scale_x;    // (1) on the device, or null: then `scale`
  T scale;
  bool has_skip, use_tanh;
  MaskDraw mask_draw;  // on (mask_c null): each thread draws its column's mask value (ops/dropout.h)
};

// A tensor's data as E, or null when it is undefined (an optional operand).
template <typename E>
E* data_if_defined(const Tensor& t) {
  return t.defined() ? t.data<E>() : nullptr;
}

// The arguments of a launch over `in` (tensors on the kernels' device; pad: the (L, B) padding as int32
// or null).
template <typename T, typename S>
Args<T, S> kernel_args(const SruTensors& in, const SruRecurrenceOptions& o, const int32_t* pad) {
  const long long D = o.bidirectional ? 2 : 1;
  return {in.U.size(0), in.U.size(1), o.hidden_size, D * o.hidden_size,
          in.U.data<S>(), data_if_defined<S>(in.x), in.weight_c.data<T>(), in.bias.data<T>(),
          data_if_defined<T>(in.c0), data_if_defined<T>(in.mask_c), pad,
          data_if_defined<T>(in.scale_x), static_cast<T>(o.scale_x), o.has_skip_term, o.use_tanh, o.mask_c_draw};
}

// Where a thread's chunk starting at processing step `first` lives: element position and padding index
// of that step, and their strides per step (negative for direction 1, which walks time backwards).
// Columns: Column or ColumnPair, below (a, b, dir, time_of, position_of).
template <typename Columns>
struct StepWalk {
  long long pos, pad_at, stride, pad_stride;
  SRU_HD StepWalk(const Columns& column, long long first) {
    const long long t = column.time_of(first);
    const bool forward = column.dir == 0;
    pos = column.position_of(t);
    pad_at = t * column.a.B + column.b;
    stride = forward ? column.a.B * column.a.out : -column.a.B * column.a.out;
    pad_stride = forward ? column.a.B : -column.a.B;
  }
};

// Two floats moved as one 8-byte access on the device.
struct alignas(8) FloatPair {
  float v[2];
};

// ---- One column a thread: every storage type (float, double; bf16 with float compute) ----

// One step's inputs as stored (S: float, double or bf16), before widening.
template <typename S>
struct RawStep {
  S u0, u1, u2, x_skip;
};

// One thread's column: batch row b, output column col = dir*d + j, its per-unit parameters, and the
// mapping from processing step (direction 1 runs from t = L-1 down) to time and element position.
template <typename T, typename S>
struct Column {
  const Args<T, S>& a;
  long long idx, b, col, dir;
  T vf, vr, bf, br, mask, c0, scale;

  SRU_HD Column(const Args<T, S>& args, long long i)
      : a(args), idx(i), b(i / args.out), col(i % args.out), dir(col / args.d), vf(args.weight_c[col]),
        vr(args.weight_c[args.out + col]), bf(args.bias[col]), br(args.bias[args.out + col]),
        mask(args.mask_c ? args.mask_c[i] : args.mask_draw.on ? args.mask_draw.template value<T>(i) : T(1)),
        c0(args.c0 ? args.c0[i] : T(0)),
        scale(args.scale_x ? args.scale_x[0] : args.scale) {}
  // A loaded step ready for the step math: widened to T, with the column's parameters, and
  // x' = scale * x (k = 3; with k = 4 x' is U's 4th column).
  template <int K>
  SRU_HD SruStepInput<T> widened(const RawStep<S>& raw) const {
    SruStepInput<T> in;
    in.u0 = static_cast<T>(raw.u0);
    in.u1 = static_cast<T>(raw.u1);
    in.u2 = static_cast<T>(raw.u2);
    in.x_skip = static_cast<T>(raw.x_skip);
    if constexpr (K == 3) in.x_skip *= scale;
    in.vf = vf;
    in.vr = vr;
    in.bf = bf;
    in.br = br;
    in.mask = mask;
    return in;
  }
  SRU_HD long long time_of(long long step) const { return dir == 0 ? step : a.L - 1 - step; }
  SRU_HD long long position_of(long long t) const { return (t * a.B + b) * a.out + col; }

  // The step's stored values at element position pos (U row pos*K, x at pos), as loaded: any
  // arithmetic on them here (scaling x, or widening bf16 to float, a shift) would wait for the load
  // at once, making each step's loads wait a round trip before the next step's are issued (the stall
  // ncu showed, docs/gpu-notes.md); widened() does both when the step is computed.
  template <int K>
  SRU_HD RawStep<S> input(long long pos) const {
    RawStep<S> in;
    const S* u = a.U + pos * K;
    in.u0 = u[0];
    in.u1 = u[1];
    in.u2 = u[2];
    if constexpr (K == 4) in.x_skip = u[3];
    else in.x_skip = a.has_skip ? a.x[pos] : static_cast<S>(T(0));
    return in;
  }
};

// The inputs of kChunk consecutive processing steps of one column. Loads go chunk by chunk, one chunk
// ahead of the arithmetic (two buffers): one thread per column leaves few warps per SM (B*out
// threads), so a thread must keep its own loads in flight while it computes; a thread that loaded a
// chunk and then computed it waited a memory round trip per chunk (the profile in docs/gpu-notes.md).
// Float64 columns take half the steps per chunk: eight doubles per buffer spilled to local memory.
// 16-bit storage keeps 8 steps: 16 left the bf16 forward kernel's time unchanged (62 vs 63 us at L 256,
// d 1024, B 32; docs/gpu-notes.md) for 58 more registers.
template <typename T>
constexpr int kChunk = sizeof(T) == 8 ? 4 : 8;

template <typename T, typename S>
struct ForwardChunk {
  RawStep<S> in[kChunk<T>];
  bool padded[kChunk<T>];
};

template <typename T, typename S, int K, bool Pad>
SRU_HD void load_forward(const Column<T, S>& column, long long first, ForwardChunk<T, S>& chunk) {
  const StepWalk<Column<T, S>> w(column, first);
SRU_UNROLL
  for (int s = 0; s < kChunk<T>; ++s) {
    if (first + s >= column.a.L) break;
    chunk.in[s] = column.template input<K>(w.pos + s * w.stride);
    chunk.padded[s] = Pad && column.a.pad[w.pad_at + s * w.pad_stride];
  }
}

template <typename T, typename S, int K, bool Pad>
SRU_HD void compute_forward(const Column<T, S>& column, long long first, const ForwardChunk<T, S>& chunk,
                                                T& c, S* __restrict__ h, T* __restrict__ c_all) {
  const StepWalk<Column<T, S>> w(column, first);
SRU_UNROLL
  for (int s = 0; s < kChunk<T>; ++s) {
    if (first + s >= column.a.L) break;
    const long long pos = w.pos + s * w.stride;
    if (Pad && chunk.padded[s]) {
      h[pos] = static_cast<S>(T(0));
      c_all[pos] = c;
      continue;
    }
    T hv;
    c = sru_step_forward(column.template widened<K>(chunk.in[s]), c, column.a.use_tanh, column.a.has_skip, hv);
    h[pos] = static_cast<S>(hv);
    c_all[pos] = c;
  }
}

// The forward pass of one column (thread idx of B * out): h and every step's c, and the last c.
template <typename T, typename S, int K, bool Pad>
SRU_HD void column_forward_thread(const Args<T, S>& a, long long idx, S* __restrict__ h, T* __restrict__ c_all,
                                  T* __restrict__ c_last) {
  const Column<T, S> column(a, idx);
  T c = column.c0;
  ForwardChunk<T, S> even, odd;  // chunks 0, 2, 4, ... and 1, 3, 5, ...
  if (a.L > 0) load_forward<T, S, K, Pad>(column, 0, even);
  for (long long first = 0; first < a.L; first += 2 * kChunk<T>) {
    if (first + kChunk<T> < a.L) load_forward<T, S, K, Pad>(column, first + kChunk<T>, odd);
    compute_forward<T, S, K, Pad>(column, first, even, c, h, c_all);
    if (first + kChunk<T> >= a.L) break;
    if (first + 2 * kChunk<T> < a.L) load_forward<T, S, K, Pad>(column, first + 2 * kChunk<T>, even);
    compute_forward<T, S, K, Pad>(column, first + kChunk<T>, odd, c, h, c_all);
  }
  c_last[idx] = c;
}

// Processing steps last, last-1, ..., last-kChunk+1 (backwards); c_edge is c at step last-kChunk, the
// state before the chunk's earliest step (c0 when that is step 0), so every step's c_prev is at hand.
template <typename T, typename S>
struct BackwardChunk {
  RawStep<S> in[kChunk<T>];
  T c_cur[kChunk<T>], c_edge;
  S g_h[kChunk<T>];
  bool padded[kChunk<T>];
};

template <typename T, typename S, int K, bool Pad>
SRU_HD void load_backward(const Column<T, S>& column, long long last, const T* __restrict__ c_all,
                                              const S* __restrict__ gh, BackwardChunk<T, S>& chunk) {
  const StepWalk<Column<T, S>> w(column, last);
SRU_UNROLL
  for (int s = 0; s < kChunk<T>; ++s) {
    if (last - s < 0) break;
    const long long pos = w.pos - s * w.stride;
    chunk.in[s] = column.template input<K>(pos);
    chunk.c_cur[s] = c_all[pos];
    chunk.g_h[s] = gh[pos];
    chunk.padded[s] = Pad && column.a.pad[w.pad_at - s * w.pad_stride];
  }
  chunk.c_edge = last - kChunk<T> >= 0 ? c_all[w.pos - kChunk<T> * w.stride] : column.c0;
}

template <typename T, typename S, int K, bool Pad>
SRU_HD void compute_backward(const Column<T, S>& column, long long last, const BackwardChunk<T, S>& chunk,
                                                 T& gc, T (&acc)[4], S* __restrict__ gU, S* __restrict__ gx) {
  const StepWalk<Column<T, S>> w(column, last);
  const Args<T, S>& a = column.a;
SRU_UNROLL
  for (int s = 0; s < kChunk<T>; ++s) {
    if (last - s < 0) break;
    const long long pos = w.pos - s * w.stride;
    if (Pad && chunk.padded[s]) {  // c passed through unchanged: gc flows on as it is
      for (int k = 0; k < K; ++k) gU[pos * K + k] = static_cast<S>(T(0));
      if (gx) gx[pos] = static_cast<S>(T(0));
      continue;
    }
    const T c_prev = last - s == 0 ? column.c0 : (s + 1 < kChunk<T> ? chunk.c_cur[s + 1] : chunk.c_edge);
    const SruStepGrads<T> g =
        sru_step_backward(column.template widened<K>(chunk.in[s]), c_prev, chunk.c_cur[s], static_cast<T>(chunk.g_h[s]), gc,
                          a.use_tanh, a.has_skip);
    gU[pos * K] = static_cast<S>(g.u0);
    gU[pos * K + 1] = static_cast<S>(g.u1);
    gU[pos * K + 2] = static_cast<S>(g.u2);
    if constexpr (K == 4) gU[pos * K + 3] = static_cast<S>(g.x_skip);
    if (K == 3 && a.has_skip && gx) gx[pos] = static_cast<S>(g.x_skip * column.scale);
    acc[0] += g.vf;
    acc[1] += g.vr;
    acc[2] += g.u1;
    acc[3] += g.u2;
    gc = g.c_prev;
  }
}

// The backward pass of one column (thread idx of B * out): grad U, grad x and grad c0 of the column, and
// its sums of d vf, d vr, d bf, d br over the steps into part_v / part_b (B, 2 out) at its batch row.
template <typename T, typename S, int K, bool Pad>
SRU_HD void column_backward_thread(const Args<T, S>& a, long long idx, const T* __restrict__ c_all,
                                   const S* __restrict__ gh, const T* __restrict__ gc_last, S* __restrict__ gU,
                                   S* __restrict__ gx, T* __restrict__ gc0, T* __restrict__ part_v,
                                   T* __restrict__ part_b) {
  const Column<T, S> column(a, idx);
  T gc = gc_last ? gc_last[idx] : T(0);
  T acc[4] = {T(0), T(0), T(0), T(0)};  // d vf, d vr, d bf, d br of this column and batch row
  // Walks the processing order backwards (step = L-1 .. 0), kChunk steps at a time, loading a chunk ahead.
  BackwardChunk<T, S> even, odd;
  if (a.L > 0) load_backward<T, S, K, Pad>(column, a.L - 1, c_all, gh, even);
  for (long long last = a.L - 1; last >= 0; last -= 2 * kChunk<T>) {
    if (last - kChunk<T> >= 0) load_backward<T, S, K, Pad>(column, last - kChunk<T>, c_all, gh, odd);
    compute_backward<T, S, K, Pad>(column, last, even, gc, acc, gU, gx);
    if (last - kChunk<T> < 0) break;
    if (last - 2 * kChunk<T> >= 0) load_backward<T, S, K, Pad>(column, last - 2 * kChunk<T>, c_all, gh, even);
    compute_backward<T, S, K, Pad>(column, last - kChunk<T>, odd, gc, acc, gU, gx);
  }
  if (gc0) gc0[idx] = gc;
  T* pv = part_v + column.b * 2 * a.out;
  T* pb = part_b + column.b * 2 * a.out;
  pv[column.col] = acc[0];
  pv[a.out + column.col] = acc[1];
  pb[column.col] = acc[2];
  pb[a.out + column.col] = acc[3];
}

// ---- Two neighbouring columns a thread: bf16 I/O ----

// 4- and 8-byte accesses: on the device read-only cache loads (a kernel never writes what it reads) and
// plain stores (the launcher checked the alignment); memcpy on the host, where reading bf16 storage
// through a uint32_t pointer would break aliasing rules.
SRU_HD uint32_t load_word(const bf16* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(reinterpret_cast<const unsigned*>(p));
#else
  uint32_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
#endif
}
SRU_HD void store_word(bf16* p, uint32_t w) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint32_t*>(p) = w;
#else
  std::memcpy(static_cast<void*>(p), &w, sizeof w);
#endif
}
SRU_HD FloatPair load_float_pair(const float* p) {
#if defined(__CUDA_ARCH__)
  const float2 v = __ldg(reinterpret_cast<const float2*>(p));
  return FloatPair{{v.x, v.y}};
#else
  FloatPair v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}
SRU_HD void store_float_pair(float* p, FloatPair v) {
#if defined(__CUDA_ARCH__)
  // An 8-byte store written out: as a float2 assignment NVVM split some of the unrolled steps' stores
  // into two 4-byte ones.
  // volatile: an asm without outputs is otherwise free to be dropped or moved.
  asm volatile("st.global.v2.f32 [%0], {%1, %2};" : : "l"(p), "f"(v.v[0]), "f"(v.v[1]));
#else
  std::memcpy(p, &v, sizeof v);
#endif
}

// Half `high` (0: low, 1: high) of a word of two bf16 values, widened to float exactly.
SRU_HD float bf16_half(uint32_t word, int high) { return float_from_bits(high ? word & 0xFFFF0000u : word << 16); }

// lo and hi rounded to bf16 (nearest even, NaN -> 0x7FFF) in one word, lo in the low half.
SRU_HD uint32_t bf16_word(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  return same_bits_as<uint32_t>(__floats2bfloat162_rn(lo, hi));
#else
  return static_cast<uint32_t>(bf16_bits_from_float(lo)) | static_cast<uint32_t>(bf16_bits_from_float(hi)) << 16;
#endif
}

// Whether the pair kernels can run a launch: d even (a pair never straddles the two directions), every
// bf16 tensor it reads or writes 4-byte aligned (null ones aside) and the saved c 8-byte aligned.
template <size_t N>
bool column_pairs_fit(const Args<float, bf16>& a, const void* const (&bf16_tensors)[N], const float* c_all) {
  auto aligned = [](const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; };
  bool fit = a.d % 2 == 0 && aligned(c_all, 8);
  for (const void* t : bf16_tensors) fit = fit && aligned(t, 4);  // null is aligned
  return fit;
}

// Steps a thread buffers per chunk (two chunks: one loading while the other is computed). A step of a
// pair holds k + 1 words of bf16 values (forward), plus the c pair and a grad h word (backward). The
// forward takes 6 so that it fits 96 registers (ops/cuda/sru_recurrence.cu, pair_forward_kernel); the
// backward keeps the one-column kernels' 8 at ~200 registers (10 warps an SM, no spills).
constexpr int kPairForwardChunk = 6;
constexpr int kPairBackwardChunk = 8;

// One step's stored values for the pair: U's 2k values in k words, x (k = 3 with the skip term) in one.
template <int K>
struct PairStep {
  uint32_t u[K];
  uint32_t x;
};

// One thread's two columns: batch row b, output columns col and col + 1 (col even) in direction dir.
struct ColumnPair {
  using A = Args<float, bf16>;
  const A& a;
  long long idx, b, col, dir;  // idx = b * out + col, the first column's state index
  float vf[2], vr[2], bf[2], br[2], mask[2], c0[2], scale;

  SRU_HD ColumnPair(const A& args, long long pair)
      : a(args), idx(2 * pair), b(2 * pair / args.out), col(2 * pair % args.out), dir(col / args.d),
        scale(args.scale_x ? args.scale_x[0] : args.scale) {
    for (int i = 0; i < 2; ++i) {
      vf[i] = a.weight_c[col + i];
      vr[i] = a.weight_c[a.out + col + i];
      bf[i] = a.bias[col + i];
      br[i] = a.bias[a.out + col + i];
      mask[i] = a.mask_c ? a.mask_c[idx + i] : a.mask_draw.on ? a.mask_draw.template value<float>(idx + i) : 1.0f;
      c0[i] = a.c0 ? a.c0[idx + i] : 0.0f;
    }
  }
  SRU_HD long long time_of(long long step) const { return dir == 0 ? step : a.L - 1 - step; }
  SRU_HD long long position_of(long long t) const { return (t * a.B + b) * a.out + col; }

  // The pair's stored values at element position pos (even), as loaded: widened when computed
  // (widening at the load would make the next loads wait for this one, docs/gpu-notes.md).
  template <int K>
  SRU_HD PairStep<K> input(long long pos) const {
    PairStep<K> in;
    SRU_UNROLL
    for (int w = 0; w < K; ++w) in.u[w] = load_word(a.U + pos * K + 2 * w);
    in.x = K == 3 && a.has_skip ? load_word(a.x + pos) : 0u;
    return in;
  }
  // Column i's step input from a loaded step: what Column::widened gives for that column alone.
  template <int K>
  SRU_HD SruStepInput<float> widened(const PairStep<K>& raw, int i) const {
    auto element = [&](int e) { return bf16_half(raw.u[e / 2], e % 2); };
    SruStepInput<float> in;
    in.u0 = element(i * K);
    in.u1 = element(i * K + 1);
    in.u2 = element(i * K + 2);
    in.x_skip = K == 4 ? element(i * K + 3) : bf16_half(raw.x, i) * scale;
    in.vf = vf[i];
    in.vr = vr[i];
    in.bf = bf[i];
    in.br = br[i];
    in.mask = mask[i];
    return in;
  }
};

template <int K>
struct PairForwardChunk {
  PairStep<K> in[kPairForwardChunk];
  uint32_t padded = 0;  // bit s: step s of the chunk is padded (one register where an array of flags took one each)
};

template <int K, bool Pad>
SRU_HD void load_pair_forward(const ColumnPair& p, long long first, PairForwardChunk<K>& chunk) {
  const StepWalk<ColumnPair> w(p, first);
  chunk.padded = 0;
  SRU_UNROLL
  for (int s = 0; s < kPairForwardChunk; ++s) {
    if (first + s >= p.a.L) break;
    chunk.in[s] = p.template input<K>(w.pos + s * w.stride);
    if (Pad && p.a.pad[w.pad_at + s * w.pad_stride]) chunk.padded |= 1u << s;
  }
}

template <int K, bool Pad>
SRU_HD void compute_pair_forward(const ColumnPair& p, long long first, const PairForwardChunk<K>& chunk, float (&c)[2],
                                 bf16* __restrict__ h, float* __restrict__ c_all) {
  const StepWalk<ColumnPair> w(p, first);
  SRU_UNROLL
  for (int s = 0; s < kPairForwardChunk; ++s) {
    if (first + s >= p.a.L) break;
    const long long pos = w.pos + s * w.stride;
    if (Pad && (chunk.padded >> s & 1u)) {  // both columns share the batch row's padding
      store_word(h + pos, 0u);
      store_float_pair(c_all + pos, FloatPair{{c[0], c[1]}});
      continue;
    }
    float hv[2];
    SRU_UNROLL
    for (int i = 0; i < 2; ++i)
      c[i] = sru_step_forward(p.template widened<K>(chunk.in[s], i), c[i], p.a.use_tanh, p.a.has_skip, hv[i]);
    store_word(h + pos, bf16_word(hv[0], hv[1]));
    store_float_pair(c_all + pos, FloatPair{{c[0], c[1]}});
  }
}

// The forward pass of one column pair (thread `pair` of B * out / 2): h and every step's c, and the
// last c.
template <int K, bool Pad>
SRU_HD void pair_forward_thread(const Args<float, bf16>& a, long long pair, bf16* __restrict__ h, float* __restrict__ c_all,
                                float* __restrict__ c_last) {
  const ColumnPair p(a, pair);
  float c[2] = {p.c0[0], p.c0[1]};
  PairForwardChunk<K> even, odd;  // chunks 0, 2, 4, ... and 1, 3, 5, ...
  if (a.L > 0) load_pair_forward<K, Pad>(p, 0, even);
  for (long long first = 0; first < a.L; first += 2 * kPairForwardChunk) {
    if (first + kPairForwardChunk < a.L) load_pair_forward<K, Pad>(p, first + kPairForwardChunk, odd);
    compute_pair_forward<K, Pad>(p, first, even, c, h, c_all);
    if (first + kPairForwardChunk >= a.L) break;
    if (first + 2 * kPairForwardChunk < a.L) load_pair_forward<K, Pad>(p, first + 2 * kPairForwardChunk, even);
    compute_pair_forward<K, Pad>(p, first + kPairForwardChunk, odd, c, h, c_all);
  }
  c_last[p.idx] = c[0];  // scalar stores: c_last's alignment is not among the launcher's checks
  c_last[p.idx + 1] = c[1];
}

// Processing steps last, last-1, ..., last-kPairBackwardChunk+1 (backwards); c_edge is the pair's c at step
// last-kPairBackwardChunk, the state before the chunk's earliest step (c0 when that is step 0).
template <int K>
struct PairBackwardChunk {
  PairStep<K> in[kPairBackwardChunk];
  FloatPair c_cur[kPairBackwardChunk], c_edge;
  uint32_t g_h[kPairBackwardChunk];
  uint32_t padded = 0;  // bit s: step s of the chunk is padded
};

template <int K, bool Pad>
SRU_HD void load_pair_backward(const ColumnPair& p, long long last, const float* __restrict__ c_all,
                               const bf16* __restrict__ gh, PairBackwardChunk<K>& chunk) {
  const StepWalk<ColumnPair> w(p, last);
  chunk.padded = 0;
  SRU_UNROLL
  for (int s = 0; s < kPairBackwardChunk; ++s) {
    if (last - s < 0) break;
    const long long pos = w.pos - s * w.stride;
    chunk.in[s] = p.template input<K>(pos);
    chunk.c_cur[s] = load_float_pair(c_all + pos);
    chunk.g_h[s] = load_word(gh + pos);
    if (Pad && p.a.pad[w.pad_at - s * w.pad_stride]) chunk.padded |= 1u << s;
  }
  chunk.c_edge = last - kPairBackwardChunk >= 0 ? load_float_pair(c_all + w.pos - kPairBackwardChunk * w.stride) : FloatPair{{p.c0[0], p.c0[1]}};
}

// The gradients a backward thread accumulates and carries: d c of both columns, and per column the sums
// of d vf, d vr, d bf, d br over its steps.
struct PairGradients {
  float gc[2];
  float acc[2][4];
};

template <int K, bool Pad>
SRU_HD void compute_pair_backward(const ColumnPair& p, long long last, const PairBackwardChunk<K>& chunk, PairGradients& g,
                                  bf16* __restrict__ gU, bf16* __restrict__ gx) {
  const StepWalk<ColumnPair> w(p, last);
  const Args<float, bf16>& a = p.a;
  SRU_UNROLL
  for (int s = 0; s < kPairBackwardChunk; ++s) {
    if (last - s < 0) break;
    const long long pos = w.pos - s * w.stride;
    if (Pad && (chunk.padded >> s & 1u)) {  // c passed through unchanged: gc flows on as it is
      SRU_UNROLL
      for (int word = 0; word < K; ++word) store_word(gU + pos * K + 2 * word, 0u);
      if (gx) store_word(gx + pos, 0u);
      continue;
    }
    const FloatPair c_prev = last - s == 0 ? FloatPair{{p.c0[0], p.c0[1]}}
                                           : (s + 1 < kPairBackwardChunk ? chunk.c_cur[s + 1] : chunk.c_edge);
    float grad_U[2 * K], grad_x[2];  // the pair's U gradients in U's order, and x's
    SRU_UNROLL
    for (int i = 0; i < 2; ++i) {
      const SruStepGrads<float> step =
          sru_step_backward(p.template widened<K>(chunk.in[s], i), c_prev.v[i], chunk.c_cur[s].v[i],
                            bf16_half(chunk.g_h[s], i), g.gc[i], a.use_tanh, a.has_skip);
      grad_U[i * K] = step.u0;
      grad_U[i * K + 1] = step.u1;
      grad_U[i * K + 2] = step.u2;
      if constexpr (K == 4) grad_U[i * K + 3] = step.x_skip;
      grad_x[i] = step.x_skip * p.scale;
      g.acc[i][0] += step.vf;
      g.acc[i][1] += step.vr;
      g.acc[i][2] += step.u1;
      g.acc[i][3] += step.u2;
      g.gc[i] = step.c_prev;
    }
    SRU_UNROLL
    for (int word = 0; word < K; ++word) store_word(gU + pos * K + 2 * word, bf16_word(grad_U[2 * word], grad_U[2 * word + 1]));
    if (K == 3 && a.has_skip && gx) store_word(gx + pos, bf16_word(grad_x[0], grad_x[1]));
  }
}

// Outputs of the backward pass (grad_c_last, gx and gc0 may be null); part_v and part_b are (B, 2 out)
// each, the thread's column sums of d vf / d vr and d bf / d br over its steps, summed over the batch
// afterwards.
struct PairBackwardOutputs {
  const float* c_all;
  const bf16* gh;
  const float* gc_last;
  bf16 *gU, *gx;
  float *gc0, *part_v, *part_b;
};

// The backward pass of one column pair (thread `pair` of B * out / 2).
template <int K, bool Pad>
SRU_HD void pair_backward_thread(const Args<float, bf16>& a, long long pair, const PairBackwardOutputs& o) {
  const ColumnPair p(a, pair);
  PairGradients g{};
  for (int i = 0; i < 2; ++i) g.gc[i] = o.gc_last ? o.gc_last[p.idx + i] : 0.0f;
  PairBackwardChunk<K> even, odd;  // walks the processing order backwards, a chunk ahead
  if (a.L > 0) load_pair_backward<K, Pad>(p, a.L - 1, o.c_all, o.gh, even);
  for (long long last = a.L - 1; last >= 0; last -= 2 * kPairBackwardChunk) {
    if (last - kPairBackwardChunk >= 0) load_pair_backward<K, Pad>(p, last - kPairBackwardChunk, o.c_all, o.gh, odd);
    compute_pair_backward<K, Pad>(p, last, even, g, o.gU, o.gx);
    if (last - kPairBackwardChunk < 0) break;
    if (last - 2 * kPairBackwardChunk >= 0) load_pair_backward<K, Pad>(p, last - 2 * kPairBackwardChunk, o.c_all, o.gh, even);
    compute_pair_backward<K, Pad>(p, last - kPairBackwardChunk, odd, g, o.gU, o.gx);
  }
  for (int i = 0; i < 2; ++i) {
    if (o.gc0) o.gc0[p.idx + i] = g.gc[i];
    float* pv = o.part_v + p.b * 2 * a.out;
    float* pb = o.part_b + p.b * 2 * a.out;
    pv[p.col + i] = g.acc[i][0];
    pv[a.out + p.col + i] = g.acc[i][1];
    pb[p.col + i] = g.acc[i][2];
    pb[a.out + p.col + i] = g.acc[i][3];
  }
}

}  // namespace sru::sru_kernels
