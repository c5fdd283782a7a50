// Finite-difference gradient checking: compares the autograd gradient of sum(f(x) * v), for a fixed
// random cotangent v, with central differences (f(x + eps) - f(x - eps)) / (2 eps) in float64.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace sru::autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-7;
  double rtol = 1e-5;
  uint64_t seed = 1234;  // for the cotangent vectors
};

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0.0;
  std::string message;  // the first mismatches, for test output
};

using MultiFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
using SingleFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Inputs that require grad are perturbed one element at a time; all must be f64 CPU tensors.
GradcheckResult gradcheck(const MultiFn& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});
GradcheckResult gradcheck(const SingleFn& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace sru::autograd
