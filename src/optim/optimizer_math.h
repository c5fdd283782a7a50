// The per-element update of each optimiser (formulas in optim/optimizer.h), written once as SRU_HD
// functions: the CPU loops (cpu/optimizer.cpp) and the CUDA kernel (cuda/optimizer.cu) run this code.
// All arithmetic is in double, whatever the parameter's dtype.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hd.h"

namespace sru::optim {

enum class OptimizerKind { Sgd, Adam, AdamW, Adamax, RAdam, RAdamW };

// The scalars of one step, shared by every element of every parameter.
struct StepScalars {
  double lr, momentum, b1, b2, wd, eps;
  double bias1, bias2;  // 1 - b1^t, 1 - b2^t
  bool first;           // step 1: SGD's momentum buffer starts as the gradient
  bool rectify;         // RAdam: rho_t > 5
  double rect;          // RAdam's rectification factor when rectify
};

// The step's scalars as the update kernels take them: `value`, or, when in_memory is set, the
// StepScalars there (device memory on a GPU: a CUDA graph's replays read each step's learning rate and
// bias corrections from memory the host writes before the replay, core/cuda/graph.h); no_weight_decay:
// wd taken as 0 (a group of parameters excluded from weight decay). get() dereferences in_memory: call
// it where that memory is (in the kernel).
struct StepScalarsSource {
  StepScalars value{};
  const StepScalars* in_memory = nullptr;
  bool no_weight_decay = false;
  SRU_HD StepScalars get() const {
    StepScalars s = in_memory ? *in_memory : value;
    if (no_weight_decay) s.wd = 0.0;
    return s;
  }
};

// The factor accumulation's summed gradients are multiplied by to be the mean's (grad_scale of
// finish_norm_and_factor): `value`, or, when in_memory is set, the double there (a captured accumulated
// step's replays read each step's 1 / terms from memory the host writes before the replay). get()
// dereferences in_memory: call it where that memory is (in the kernel).
struct GradScaleSource {
  double value = 1.0;
  const double* in_memory = nullptr;
  SRU_HD double get() const { return in_memory ? *in_memory : value; }
};

// One row of a segment table (i64 (S, 4) tensor on the buffers' device, read as SegmentRow): a member of a
// flat parameter group (nn/flat_parameters.h) as the whole-buffer kernels see it. The member's elements
// are [offset, offset + numel) of the group's buffers, cut into pieces of the table's piece size (a CUDA
// block's share of the update, a norm block); its pieces are numbered from first_piece on, rows in
// order, so piece c belongs to the last row with first_piece <= c. flags: its per-parameter settings.
struct SegmentRow {
  int64_t offset, numel, first_piece, flags;
};
inline constexpr int64_t kSegmentNoWeightDecay = 1;  // flags bit: this parameter gets no weight decay

// The row of piece c among `count` rows (members without elements have no pieces and are never found).
SRU_HD int segment_of_piece(const SegmentRow* rows, int count, int64_t c) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (rows[mid].first_piece <= c) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Piece c of a table of `count` rows cut in pieces of `piece` elements: its member's row and the
// piece's elements [begin, end) within that member (the member's last piece may be shorter).
struct SegmentPiece {
  SegmentRow row;
  int64_t begin, end;
};
SRU_HD SegmentPiece segment_piece(const SegmentRow* rows, int count, int64_t c, int64_t piece) {
  const SegmentRow row = rows[segment_of_piece(rows, count, c)];
  const int64_t begin = (c - row.first_piece) * piece;
  return {row, begin, begin + piece < row.numel ? begin + piece : row.numel};
}

// Gradient clipping's factor for the global norm: max_norm / (norm + 1e-6) when max_norm > 0 and the
// norm is finite and above it, else 1 (nothing to scale).
SRU_HD double clip_factor(double norm, double max_norm) {
  return max_norm > 0 && std::isfinite(norm) && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
}

// The [norm, factor] that finish_grad_norm writes, from the stored gradients' sum of squares: the true
// gradients are grad_scale times the stored ones (gradient accumulation's 1 / terms, folded into the
// update instead of a scaling pass over every gradient), so the norm is theirs and the factor is what the
// stored ones are multiplied by: grad_scale times the clip factor of that norm. A step that must not be
// applied (the norm, or the step's loss when given, not finite) gets factor NaN: the update kernels
// then change nothing (skips_update), so that the decision needs no host read before the update.
SRU_HD void finish_norm_and_factor(double sum_squares, double max_norm, double grad_scale, bool loss_finite,
                                   double* result) {
  result[0] = grad_scale * sqrt(sum_squares);
  result[1] = loss_finite && std::isfinite(result[0]) ? grad_scale * clip_factor(result[0], max_norm) : nan("");
}

// Whether a clip factor says: leave everything as it is (a non-finite step).
SRU_HD bool skips_update(double factor) { return factor != factor; }

// Updates one element: weight w, gradient grad, slots s0 and s1 (s1 unused by SGD).
template <OptimizerKind K, typename T>
SRU_HD void update_element(T& w, T grad, T& s0, T& s1, const StepScalars& o) {
  if constexpr (K == OptimizerKind::Sgd) {
    const double x = w;
    double g = grad + o.wd * x;
    if (o.momentum != 0.0) {
      const double buf = o.first ? g : o.momentum * s0 + g;
      s0 = static_cast<T>(buf);
      g = buf;
    }
    w = static_cast<T>(x - o.lr * g);
  } else if constexpr (K == OptimizerKind::Adamax) {
    const double x = w, g = grad + o.wd * x;
    const double m = o.b1 * s0 + (1 - o.b1) * g;
    const double a = o.b2 * s1, b = std::abs(g) + o.eps;
    const double u = a < b ? b : a;  // std::max(a, b), also for NaN
    s0 = static_cast<T>(m);
    s1 = static_cast<T>(u);
    w = static_cast<T>(x - o.lr / o.bias1 * m / u);
  } else if constexpr (K == OptimizerKind::RAdam || K == OptimizerKind::RAdamW) {
    // RAdamW: decoupled weight decay, as the `radam` package SRU++'s reference trains with.
    const bool decoupled = K == OptimizerKind::RAdamW;
    const double x = w * (decoupled ? 1.0 - o.lr * o.wd : 1.0), g = grad + (decoupled ? 0.0 : o.wd) * static_cast<double>(w);
    const double m = o.b1 * s0 + (1 - o.b1) * g;
    const double v = o.b2 * s1 + (1 - o.b2) * g * g;
    s0 = static_cast<T>(m);
    s1 = static_cast<T>(v);
    const double m_hat = m / o.bias1;
    w = static_cast<T>(x - (o.rectify ? o.lr * m_hat * o.rect * std::sqrt(o.bias2) / (std::sqrt(v) + o.eps) : o.lr * m_hat));
  } else {  // Adam, AdamW (decoupled weight decay)
    const bool decoupled = K == OptimizerKind::AdamW;
    const double shrink = decoupled ? 1.0 - o.lr * o.wd : 1.0, l2 = decoupled ? 0.0 : o.wd;
    const double x = w * shrink, g = grad + l2 * static_cast<double>(w);
    const double m = o.b1 * s0 + (1 - o.b1) * g;
    const double v = o.b2 * s1 + (1 - o.b2) * g * g;
    s0 = static_cast<T>(m);
    s1 = static_cast<T>(v);
    w = static_cast<T>(x - o.lr * (m / o.bias1) / (std::sqrt(v / o.bias2) + o.eps));
  }
}

// Calls fn.template operator()<K>() with the compile-time kind matching `kind`.
template <typename F>
void with_optimizer_kind(OptimizerKind kind, const F& fn) {
  switch (kind) {
    case OptimizerKind::Sgd: return fn.template operator()<OptimizerKind::Sgd>();
    case OptimizerKind::Adam: return fn.template operator()<OptimizerKind::Adam>();
    case OptimizerKind::AdamW: return fn.template operator()<OptimizerKind::AdamW>();
    case OptimizerKind::Adamax: return fn.template operator()<OptimizerKind::Adamax>();
    case OptimizerKind::RAdam: return fn.template operator()<OptimizerKind::RAdam>();
    case OptimizerKind::RAdamW: return fn.template operator()<OptimizerKind::RAdamW>();
  }
}

}  // namespace sru::optim
