// Dropout with Philox random numbers: out = x * m, m = Bernoulli(1 - p) / (1 - p).
// Shapes: x any; the mask has x's shape (or, for variational dropout, a caller-made mask of a
// trailing shape, e.g. (B, d) shared across time, applied with mul()).
// Element i keeps when uniform(seed, offset, i) >= p, so CPU and CUDA masks agree for a seed.
// dropout() keeps no mask: one kernel draws each element's number and multiplies (apply_dropout), and
// the backward draws the same numbers from the saved (seed, offset): dx = g * m. Versus a stored mask
// (fill_dropout_mask, then mul): one launch instead of two each way, 4 bytes an element not written,
// read twice and held until backward, and at bf16 no float32 round trip (two casts each way).
//
// Batch shards (data-parallel training, core/rng.h): when the generator says this process computes
// rows [first, first + count) of a batch of `rows`, a mask of this process's shape draws the numbers
// of those rows in the mask the whole batch would draw, and reserves the whole mask's words. View the
// shape as (outer, count, inner) with outer the product of the dims before `batch_dim`; local element
// (o, b, i) takes the number of global element (o, first + b, i) of (outer, rows, inner). So a rank's
// mask is exactly the single process's rows when `batch_dim` is where the batch is (0 for (B, d) masks
// and attention weights (B*heads, Lq, Lk); 1 for time-major (L, B, d) activations), and the
// generator's offset after a step is the single process's. A dim of count*k (k per batch row, batch
// major) works too.
#pragma once

#include "core/hd.h"
#include "core/philox.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "ops/kernels.h"

namespace sru {

// Returns x itself when !training or p == 0. batch_dim: where the batch is in x (see above).
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen = default_generator(), int batch_dim = 0);
// A mask of `shape` with entries 0 or 1/(1-p).
Tensor dropout_mask(const Shape& shape, double p, DType dtype = DType::F32, Generator& gen = default_generator(),
                    Device device = Device::cpu(), int batch_dim = 0);

// Which Philox elements a mask takes: local element j is global element
// (j / span) * global_span + first + j % span (span = global_span = numel, first = 0 without a shard).
struct MaskWindow {
  int64_t span = 0, global_span = 0, first = 0;
  SRU_HD int64_t global_index(int64_t j) const { return (j / span) * global_span + first + j % span; }
};
// Holds no tensor: nothing for the dispatcher's device check (ops/dispatch.h) to visit.
template <typename F>
void visit_tensors(const MaskWindow&, F&&) {}
template <typename F>
void visit_tensors(const PhiloxOffset&, F&&) {}

// The window of a mask of `shape` under `shard`, and the number of Philox words the whole batch's mask
// takes (what the generator reserves). Throws when the shape does not scale with the shard's rows.
MaskWindow mask_window(const Shape& shape, const BatchShard& shard, int batch_dim, int64_t& words);

// A dropout mask drawn where it is read (issue 38 item 3: the SRU recurrence's mask on c), not filled
// into a tensor first: draw_dropout_mask reserves the words dropout_mask would and returns what its
// kernel would write as a function, value<T>(j) = element j of the mask of `shape` (row-major), the
// same number to the bit (the same Philox word, threshold and scale). `on` false: no dropout.
struct MaskDraw {
  bool on = false;
  uint64_t seed = 0;
  PhiloxOffset offset;
  double p = 0, keep = 1;  // keep = 1 / (1 - p), as the fill kernels compute it
  MaskWindow window;
  template <typename T>
  SRU_HD T value(int64_t j) const {
    const float u = philox::u32_to_unit_float(philox::random_u32(seed, offset.value(), window.global_index(j)));
    return u >= static_cast<float>(p) ? static_cast<T>(keep) : T(0);
  }
};
MaskDraw draw_dropout_mask(const Shape& shape, double p, Generator& gen = default_generator(), int batch_dim = 0);
// The mask a draw describes, as a tensor of `shape` (one fill dispatch): what dropout_mask returns.
Tensor mask_of(const MaskDraw& draw, const Shape& shape, DType dtype, Device device);

// Kernels of both backends (ops/kernels.h): the CUDA twins (ops/cuda/dropout.cu) have the same contracts, tensors on one
// CUDA device.
SRU_DECLARE_KERNELS(
void fill_dropout_mask(uint64_t seed, PhiloxOffset offset, double p, const Tensor& mask, const MaskWindow& window);
// out = in * m, m the mask fill_dropout_mask writes for the same arguments, computed in compute_t (float
// for bf16, with a float m as a float32 mask's) and rounded once: dropout's product and its gradient.
void apply_dropout(uint64_t seed, PhiloxOffset offset, double p, const Tensor& in, const Tensor& out, const MaskWindow& window);
)

}  // namespace sru
