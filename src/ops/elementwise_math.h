// Per-element math of the pointwise ops and their derivatives, written once as SRU_HD functions so
// the CPU kernels and the CUDA kernels compute exactly the same function.
#pragma once

#include <cmath>

#include "core/hd.h"

namespace sru {

enum class BinaryOp { Add, Sub, Mul, Div };

// Unary ops; the *Scalar ones take a constant `alpha`: AddScalar x+a, MulScalar x*a, PowScalar x^a,
// RSubScalar a-x, RDivScalar a/x.
enum class UnaryOp { Exp, Log, Tanh, Sigmoid, Relu, Neg, AddScalar, MulScalar, PowScalar, RSubScalar, RDivScalar };

template <BinaryOp OP, typename T>
SRU_HD T binary_apply(T a, T b) {
  if constexpr (OP == BinaryOp::Add) return a + b;
  if constexpr (OP == BinaryOp::Sub) return a - b;
  if constexpr (OP == BinaryOp::Mul) return a * b;
  if constexpr (OP == BinaryOp::Div) return a / b;
}

// Numerically stable logistic function: never evaluates exp of a large positive number.
template <typename T>
SRU_HD T sigmoid_of(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

template <UnaryOp OP, typename T>
SRU_HD T unary_apply(T x, T alpha) {
  if constexpr (OP == UnaryOp::Exp) return std::exp(x);
  if constexpr (OP == UnaryOp::Log) return std::log(x);
  if constexpr (OP == UnaryOp::Tanh) return std::tanh(x);
  if constexpr (OP == UnaryOp::Sigmoid) return sigmoid_of(x);
  if constexpr (OP == UnaryOp::Relu) return x > T(0) ? x : T(0);
  if constexpr (OP == UnaryOp::Neg) return -x;
  if constexpr (OP == UnaryOp::AddScalar) return x + alpha;
  if constexpr (OP == UnaryOp::MulScalar) return x * alpha;
  if constexpr (OP == UnaryOp::PowScalar) return std::pow(x, alpha);
  if constexpr (OP == UnaryOp::RSubScalar) return alpha - x;
  if constexpr (OP == UnaryOp::RDivScalar) return alpha / x;
}

// dy/dx given the input x and the output y = unary_apply(x, alpha).
template <UnaryOp OP, typename T>
SRU_HD T unary_derivative(T x, T y, T alpha) {
  if constexpr (OP == UnaryOp::Exp) return y;
  if constexpr (OP == UnaryOp::Log) return T(1) / x;
  if constexpr (OP == UnaryOp::Tanh) return T(1) - y * y;
  if constexpr (OP == UnaryOp::Sigmoid) return y * (T(1) - y);
  if constexpr (OP == UnaryOp::Relu) return x > T(0) ? T(1) : T(0);
  if constexpr (OP == UnaryOp::Neg) return T(-1);
  if constexpr (OP == UnaryOp::AddScalar) return T(1);
  if constexpr (OP == UnaryOp::MulScalar) return alpha;
  if constexpr (OP == UnaryOp::PowScalar) return alpha * std::pow(x, alpha - T(1));
  if constexpr (OP == UnaryOp::RSubScalar) return T(-1);
  if constexpr (OP == UnaryOp::RDivScalar) return -y / x;
}

// Calls fn.template operator()<OP>() with the compile-time UnaryOp matching `op`.
template <typename F>
void with_unary_op(UnaryOp op, const F& fn) {
  switch (op) {
    case UnaryOp::Exp: return fn.template operator()<UnaryOp::Exp>();
    case UnaryOp::Log: return fn.template operator()<UnaryOp::Log>();
    case UnaryOp::Tanh: return fn.template operator()<UnaryOp::Tanh>();
    case UnaryOp::Sigmoid: return fn.template operator()<UnaryOp::Sigmoid>();
    case UnaryOp::Relu: return fn.template operator()<UnaryOp::Relu>();
    case UnaryOp::Neg: return fn.template operator()<UnaryOp::Neg>();
    case UnaryOp::AddScalar: return fn.template operator()<UnaryOp::AddScalar>();
    case UnaryOp::MulScalar: return fn.template operator()<UnaryOp::MulScalar>();
    case UnaryOp::PowScalar: return fn.template operator()<UnaryOp::PowScalar>();
    case UnaryOp::RSubScalar: return fn.template operator()<UnaryOp::RSubScalar>();
    case UnaryOp::RDivScalar: return fn.template operator()<UnaryOp::RDivScalar>();
  }
}

}  // namespace sru
