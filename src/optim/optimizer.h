// Optimisers with PyTorch's update rules (torch.optim, default flags), over a module's trainable
// parameters, plus global gradient-norm clipping. Per-parameter state (moments) is kept as tensors
// named "optim.{parameter name}.{slot}" so it goes into checkpoints next to the model.
//   sgd:    g = grad + wd p;  buf = momentum buf + g (buf = g at first);  p -= lr buf (p -= lr g without momentum)
//   adam:   g = grad + wd p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//           p -= lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
//   adamw:  p *= 1 - lr wd, then adam with g = grad
//   adamax: g = grad + wd p;  m = b1 m + (1-b1) g;  u = max(b2 u, |g| + eps);  p -= lr / (1-b1^t) m / u
//   radam:  adam moments; rho_inf = 2/(1-b2) - 1; rho_t = rho_inf - 2 t b2^t / (1-b2^t);
//           rho_t > 5: p -= lr m_hat r sqrt(1-b2^t) / (sqrt(v) + eps), r = sqrt((rho_t-4)(rho_t-2) rho_inf /
//           ((rho_inf-4)(rho_inf-2) rho_t));  else p -= lr m_hat
//   radamw: p *= 1 - lr wd, then radam with g = grad (decoupled weight decay: torch.optim.RAdam with
//           decoupled_weight_decay=True, and the `radam` package SRU++'s reference trains with)
#pragma once

#include <string>
#include <vector>

#include "nn/module.h"
#include "ops/kernels.h"
#include "optim/optimizer_math.h"

namespace sru::optim {

struct OptimizerOptions {
  std::string kind = "adam";  // sgd | adam | adamw | adamax | radam | radamw
  double momentum = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;
};

class Optimizer {
 public:
  // params: (name, tensor) of the trainable parameters (Module::named_parameters filtered).
  Optimizer(nn::NamedTensors params, OptimizerOptions options);
  // One update with learning rate lr, from each parameter's .grad (parameters without one are skipped).
  void step(double lr);
  void zero_grad();
  int64_t steps() const { return step_count_; }

  // State for checkpoints: "optim.{name}.{slot}" tensors and the step count as "optim.step" (i64).
  nn::NamedTensors state() const;
  // Restores state() output; throws naming what is missing or mismatched.
  void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors);
  const nn::NamedTensors& parameters() const { return params_; }

 private:
  nn::NamedTensors params_;
  OptimizerOptions options_;
  OptimizerKind kind_;
  std::vector<std::vector<Tensor>> slots_;  // per parameter: the slots of this optimiser
  std::vector<std::string> slot_names_;
  int64_t step_count_ = 0;
};

// Scales all gradients so their global L2 norm is at most max_norm (as torch.nn.utils.clip_grad_norm_:
// factor max_norm / (norm + 1e-6) when norm > max_norm), and returns the norm before clipping: NaN/inf
// when a gradient is not finite (nothing is scaled then); max_norm <= 0 only measures. Sums of squares
// over fixed blocks of 64 Ki elements, added in block order: the same result for any thread count.
// clip_grad_norm_tensor leaves the norm as a 0-d f64 tensor on the gradients' device and scales them
// there, without a host wait (read it with read_scalars, with the loss, once per step); clip_grad_norm
// returns it as a double (one value read).
Tensor clip_grad_norm_tensor(const nn::NamedTensors& params, double max_norm);
double clip_grad_norm(const nn::NamedTensors& params, double max_norm);

// The kernels, declared once for both backends (ops/kernels.h; CPU: optim/cpu/optimizer.cpp; CUDA:
// optim/cuda/optimizer.cu, same contracts), called through SRU_KERNEL_IN (ops/dispatch.h), which checks
// that the operands share a device.
SRU_DECLARE_KERNELS(
// One optimiser step of parameter p with gradient g and slots s0, s1 (s1 unused by SGD).
void optimizer_update(OptimizerKind kind, const Tensor& p, const Tensor& g, const Tensor& s0, const Tensor& s1,
                      const StepScalars& scalars);
// partial[at + i] = sum of g[j]^2 over block i (block_size elements), in double.
void sum_squares_blocks(const Tensor& g, int64_t block_size, const Tensor& partial, int64_t at);
// result (2) f64 = [norm = sqrt(sum of partial, in order), clip factor (1 when nothing is to be scaled)].
void finish_grad_norm(const Tensor& partial, double max_norm, const Tensor& result);
// g *= result[1] (as g's dtype) unless the factor is 1.
void scale_by_clip_factor(const Tensor& g, const Tensor& result);
)

// StepScalars holds no tensor (for SRU_KERNEL_IN's device check).
template <typename F>
void visit_tensors(const StepScalars&, F&&) {}

}  // namespace sru::optim
