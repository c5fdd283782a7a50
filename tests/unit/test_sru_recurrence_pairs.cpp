// The CUDA recurrence's column-pair thread bodies (ops/sru_recurrence_pairs.h: bf16 I/O, two neighbouring
// columns a thread) run here on the CPU, every thread of a launch in turn, against the CPU twin
// (cpu::sru_recurrence_forward / backward). On the host the bodies take the twin's exp, so everything
// must agree to the bit: h, c at every step, the last c, grad U, grad x, grad c0, and grad weight_c /
// grad bias once the threads' per-row partial sums are added over the batch in order, as the twin adds
// them. What this cannot check is the device's own exp and its memory accesses (CudaParity.SruRecurrenceBf16Io).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ops/dropout.h"
#include "ops/sru_recurrence.h"
#include "ops/sru_recurrence_pairs.h"
#include "testing.h"

using namespace sru;

namespace {

struct Case {
  int64_t L, B, d;
  int k;
  bool bidirectional, skip, use_tanh;
  enum Extras { kNone, kFilled, kDrawn } extras;  // c0, a filled dropout mask, padding and grad c_last; or a drawn mask
};

struct Outputs {
  Tensor h, c_all, c_last, gU, gx, gw, gb, gc0;
};

struct Problem {
  SruTensors in;
  SruRecurrenceOptions o;
  Tensor gh, gc_last;
};

Problem problem_of(const Case& c, uint64_t seed) {
  Problem p;
  p.o.hidden_size = c.d;
  p.o.bidirectional = c.bidirectional;
  p.o.k = c.k;
  p.o.has_skip_term = c.skip;
  p.o.use_tanh = c.use_tanh;
  p.o.scale_x = 0.75;
  const int64_t out = (c.bidirectional ? 2 : 1) * c.d;
  Generator gen(seed);
  auto bf16_of = [&](Shape s, double scale) { return Tensor::uniform(s, -scale, scale, DType::F32, gen).to(DType::BF16); };
  p.in.U = bf16_of({c.L, c.B, out * c.k}, 3);
  if (c.skip && c.k == 3) p.in.x = bf16_of({c.L, c.B, out}, 2);  // as the op passes it: only where it is read
  p.gh = bf16_of({c.L, c.B, out}, 1);
  p.in.U.data<bf16>()[1] = bf16(std::nanf(""));  // NaN stays NaN (as 0x7FFF) through both
  p.gh.data<bf16>()[2] = bf16(3.0e38f);           // a gradient that overflows to infinity
  p.in.weight_c = Tensor::uniform({2 * out}, -1, 1, DType::F32, gen);
  p.in.bias = Tensor::uniform({2 * out}, -1, 1, DType::F32, gen);
  if (c.extras == Case::kFilled) {
    p.in.c0 = Tensor::uniform({c.B, out}, -1, 1, DType::F32, gen);
    p.in.mask_c = Tensor::uniform({c.B, out}, 0, 2, DType::F32, gen);
    p.in.mask_pad = Tensor::zeros({c.L, c.B}, DType::F32);
    for (int64_t t = 0; t < c.L; t += 3) p.in.mask_pad.data<float>()[t * c.B + (t % c.B)] = 1;  // padded steps here and there
    p.gc_last = Tensor::uniform({c.B, out}, -1, 1, DType::F32, gen);
  } else if (c.extras == Case::kDrawn) {
    p.o.mask_c_draw = draw_dropout_mask({c.B, out}, 0.25, gen);
  }
  return p;
}

Outputs allocated(const Problem& p) {
  const int64_t L = p.in.U.size(0), B = p.in.U.size(1), out = p.in.U.size(2) / p.o.k;
  Outputs r;
  r.h = Tensor::empty({L, B, out}, DType::BF16);
  r.c_all = Tensor::empty({L, B, out}, DType::F32);
  r.c_last = Tensor::empty({B, out}, DType::F32);
  r.gU = Tensor::empty(p.in.U.shape(), DType::BF16);
  if (p.in.x.defined()) r.gx = Tensor::empty({L, B, out}, DType::BF16);
  r.gw = Tensor::empty({2 * out}, DType::F32);
  r.gb = Tensor::empty({2 * out}, DType::F32);
  if (p.in.c0.defined()) r.gc0 = Tensor::empty({B, out}, DType::F32);
  return r;
}

Outputs run_twin(const Problem& p) {
  Outputs r = allocated(p);
  cpu::sru_recurrence_forward(p.in, p.o, r.h, r.c_all, r.c_last);
  cpu::sru_recurrence_backward(p.in, p.o, r.c_all, p.gh, p.gc_last, r.gU, r.gx, r.gw, r.gb, r.gc0);
  return r;
}

template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
const void* data_ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// Every thread of the pair kernels' launches, in turn, then the batch sums of the partial sums in order.
template <int K, bool Pad>
Outputs run_pairs(const Problem& p) {
  Outputs r = allocated(p);
  std::vector<int32_t> pad;
  if (p.in.mask_pad.defined())
    for (const float v : p.in.mask_pad.to_vector<float>()) pad.push_back(v != 0);
  const auto a = sru_kernels::kernel_args<float, bf16>(p.in, p.o, pad.empty() ? nullptr : pad.data());
  const void* const bf16_tensors[] = {a.U, a.x, p.gh.data_ptr(), r.h.data_ptr(), r.gU.data_ptr(), data_ptr_or_null(r.gx)};
  EXPECT_TRUE(sru_kernels::column_pairs_fit(a, bf16_tensors, r.c_all.data<float>()));
  const long long pairs = a.B * a.out / 2;
  for (long long i = 0; i < pairs; ++i)
    sru_kernels::pair_forward_thread<K, Pad>(a, i, r.h.data<bf16>(), r.c_all.data<float>(), r.c_last.data<float>());
  const Tensor part_v = Tensor::empty({a.B, 2 * a.out}, DType::F32), part_b = Tensor::empty({a.B, 2 * a.out}, DType::F32);
  const sru_kernels::PairBackwardOutputs o{r.c_all.data<float>(), p.gh.data<bf16>(), data_or_null<float>(p.gc_last),
                                           r.gU.data<bf16>(), data_or_null<bf16>(r.gx), data_or_null<float>(r.gc0),
                                           part_v.data<float>(), part_b.data<float>()};
  for (long long i = 0; i < pairs; ++i) sru_kernels::pair_backward_thread<K, Pad>(a, i, o);
  for (long long i = 0; i < 2 * a.out; ++i) {
    float sv = 0, sb = 0;
    for (long long b = 0; b < a.B; ++b) {
      sv += part_v.data<float>()[b * 2 * a.out + i];
      sb += part_b.data<float>()[b * 2 * a.out + i];
    }
    r.gw.data<float>()[i] = sv;
    r.gb.data<float>()[i] = sb;
  }
  return r;
}

Outputs run_pairs(const Problem& p) {
  const bool pad = p.in.mask_pad.defined();
  if (p.o.k == 4) return pad ? run_pairs<4, true>(p) : run_pairs<4, false>(p);
  return pad ? run_pairs<3, true>(p) : run_pairs<3, false>(p);
}

void expect_same_bits(const Tensor& pairs, const Tensor& twin, const char* what) {
  ASSERT_EQ(pairs.defined(), twin.defined()) << what;
  if (!pairs.defined()) return;
  ASSERT_EQ(pairs.numel(), twin.numel()) << what;
  const size_t bytes = static_cast<size_t>(pairs.numel()) * dtype_size(pairs.dtype());
  if (std::memcmp(pairs.data_ptr(), twin.data_ptr(), bytes) == 0) return;
  const std::vector<double> a = pairs.to(DType::F64).to_vector<double>(), b = twin.to(DType::F64).to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))))
      FAIL() << what << " element " << i << ": pairs " << a[i] << ", twin " << b[i];
}

}  // namespace

TEST(SruRecurrencePairs, EveryThreadOfTheLaunchGivesTheCpuTwinsBits) {
  int cases = 0;
  // Around the chunks (forward 6 steps, backward 8) and chunk pairs: one step, partial, whole, several.
  for (const int64_t L : {1, 5, 6, 7, 8, 9, 12, 13, 16, 17, 21})
    for (const int k : {3, 4})
      for (const bool bidirectional : {false, true})
        for (const bool skip : {true, false})
          for (const auto extras : {Case::kNone, Case::kFilled, Case::kDrawn}) {
            const Case c{L, 3, bidirectional ? 4 : 6, k, bidirectional, skip, /*use_tanh=*/!skip, extras};
            SCOPED_TRACE(::testing::Message() << "L " << L << " k " << k << (bidirectional ? " bidirectional" : "")
                                              << (skip ? " skip" : " tanh, no skip") << " extras " << extras);
            const Problem p = problem_of(c, 700 + cases++);
            const Outputs pairs = run_pairs(p), twin = run_twin(p);
            expect_same_bits(pairs.h, twin.h, "h");
            expect_same_bits(pairs.c_all, twin.c_all, "c at every step");
            expect_same_bits(pairs.c_last, twin.c_last, "last c");
            expect_same_bits(pairs.gU, twin.gU, "grad U");
            expect_same_bits(pairs.gx, twin.gx, "grad x");
            expect_same_bits(pairs.gw, twin.gw, "grad weight_c");
            expect_same_bits(pairs.gb, twin.gb, "grad bias");
            expect_same_bits(pairs.gc0, twin.gc0, "grad c0");
          }
}

// The launcher runs the pair kernels only where a pair never straddles the two directions (d even) and
// the accesses are aligned; everything else takes the one-column kernels.
TEST(SruRecurrencePairs, PairsRunOnlyWhereTheyFit) {
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
