// Philox4x32-10 and the generator: published test vector, determinism, and distribution sanity.
#include <gtest/gtest.h>

#include <cmath>

#include "core/philox.h"
#include "core/philox_fill.h"
#include "core/rng.h"
#include "core/tensor.h"

using namespace sru;

TEST(Philox, MatchesRandom123KnownAnswer) {
  // Random123 kat_vectors: philox4x32_10 with counter 0 and key 0.
  const philox::U32x4 out = philox::philox4x32_10(0, 0, 0);
  EXPECT_EQ(out.v[0], 0x6627e8d5u);
  EXPECT_EQ(out.v[1], 0xe169c58du);
  EXPECT_EQ(out.v[2], 0xbc57ac4cu);
  EXPECT_EQ(out.v[3], 0x9b00dbd8u);
}

TEST(Philox, MatchesRandom123KnownAnswerAllOnes) {
  // Counter all 0xffffffff, key all 0xffffffff.
  const philox::U32x4 out = philox::philox4x32_10(~0ull, ~0ull, ~0ull);
  EXPECT_EQ(out.v[0], 0x408f276du);
  EXPECT_EQ(out.v[1], 0x41c83b0eu);
  EXPECT_EQ(out.v[2], 0xa20bc7c6u);
  EXPECT_EQ(out.v[3], 0x6d5451fdu);
}

TEST(Generator, SameSeedSameValuesAndDrawsAdvance) {
  Generator a(42), b(42);
  Tensor x1 = Tensor::uniform({1000}, 0, 1, DType::F32, a);
  Tensor y1 = Tensor::uniform({1000}, 0, 1, DType::F32, b);
  EXPECT_EQ(x1.to_vector<float>(), y1.to_vector<float>());
  Tensor x2 = Tensor::uniform({1000}, 0, 1, DType::F32, a);
  EXPECT_NE(x1.to_vector<float>(), x2.to_vector<float>());
  EXPECT_EQ(a.offset(), 500u);  // 2 draws x 1000 words / 4 words per block
}

TEST(Generator, ValuesDoNotDependOnThreadSplit) {
  // A draw is a pure function of (seed, offset, index): a large parallel draw equals its own prefix
  // drawn small (single-threaded).
  Generator big(7), small(7);
  Tensor large = Tensor::uniform({100000}, 0, 1, DType::F64, big);
  Tensor prefix = Tensor::uniform({100}, 0, 1, DType::F64, small);
  const auto l = large.to_vector<double>(), p = prefix.to_vector<double>();
  for (size_t i = 0; i < p.size(); ++i) ASSERT_EQ(l[i], p[i]);
}

TEST(Generator, UniformAndNormalMoments) {
  Generator gen(3);
  const auto u = Tensor::uniform({200000}, -2, 2, DType::F64, gen).to_vector<double>();
  double mean = 0, lo = 1e9, hi = -1e9;
  for (double v : u) {
    mean += v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  mean /= u.size();
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_GE(lo, -2.0);
  EXPECT_LT(hi, 2.0);
  const auto z = Tensor::randn({200000}, DType::F64, gen).to_vector<double>();
  double m = 0, v2 = 0;
  for (double v : z) m += v;
  m /= z.size();
  for (double v : z) v2 += (v - m) * (v - m);
  v2 /= z.size();
  EXPECT_NEAR(m, 0.0, 0.01);
  EXPECT_NEAR(v2, 1.0, 0.02);
}

TEST(Philox, MatchesRandom123KnownAnswerPiDigits) {
  // Counter (243f6a88, 85a308d3, 13198a2e, 03707344), key (a4093822, 299f31d0).
  const philox::U32x4 out = philox::philox4x32_10(0x85a308d3243f6a88ull, 0x0370734413198a2eull, 0x299f31d0a4093822ull);
  EXPECT_EQ(out.v[0], 0xd16cfe09u);
  EXPECT_EQ(out.v[1], 0x94fdccebu);
  EXPECT_EQ(out.v[2], 0x5001e420u);
  EXPECT_EQ(out.v[3], 0x24126ea1u);
}

// The block-wise generator gives exactly random_u32's words, for ranges that start and end inside
// counter blocks and lane groups, and the initialisers built on it give their scalar definitions.
TEST(Philox, BlockFillEqualsTheScalarDefinition) {
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 1}, {3, 5}, {0, 32}, {7, 101}, {31, 33}, {1000, 5000}}) {
    std::vector<uint32_t> words(end - begin);
    philox::fill_u32(99, 12345, begin, end, words.data());
    for (int64_t i = begin; i < end; ++i)
      ASSERT_EQ(words[i - begin], philox::random_u32(99, 12345, i)) << "element " << i << " of [" << begin << ", " << end << ")";
  }
  Generator a(5), b(5);
  const std::vector<double> u = Tensor::uniform({70001}, -2, 3, DType::F64, a).to_vector<double>();
  const std::vector<double> z = Tensor::randn({70001}, DType::F64, a).to_vector<double>();
  const uint64_t u_offset = b.reserve(70001), z_offset = b.reserve(2 * 70001);
  for (int64_t i = 0; i < 70001; ++i) {
    ASSERT_EQ(u[i], -2 + 5 * static_cast<double>(philox::u32_to_unit_float(philox::random_u32(5, u_offset, i)))) << i;
    const double u1 = 1.0 - philox::u32_to_unit_float(philox::random_u32(5, z_offset, 2 * i));
    const double u2 = philox::u32_to_unit_float(philox::random_u32(5, z_offset, 2 * i + 1));
    ASSERT_EQ(z[i], std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2)) << i;
  }
}
