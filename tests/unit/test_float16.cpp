// 16-bit floating storage (core/float16.h, DType::BF16 / F16): the conversions from float32 round to
// nearest even, every 16-bit value survives the round trip, tensors convert, fill, print and travel
// through safetensors as PyTorch writes them, and ops without 16-bit kernels refuse them by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "core/float16.h"
#include "core/safetensors.h"
#include "ops/ops.h"
#include "testing.h"

using namespace sru;
using sru::testing::error_of;
using sru::testing::tmp_dir;

namespace {

bool is_nan_bits_bf16(uint16_t b) { return (b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0; }
bool is_nan_bits_f16(uint16_t b) { return (b & 0x7C00) == 0x7C00 && (b & 0x3FF) != 0; }

// The representable neighbours of a rounded value r = to_float(bits): the value one step towards
// zero and one step away (bits - 1, bits + 1 within the sign's half of the code space).
template <typename ToFloat>
void expect_nearest(float x, uint16_t bits, ToFloat to_float, uint16_t inf_bits, const char* type) {
  const float r = to_float(bits), err = std::fabs(r - x);
  const uint16_t magnitude = bits & 0x7FFF, sign = bits & 0x8000;
  // Past the largest finite value's half step (the tie there goes to even: infinity) only infinity.
  const float largest = to_float(static_cast<uint16_t>(inf_bits - 1));
  const float overflow_at = largest + (largest - to_float(static_cast<uint16_t>(inf_bits - 2))) / 2;
  if (std::fabs(x) >= overflow_at) EXPECT_EQ(magnitude, inf_bits) << type << " " << x << " must round to infinity";
  if (magnitude == inf_bits) {  // overflow: x must be past the largest finite value's half step
    EXPECT_GE(std::fabs(x), overflow_at) << type << " " << x;
    return;
  }
  for (int step : {-1, 1}) {
    const int other = magnitude + step;
    if (other < 0 || other >= inf_bits) continue;
    const float o = to_float(static_cast<uint16_t>(sign | other)), other_err = std::fabs(o - x);
    EXPECT_LE(err, other_err) << type << " " << x << " rounded to " << r << ", " << o << " is nearer";
    if (err == other_err) EXPECT_EQ(magnitude % 2, 0) << type << " tie " << x << " must go to the even value";
  }
}

}  // namespace

TEST(Float16, EveryBf16AndF16ValueSurvivesTheRoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const uint16_t back_bf16 = bf16_bits_from_float(float_from_bf16_bits(bits));
    const uint16_t back_f16 = f16_bits_from_float(float_from_f16_bits(bits));
    if (is_nan_bits_bf16(bits)) EXPECT_TRUE(is_nan_bits_bf16(back_bf16)) << std::hex << b;
    else ASSERT_EQ(back_bf16, bits) << std::hex << b;
    if (is_nan_bits_f16(bits)) EXPECT_TRUE(is_nan_bits_f16(back_f16)) << std::hex << b;
    else ASSERT_EQ(back_f16, bits) << std::hex << b;
  }
}

TEST(Float16, F16RoundsToNearestEvenWithSubnormalsOverflowAndNan) {
  auto bits = [](float f) { return f16_bits_from_float(f); };
  EXPECT_EQ(bits(1.0f), 0x3C00);
  EXPECT_EQ(bits(-2.0f), 0xC000);
  EXPECT_EQ(bits(65504.0f), 0x7BFF);                      // largest finite
  EXPECT_EQ(bits(65519.996f), 0x7BFF);                    // just under the tie: stays finite
  EXPECT_EQ(bits(65520.0f), 0x7C00);                      // the tie goes to the even neighbour: infinity
  EXPECT_EQ(bits(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(bits(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(bits(std::ldexp(1.0f, -25)), 0x0000);         // half of it: tie, to even (zero)
  EXPECT_EQ(bits(std::ldexp(1.5f, -24)), 0x0002);         // 1.5 steps: tie, to even (2)
  EXPECT_EQ(bits(std::ldexp(1.0f, -14)), 0x0400);         // smallest normal
  EXPECT_EQ(bits(std::ldexp(1023.5f, -24)), 0x0400);      // the largest subnormal's tie rounds into the normals
  EXPECT_EQ(bits(-0.0f), 0x8000);
  EXPECT_EQ(bits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie above 1: to even
  EXPECT_EQ(bits(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // tie above an odd value: up
  EXPECT_EQ(bits(std::numeric_limits<float>::quiet_NaN()) & 0x7FFF, 0x7E00);
  EXPECT_EQ(float_from_f16_bits(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(float_from_f16_bits(0x83FF), -std::ldexp(1023.0f, -24));
  EXPECT_TRUE(std::isinf(float_from_f16_bits(0xFC00)));
}

// Random floats over the whole range of each type: the result is the nearest representable value
// (ties to even), or infinity only past the largest finite value's half step.
TEST(Float16, ConversionsPickTheNearestValue) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 20000; ++i) {
    // Exponents spread over each type's range and a little beyond it.
    const float bf16_x = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), static_cast<int>(any_bits(rng) % 260) - 130);
    const float f16_x = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), static_cast<int>(any_bits(rng) % 46) - 28);
    expect_nearest(bf16_x, bf16_bits_from_float(bf16_x), float_from_bf16_bits, 0x7F80, "bf16");
    expect_nearest(f16_x, f16_bits_from_float(f16_x), float_from_f16_bits, 0x7C00, "f16");
    if (::testing::Test::HasFailure()) break;
  }
}

TEST(Float16, TensorsConvertFillAndPrint) {
  const std::vector<float> xs = {1.0f, 3.14159265f, -65519.0f, 1e-6f, 70000.0f, -0.0f};
  const Tensor x = Tensor::from_vector(xs, {2, 3});
  for (DType t : {DType::BF16, DType::F16}) {
    const Tensor h = x.to(t);
    EXPECT_EQ(h.dtype(), t);
    EXPECT_EQ(h.nbytes(), 12u);
    const std::vector<float> back = h.to(DType::F32).to_vector<float>();
    for (size_t i = 0; i < xs.size(); ++i) {
      const float want = t == DType::BF16 ? round_to_bf16(xs[i]) : float_from_f16_bits(f16_bits_from_float(xs[i]));
      EXPECT_EQ(back[i], want) << dtype_name(t) << " " << xs[i];
    }
    // Conversions between the 16-bit types and to the integers go through float.
    EXPECT_EQ(h.to(t == DType::BF16 ? DType::F16 : DType::BF16).to(DType::F64).to_vector<double>()[0], 1.0);
    // (Only finite values: float infinity to an integer is undefined behaviour.)
    EXPECT_EQ(Tensor::from_vector(std::vector<float>{3.14159265f, -2.5f}, {2}).to(t).to(DType::I64).to_vector<int64_t>(),
              (std::vector<int64_t>{3, -2}));
    EXPECT_EQ(Tensor::full({3}, 2.5, t).to_vector<float>(), (std::vector<float>{2.5f, 2.5f, 2.5f}));
    EXPECT_EQ(Tensor::zeros({2}, t).to_vector<double>(), (std::vector<double>{0, 0}));
    EXPECT_EQ(Tensor::arange(3, t).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
    std::ostringstream printed;
    printed << h;
    EXPECT_NE(printed.str().find(std::string("Tensor(") + std::string(dtype_name(t)) + ", (2, 3))"), std::string::npos)
        << printed.str();
    EXPECT_NE(printed.str().find("3.14"), std::string::npos) << printed.str();
  }
  EXPECT_EQ(x.to(DType::BF16).to_vector<float>()[4], 70144.0f);  // bf16 keeps float32's range
  EXPECT_TRUE(std::isinf(x.to(DType::F16).to_vector<float>()[4]));  // f16 overflows past 65504
}

// Random 16-bit tensors are the float32 draw rounded to nearest even, the generator advanced as at
// float32 (torch.rand(dtype=torch.bfloat16) likewise); the CUDA parity tests draw bf16 inputs and
// output weights this way.
TEST(Float16, RandomTensorsAreTheFloat32DrawRounded) {
  for (DType t : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(t));
    Generator g32(7), g16(7);
    const Tensor u32 = Tensor::uniform({3, 5}, -2, 2, DType::F32, g32), u16 = Tensor::uniform({3, 5}, -2, 2, t, g16);
    EXPECT_EQ(u16.dtype(), t);
    EXPECT_EQ(u16.to(DType::F32).to_vector<float>(), u32.to(t).to(DType::F32).to_vector<float>());
    EXPECT_EQ(g16.offset(), g32.offset());
    const Tensor n32 = Tensor::randn({17}, DType::F32, g32), n16 = Tensor::randn({17}, t, g16);
    EXPECT_EQ(n16.to(DType::F32).to_vector<float>(), n32.to(t).to(DType::F32).to_vector<float>());
    EXPECT_EQ(g16.offset(), g32.offset());
  }
}

// Until an op has 16-bit kernels (issue 37's op table), it refuses 16-bit tensors naming itself; those
// with bf16 kernels refuse f16.
TEST(Float16, OpsWithoutSixteenBitKernelsRefuseThemByName) {
  const Tensor a = Tensor::ones({2, 2}).to(DType::BF16);
  const std::string m = error_of([&] { topk(a, 1); });
  EXPECT_NE(m.find("expected a floating tensor (f32 or f64), got bf16"), std::string::npos) << m;
  const std::string g = error_of([&] { embedding(a, Tensor::from_vector(std::vector<int64_t>{0, 1}, {2})); });
  EXPECT_NE(g.find("got bf16"), std::string::npos) << g;
  const Tensor h = Tensor::ones({2, 2}).to(DType::F16);
  const std::string f = error_of([&] { add(h, h); });
  EXPECT_NE(f.find("expected a floating tensor (f32, f64 or bf16), got f16"), std::string::npos) << f;
}

// safetensors: BF16 and F16 tensors are written with PyTorch's tags and raw little-endian bits and
// read back bit for bit; tests/data/fixtures/torch_float16.safetensors, written by PyTorch
// (tests/data/fixtures/make_torch_float16.py), reads as the same bits our conversion gives.
TEST(Float16, SafetensorsRoundTripAndPyTorchsFile) {
  const std::string path = tmp_dir() + "float16.safetensors";
  const std::vector<float> xs = {1.0f, -3.14159265f, 65504.0f, 1e-7f, 0.1f, 300.5f};
  const Tensor b = Tensor::from_vector(xs, {3, 2}).to(DType::BF16), h = Tensor::from_vector(xs, {3, 2}).to(DType::F16);
  safetensors::save(path, {{"b", b}, {"h", h}});
  const safetensors::File f = safetensors::load(path);
  for (const auto& [name, want] : std::vector<std::pair<std::string, Tensor>>{{"b", b}, {"h", h}}) {
    const Tensor* got = f.find(name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_EQ(got->dtype(), want.dtype());
    EXPECT_EQ(got->shape(), want.shape());
    EXPECT_EQ(std::memcmp(got->data_ptr(), want.data_ptr(), want.nbytes()), 0) << name;
  }
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find(R"("b":{"dtype":"BF16","shape":[3,2])"), std::string::npos);
  EXPECT_NE(bytes.find(R"("h":{"dtype":"F16","shape":[3,2])"), std::string::npos);

  const std::string fixture = std::string(SRU_SOURCE_DIR) + "/tests/data/fixtures/torch_float16.safetensors";
  const safetensors::File torch_file = safetensors::load(fixture);
  const Tensor* source = torch_file.find("source_f32");
  ASSERT_NE(source, nullptr);
  const std::vector<float> src = source->to_vector<float>();
  for (const auto& [name, dtype] : std::vector<std::pair<std::string, DType>>{{"bf16", DType::BF16}, {"f16", DType::F16}}) {
    const Tensor* t = torch_file.find(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_EQ(t->dtype(), dtype);
    ASSERT_EQ(t->numel(), source->numel());
    const Tensor ours = source->to(dtype);
    const auto* theirs = static_cast<const uint16_t*>(t->data_ptr());
    const auto* mine = static_cast<const uint16_t*>(ours.data_ptr());
    const bool is_bf16 = dtype == DType::BF16;  // clang 14 lambdas cannot capture a structured binding
    auto is_nan = [is_bf16](uint16_t bits) { return is_bf16 ? is_nan_bits_bf16(bits) : is_nan_bits_f16(bits); };
    for (int64_t i = 0; i < t->numel(); ++i) {
      if (std::isnan(src[i])) {  // a NaN's payload is not part of the contract: NaN in, NaN out
        EXPECT_TRUE(is_nan(theirs[i]) && is_nan(mine[i])) << name << " element " << i;
        continue;
      }
      EXPECT_EQ(theirs[i], mine[i]) << name << " of " << src[i] << " (element " << i << ")";
    }
  }
}
