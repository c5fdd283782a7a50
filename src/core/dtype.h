// Element types of tensors (f32; f64 for gradient checks; bf16 and f16, 16-bit floating storage:
// core/float16.h; i32/i64 for indices) and the dispatch macros that instantiate a kernel for the
// computing floating types (f32, f64) or for every type (copies, conversions, fills, masks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "core/error.h"
#include "core/float16.h"

namespace sru {

enum class DType : uint8_t { F32, F64, I32, I64, BF16, F16 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::BF16: return 2;
    case DType::F16: return 2;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
  }
  return "?";
}

// Floating storage (every floating dtype; what may require grad), and the dtypes ops compute in (f32,
// f64: what SRU_DISPATCH_FLOATING and check_floating accept; an op that also takes 16-bit operands,
// such as sru_recurrence with bf16 I/O, says so and checks its own dtypes).
constexpr bool is_floating(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::BF16 || t == DType::F16; }
constexpr bool is_compute_floating(DType t) { return t == DType::F32 || t == DType::F64; }

// The type a kernel does its arithmetic in for storage type T: float for the 16-bit types, T otherwise.
template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, bf16> || std::is_same_v<T, f16>, float, T>;

template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::F64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::I32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::I64; };
template <> struct dtype_of<bf16> { static constexpr DType value = DType::BF16; };
template <> struct dtype_of<f16> { static constexpr DType value = DType::F16; };

}  // namespace sru

// SRU_DISPATCH_FLOATING(dtype, "op", [&]<typename scalar_t>() { ... }) runs the lambda with
// scalar_t = float or double, and fails with the op's name for any other dtype.
#define SRU_DISPATCH_FLOATING(DT, OPNAME, ...)                                           \
  [&] {                                                                                  \
    switch (DT) {                                                                        \
      case ::sru::DType::F32: return (__VA_ARGS__).template operator()<float>();         \
      case ::sru::DType::F64: return (__VA_ARGS__).template operator()<double>();        \
      default:                                                                           \
        SRU_FAIL(OPNAME, ": expected a floating tensor (f32 or f64), got ", ::sru::dtype_name(DT)); \
    }                                                                                    \
  }()

// SRU_DISPATCH_FLOATING_BF16: as above, and scalar_t = bf16 for DType::BF16: the kernels of the ops
// that take bfloat16 storage, which compute in compute_t<scalar_t> (float for bf16) and round once where
// they store (check_floating16 is their operand check).
#define SRU_DISPATCH_FLOATING_BF16(DT, OPNAME, ...)                                      \
  [&] {                                                                                  \
    switch (DT) {                                                                        \
      case ::sru::DType::F32: return (__VA_ARGS__).template operator()<float>();         \
      case ::sru::DType::F64: return (__VA_ARGS__).template operator()<double>();        \
      case ::sru::DType::BF16: return (__VA_ARGS__).template operator()<::sru::bf16>();  \
      default:                                                                           \
        SRU_FAIL(OPNAME, ": expected a floating tensor (f32, f64 or bf16), got ", ::sru::dtype_name(DT)); \
    }                                                                                    \
  }()

// SRU_DISPATCH_ALL: as above, for every dtype.
#define SRU_DISPATCH_ALL(DT, OPNAME, ...)                                                \
  [&] {                                                                                  \
    switch (DT) {                                                                        \
      case ::sru::DType::F32: return (__VA_ARGS__).template operator()<float>();         \
      case ::sru::DType::F64: return (__VA_ARGS__).template operator()<double>();        \
      case ::sru::DType::I32: return (__VA_ARGS__).template operator()<int32_t>();       \
      case ::sru::DType::I64: return (__VA_ARGS__).template operator()<int64_t>();       \
      case ::sru::DType::BF16: return (__VA_ARGS__).template operator()<::sru::bf16>();  \
      case ::sru::DType::F16: return (__VA_ARGS__).template operator()<::sru::f16>();    \
    }                                                                                    \
    SRU_FAIL(OPNAME, ": unknown dtype");                                                 \
  }()
