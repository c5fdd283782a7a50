// The CUDA recurrence's thread bodies (ops/sru_recurrence_threads.h: one column a thread for float,
// double and bf16 I/O; two neighbouring columns a thread for bf16 I/O) run here on the CPU, every thread
// of a launch in turn, against the CPU twin (cpu::sru_recurrence_forward / backward). On the host the
// bodies take the twin's exp, so everything must agree to the bit: h, c at every step, the last c,
// grad U, grad x, grad c0, and grad weight_c / grad bias once the threads' per-row partial sums are
// added over the batch in order, as the twin adds them. What this cannot check is the device's own exp
// and its memory accesses (CudaParity.SruRecurrence*).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ops/dropout.h"
#include "ops/sru_recurrence.h"
#include "ops/sru_recurrence_threads.h"
#include "testing.h"

using namespace sru;

namespace {

using sru_kernels::data_if_defined;

struct Case {
  int64_t L, B, d;
  int k;
  bool bidirectional, skip, use_tanh;
  enum Extras { kNone, kFilled, kDrawn } extras;  // c0, a filled dropout mask, padding and grad c_last; or a drawn mask
  DType io;                                      // U, x, h and their gradients; the rest float32 (float64 for f64)
};

struct Outputs {
  Tensor h, c_all, c_last, gU, gx, gw, gb, gc0;
};

struct Problem {
  SruTensors in;
  SruRecurrenceOptions o;
  Tensor gh, gc_last;
};

DType compute_dtype(DType io) { return io == DType::F64 ? DType::F64 : DType::F32; }

Problem problem_of(const Case& c, uint64_t seed) {
  Problem p;
  p.o.hidden_size = c.d;
  p.o.bidirectional = c.bidirectional;
  p.o.k = c.k;
  p.o.has_skip_term = c.skip;
  p.o.use_tanh = c.use_tanh;
  p.o.scale_x = 0.75;
  const int64_t out = (c.bidirectional ? 2 : 1) * c.d;
  const DType compute = compute_dtype(c.io);
  Generator gen(seed);
  auto io_of = [&](Shape s, double scale) { return Tensor::uniform(s, -scale, scale, compute, gen).to(c.io); };
  auto state_of = [&](Shape s, double low, double high) { return Tensor::uniform(s, low, high, compute, gen); };
  p.in.U = io_of({c.L, c.B, out * c.k}, 3);
  if (c.skip && c.k == 3) p.in.x = io_of({c.L, c.B, out}, 2);  // as the op passes it: only where it is read
  p.gh = io_of({c.L, c.B, out}, 1);
  p.in.U.view({-1}).narrow0(1, 1).fill_(std::nan(""));  // NaN stays NaN through both
  p.gh.view({-1}).narrow0(2, 1).fill_(3.0e38);          // a gradient that overflows to infinity in float
  p.in.weight_c = state_of({2 * out}, -1, 1);
  p.in.bias = state_of({2 * out}, -1, 1);
  if (c.extras == Case::kFilled) {
    p.in.c0 = state_of({c.B, out}, -1, 1);
    p.in.mask_c = state_of({c.B, out}, 0, 2);
    p.in.mask_pad = Tensor::zeros({c.L, c.B}, DType::F32);
    for (int64_t t = 0; t < c.L; t += 3) p.in.mask_pad.data<float>()[t * c.B + (t % c.B)] = 1;  // padded steps here and there
    p.gc_last = state_of({c.B, out}, -1, 1);
  } else if (c.extras == Case::kDrawn) {
    p.o.mask_c_draw = draw_dropout_mask({c.B, out}, 0.25, gen);
  }
  return p;
}

Outputs allocated(const Problem& p) {
  const int64_t L = p.in.U.size(0), B = p.in.U.size(1), out = p.in.U.size(2) / p.o.k;
  const DType io = p.in.U.dtype(), compute = compute_dtype(io);
  Outputs r;
  r.h = Tensor::empty({L, B, out}, io);
  r.c_all = Tensor::empty({L, B, out}, compute);
  r.c_last = Tensor::empty({B, out}, compute);
  r.gU = Tensor::empty(p.in.U.shape(), io);
  if (p.in.x.defined()) r.gx = Tensor::empty({L, B, out}, io);
  r.gw = Tensor::empty({2 * out}, compute);
  r.gb = Tensor::empty({2 * out}, compute);
  if (p.in.c0.defined()) r.gc0 = Tensor::empty({B, out}, compute);
  return r;
}

Outputs run_twin(const Problem& p) {
  Outputs r = allocated(p);
  cpu::sru_recurrence_forward(p.in, p.o, r.h, r.c_all, r.c_last);
  cpu::sru_recurrence_backward(p.in, p.o, r.c_all, p.gh, p.gc_last, r.gU, r.gx, r.gw, r.gb, r.gc0);
  return r;
}

// grad weight_c / grad bias: the threads' per-row partial sums (B, 2 out) added over the batch in order.
template <typename T>
void sum_over_batch(const Tensor& part_v, const Tensor& part_b, Outputs& r) {
  const int64_t B = part_v.size(0), width = part_v.size(1);
  for (int64_t i = 0; i < width; ++i) {
    T sv = 0, sb = 0;
    for (int64_t b = 0; b < B; ++b) {
      sv += part_v.data<T>()[b * width + i];
      sb += part_b.data<T>()[b * width + i];
    }
    r.gw.data<T>()[i] = sv;
    r.gb.data<T>()[i] = sb;
  }
}

// Every thread of the one-column kernels' launches (B * out threads), in turn.
template <typename T, typename S, int K, bool Pad>
Outputs run_columns(const Problem& p, const int32_t* pad) {
  Outputs r = allocated(p);
  const auto a = sru_kernels::kernel_args<T, S>(p.in, p.o, pad);
  for (long long i = 0; i < a.B * a.out; ++i)
    sru_kernels::column_forward_thread<T, S, K, Pad>(a, i, r.h.data<S>(), r.c_all.data<T>(), r.c_last.data<T>());
  const Tensor part_v = Tensor::empty({a.B, 2 * a.out}, r.gw.dtype()), part_b = Tensor::empty({a.B, 2 * a.out}, r.gw.dtype());
  for (long long i = 0; i < a.B * a.out; ++i)
    sru_kernels::column_backward_thread<T, S, K, Pad>(a, i, r.c_all.data<T>(), p.gh.data<S>(), data_if_defined<T>(p.gc_last),
                                                      r.gU.data<S>(), data_if_defined<S>(r.gx), data_if_defined<T>(r.gc0),
                                                      part_v.data<T>(), part_b.data<T>());
  sum_over_batch<T>(part_v, part_b, r);
  return r;
}

// Every thread of the pair kernels' launches (B * out / 2 threads), in turn.
template <int K, bool Pad>
Outputs run_pairs(const Problem& p, const int32_t* pad) {
  Outputs r = allocated(p);
  const auto a = sru_kernels::kernel_args<float, bf16>(p.in, p.o, pad);
  const void* const bf16_tensors[] = {a.U, a.x, p.gh.data_ptr(), r.h.data_ptr(), r.gU.data_ptr(), data_if_defined<bf16>(r.gx)};
  EXPECT_TRUE(sru_kernels::column_pairs_fit(a, bf16_tensors, r.c_all.data<float>()));
  const long long pairs = a.B * a.out / 2;
  for (long long i = 0; i < pairs; ++i)
    sru_kernels::pair_forward_thread<K, Pad>(a, i, r.h.data<bf16>(), r.c_all.data<float>(), r.c_last.data<float>());
  const Tensor part_v = Tensor::empty({a.B, 2 * a.out}, DType::F32), part_b = Tensor::empty({a.B, 2 * a.out}, DType::F32);
  const sru_kernels::PairBackwardOutputs o{r.c_all.data<float>(), p.gh.data<bf16>(), data_if_defined<float>(p.gc_last),
                                           r.gU.data<bf16>(), data_if_defined<bf16>(r.gx), data_if_defined<float>(r.gc0),
                                           part_v.data<float>(), part_b.data<float>()};
  for (long long i = 0; i < pairs; ++i) sru_kernels::pair_backward_thread<K, Pad>(a, i, o);
  sum_over_batch<float>(part_v, part_b, r);
  return r;
}

enum class Layout { kOneColumn, kPairs };

template <int K, bool Pad>
Outputs run_threads(const Problem& p, Layout layout, const int32_t* pad) {
  if (layout == Layout::kPairs) return run_pairs<K, Pad>(p, pad);
  switch (p.in.U.dtype()) {
    case DType::BF16: return run_columns<float, bf16, K, Pad>(p, pad);
    case DType::F64: return run_columns<double, double, K, Pad>(p, pad);
    default: return run_columns<float, float, K, Pad>(p, pad);
  }
}

Outputs run_threads(const Problem& p, Layout layout) {
  std::vector<int32_t> pad;  // the launcher's int per (t, b)
  if (p.in.mask_pad.defined())
    for (const float v : p.in.mask_pad.to_vector<float>()) pad.push_back(v != 0);
  const int32_t* at = pad.empty() ? nullptr : pad.data();
  if (p.o.k == 4) return at ? run_threads<4, true>(p, layout, at) : run_threads<4, false>(p, layout, at);
  return at ? run_threads<3, true>(p, layout, at) : run_threads<3, false>(p, layout, at);
}

void expect_same_bits(const Tensor& threads, const Tensor& twin, const char* what) {
  ASSERT_EQ(threads.defined(), twin.defined()) << what;
  if (!threads.defined()) return;
  ASSERT_EQ(threads.numel(), twin.numel()) << what;
  if (std::memcmp(threads.data_ptr(), twin.data_ptr(), threads.nbytes()) == 0) return;
  const std::vector<double> a = threads.to(DType::F64).to_vector<double>(), b = twin.to(DType::F64).to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))))
      FAIL() << what << " element " << i << ": threads " << a[i] << ", twin " << b[i];
}

void expect_twins_bits(const Case& c, Layout layout, uint64_t seed) {
  const Problem p = problem_of(c, seed);
  const Outputs threads = run_threads(p, layout), twin = run_twin(p);
  expect_same_bits(threads.h, twin.h, "h");
  expect_same_bits(threads.c_all, twin.c_all, "c at every step");
  expect_same_bits(threads.c_last, twin.c_last, "last c");
  expect_same_bits(threads.gU, twin.gU, "grad U");
  expect_same_bits(threads.gx, twin.gx, "grad x");
  expect_same_bits(threads.gw, twin.gw, "grad weight_c");
  expect_same_bits(threads.gb, twin.gb, "grad bias");
  expect_same_bits(threads.gc0, twin.gc0, "grad c0");
}

// Calls f(k, bidirectional, skip, extras) over the option grid; without the skip term, tanh.
template <typename F>
void for_each_option(F&& f) {
  for (const int k : {3, 4})
    for (const bool bidirectional : {false, true})
      for (const bool skip : {true, false})
        for (const auto extras : {Case::kNone, Case::kFilled, Case::kDrawn}) {
          SCOPED_TRACE(::testing::Message() << "k " << k << (bidirectional ? " bidirectional" : "")
                                            << (skip ? " skip" : " tanh, no skip") << " extras " << extras);
          f(k, bidirectional, skip, extras);
        }
}

}  // namespace

TEST(SruRecurrenceThreads, EveryPairThreadOfTheLaunchGivesTheCpuTwinsBits) {
  uint64_t seed = 700;
  // Around the chunks (forward 6 steps, backward 8) and chunk pairs: one step, partial, whole, several.
  for (const int64_t L : {1, 5, 6, 7, 8, 9, 12, 13, 16, 17, 21}) {
    SCOPED_TRACE(::testing::Message() << "L " << L);
    for_each_option([&](int k, bool bidirectional, bool skip, Case::Extras extras) {
      const Case c{L, 3, bidirectional ? 4 : 6, k, bidirectional, skip, /*use_tanh=*/!skip, extras, DType::BF16};
      expect_twins_bits(c, Layout::kPairs, ++seed);
    });
  }
}

TEST(SruRecurrenceThreads, EveryOneColumnThreadOfTheLaunchGivesTheCpuTwinsBits) {
  uint64_t seed = 900;
  for (const DType io : {DType::F32, DType::F64, DType::BF16})
    // Around the chunks (8 steps in float and bf16, 4 in double) and chunk pairs; d odd as well.
    for (const int64_t L : {1, 4, 5, 8, 9, 17}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(io) << " L " << L);
      for_each_option([&](int k, bool bidirectional, bool skip, Case::Extras extras) {
        const Case c{L, 3, bidirectional ? 3 : 5, k, bidirectional, skip, /*use_tanh=*/!skip, extras, io};
        expect_twins_bits(c, Layout::kOneColumn, ++seed);
      });
    }
}

// The launcher runs the pair kernels only where a pair never straddles the two directions (d even) and
// the accesses are aligned; everything else takes the one-column kernels.
TEST(SruRecurrenceThreads, PairsRunOnlyWhereTheyFit) {
  sru_kernels::Args<float, bf16> a{};
  alignas(8) static bf16 storage[8];
  alignas(8) static float c[4];
  const void* const aligned[] = {storage, storage + 2, nullptr};
  const void* const misaligned[] = {storage, storage + 1};
  a.d = 4;
  EXPECT_TRUE(sru_kernels::column_pairs_fit(a, aligned, c));
  EXPECT_FALSE(sru_kernels::column_pairs_fit(a, misaligned, c));
  EXPECT_FALSE(sru_kernels::column_pairs_fit(a, aligned, c + 1));
  a.d = 7;  // bidirectional: the pair (6, 7) would hold a column of each direction
  EXPECT_FALSE(sru_kernels::column_pairs_fit(a, aligned, c));
}
