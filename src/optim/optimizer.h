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
// Per-parameter settings: a parameter whose name contains one of weight_decay_exclude's strings gets
// wd = 0 (torch.optim's parameter groups with weight_decay 0, as the usual exclusion of biases and
// layer norms); everything else is shared.
#pragma once

#include <memory>
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
  // Parameters whose name contains one of these get no weight decay; each must match a parameter.
  std::vector<std::string> weight_decay_exclude;
};

// A segment table: SegmentRow rows (optim/optimizer_math.h) as an i64 (S, 4) tensor on the buffers'
// device, made once, and its pieces.
struct SegmentTable {
  Tensor rows;
  int64_t piece = 0, pieces = 0;
};

class Optimizer {
 public:
  // params: (name, tensor) of the trainable parameters (Module::named_parameters filtered). flat: the
  // model's flat layout (Module::flatten_parameters), when it has one: the slots of a flat group whose
  // members are all among params are laid out alike, so that its update is one call over whole buffers.
  Optimizer(nn::NamedTensors params, OptimizerOptions options, std::shared_ptr<const nn::FlatParameters> flat = nullptr);
  // One update with learning rate lr, from each parameter's .grad (parameters without one are skipped):
  // for a flat group whose gradients are all in place (FlatParameters::gradients_in_place) one kernel
  // call over its whole buffers, member by member through a segment table that carries each one's
  // settings (one launch on a GPU whatever the number of tensors; the padding is left alone); for the other
  // parameters one dispatch per group sharing a dtype and device (a multi-tensor update; on a GPU one
  // launch per up to 48 tensors). The same values either way: the rules are element-wise. clip, when given, is grad_norm_and_clip_factor's result: each
  // gradient is multiplied by its factor inside the update (as clip_grad_norm's separate scaling would,
  // to the bit), and the gradients themselves are left as they are; a NaN factor (a non-finite step)
  // makes the kernels change nothing, and the caller that learns so afterwards calls forget_step.
  void step(double lr, const Tensor& clip = Tensor());
  // The last step() changed nothing (its clip factor was NaN): its count is taken back, so that the
  // bias corrections of the next step are those it would have had.
  void forget_step() { --step_count_; }
  // The scalars of step t (1-based) at learning rate lr: what step() hands the kernels.
  StepScalars scalars_of_step(double lr, int64_t t) const;
  // From here on the update kernels read the step's scalars at `in_memory` (on the parameters' device)
  // instead of step()'s arguments: a CUDA graph's replays of a captured step take each step's learning
  // rate and bias corrections from there (the caller writes scalars_of_step(lr, steps() + 1) there and
  // calls advance_step() before each replay); null: step()'s own again.
  void set_scalars_in_memory(const StepScalars* in_memory) { scalars_in_memory_ = in_memory; }
  // Counts a step that a replay applies (step() counts its own).
  void advance_step() { ++step_count_; }
  // From here on grad_norm_and_clip_factor reads its grad_scale at `in_memory` (a double on the
  // gradients' device) instead of its argument: the replays of a captured accumulated step take each
  // step's 1 / terms from there; null: the argument again.
  void set_grad_scale_in_memory(const double* in_memory) { grad_scale_in_memory_ = in_memory; }
  // The global gradient norm and clip factor of this optimiser's parameters: grad_norm_and_clip_factor
  // (below) to the bit, with each flat group whose gradients are all in place read as one buffer (one
  // reduction dispatch for it, however many tensors: one launch on a GPU) instead of tensor by tensor.
  // loss (0-d, on the gradients' device), when given: a non-finite loss also makes the factor NaN.
  Tensor grad_norm_and_clip_factor(double max_norm, double grad_scale = 1.0, const Tensor& loss = Tensor()) const;
  // Whether parameter k (index into parameters()) gets weight decay.
  bool decays(size_t k) const { return decays_[k]; }
  void zero_grad();
  int64_t steps() const { return step_count_; }
  // How many flat groups the last step() updated in one call over whole buffers.
  int whole_buffer_updates() const { return whole_buffer_updates_; }

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
  // Indices into params_ of one dtype, device and weight decay each, in order.
  std::vector<std::vector<size_t>> groups_;
  std::vector<bool> decays_;  // per parameter: weight decay applies (not excluded by name)
  // A group of the flat layout whose members are all here: its slots as whole buffers, and the tables
  // that walk its buffers member by member.
  struct FlatSlots {
    size_t group = 0;            // index into flat_->groups()
    std::vector<Tensor> slots;   // per slot name: laid out as the group's values
    std::vector<size_t> params;  // per member, in the group's order: its index in params_
    SegmentTable update;         // pieces of kUpdatePiece elements, flags = the member's settings
    SegmentTable norm;           // pieces of kNormBlock elements: the norm's blocks
  };
  std::shared_ptr<const nn::FlatParameters> flat_;
  std::vector<FlatSlots> flat_slots_;
  std::vector<int> flat_slots_of_;  // per parameter: index into flat_slots_, or -1
  std::vector<std::string> slot_names_;
  int64_t step_count_ = 0;
  int whole_buffer_updates_ = 0;
  const StepScalars* scalars_in_memory_ = nullptr;
  const double* grad_scale_in_memory_ = nullptr;
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
// The global gradient norm and the clip factor, as an f64 (2) [norm, factor] tensor on the gradients'
// device, without scaling anything (factor NaN when the norm is not finite: skips_update,
// optim/optimizer_math.h): the training step hands it to Optimizer::step, whose update applies
// the factor (one reduction dispatch per dtype group plus one to finish, instead of a scaling pass per
// gradient). clip_grad_norm_tensor is this plus the scaling. grad_scale: the true gradients are
// grad_scale times the stored ones (accumulation's mean, not yet applied): the norm is the true
// gradients' and the factor includes grad_scale, so the update applies both in one multiply.
Tensor grad_norm_and_clip_factor(const nn::NamedTensors& params, double max_norm, double grad_scale = 1.0);

// The kernels, declared once for both backends (ops/kernels.h; CPU: optim/cpu/optimizer.cpp; CUDA:
// optim/cuda/optimizer.cu, same contracts), called through SRU_KERNEL_IN (ops/dispatch.h), which checks
// that the operands share a device.
SRU_DECLARE_KERNELS(
// One optimiser step of the parameters p[k] (one dtype and device) with gradients g[k] and slots s0[k],
// s1[k] (s1 unused by SGD: pass s0), each of p[k]'s shape: a multi-tensor update (the CUDA twin covers up
// to kMaxTensorsPerLaunch tensors a launch). When clip (f64 (2), grad_norm_and_clip_factor's) is
// defined and clip[1] != 1, each gradient element is multiplied by clip[1] (as the gradient's dtype)
// before it is used; clip[1] NaN: nothing is changed.
void optimizer_update(OptimizerKind kind, const std::vector<Tensor>& p, const std::vector<Tensor>& g,
                      const std::vector<Tensor>& s0, const std::vector<Tensor>& s1, const StepScalarsSource& scalars,
                      const Tensor& clip);
// The same update over whole flat buffers p, g, s0, s1 (1-d, one dtype), member by member: segments is
// the i64 (S, 4) SegmentRow table (optim/optimizer_math.h) of `pieces` pieces of `piece` elements; a row
// flagged kSegmentNoWeightDecay is updated with wd 0. Elements outside every row are not touched.
void optimizer_update_segments(OptimizerKind kind, const Tensor& p, const Tensor& g, const Tensor& s0,
                               const Tensor& s1, const Tensor& segments, int64_t piece, int64_t pieces,
                               const StepScalarsSource& scalars, const Tensor& clip);
// For the gradients g[k] (one dtype and device) in order, each cut into blocks of block_size elements:
// partial[n] = sum of the n-th block's g^2 in double (the blocks of g[0], then of g[1], ...).
void sum_squares_blocks(const std::vector<Tensor>& g, int64_t block_size, const Tensor& partial);
// The same over a whole flat gradient buffer g read member by member through the segment table
// segments (pieces of `block_size` elements: each member's blocks as sum_squares_blocks cuts that
// member's gradient): partial[c] = the sum of piece c's g^2, for the `pieces` pieces.
void sum_squares_segments(const Tensor& g, const Tensor& segments, int64_t block_size, int64_t pieces,
                          const Tensor& partial);
// result (2) f64 = finish_norm_and_factor (optim/optimizer_math.h) of the sum of partial, in order: with
// grad_scale 1, [norm, clip factor (1 when nothing is to be scaled, NaN when nothing may be updated:
// the norm, or loss (0-d, f32 or f64) when defined, not finite)].
void finish_grad_norm(const Tensor& partial, double max_norm, const GradScaleSource& grad_scale, const Tensor& loss,
                      const Tensor& result);
// g *= result[1] (as g's dtype) unless the factor is 1 or NaN.
void scale_by_clip_factor(const Tensor& g, const Tensor& result);
)

// Elements per piece of the whole-buffer update (a CUDA block's share) and per block of the norm's sums.
inline constexpr int64_t kUpdatePiece = 4096;
inline constexpr int64_t kNormBlock = 1 << 16;

// Tensors per multi-tensor CUDA launch: the pointer table travels as a kernel argument, within the
// 4 KiB that every CUDA version accepts (48 x (4 pointers + 2 sizes) = 2.3 KiB).
inline constexpr int kMaxTensorsPerLaunch = 48;

// StepScalars and the scalar sources hold no tensor (for SRU_KERNEL_IN's device check).
template <typename F>
void visit_tensors(const StepScalars&, F&&) {}
template <typename F>
void visit_tensors(const StepScalarsSource&, F&&) {}
template <typename F>
void visit_tensors(const GradScaleSource&, F&&) {}

}  // namespace sru::optim
