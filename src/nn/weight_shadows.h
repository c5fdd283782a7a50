// bf16 copies of a model's float32 parameters for a training step under bf16 precision: one conversion
// of each flat parameter buffer (nn/flat_parameters.h) at the step's start, where every product's
// cast(weight, BF16) converted its weight at its call (26 conversions in a configs/enwik8.yaml step,
// 0.28 ms of 7.8 on an H200; hundreds in a wmt-base step, each a dispatch). While a step's forward and
// backward run inside `WeightShadows::Scope`, cast (ops/shape_ops.h) takes a parameter's bf16 values
// from here: the same rounding of the same values, so the same bits as converting at the call, and
// its backward is cast's (the gradient widened to float32 into the parameter's place).
//
// Valid only between the refresh and the next change of the weights: the scope covers one step's
// forward and backward, which read the weights and never write them; the update, EMA exchanges, loads
// and moves come after it, and the next step refreshes first. That refresh at every Scope is what keeps
// the copies right: bf16_of's own checks (the buffer's address and device) catch a buffer exchanged or
// moved since, not weights written in place, so the copies are to be read through a Scope only.
// Parameters outside flat storage (shared storage, frozen) and slices of a parameter are converted at
// their calls as before. The copies' views are 32-byte aligned (flat offsets of 64 bytes at float32),
// where a conversion's own allocation was 256-byte aligned: cuBLASLt's heuristic sees the real alignment.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "nn/flat_parameters.h"
#include "ops/shape_ops.h"

namespace sru::nn {

class WeightShadows final : public Bf16CastSource {
 public:
  explicit WeightShadows(std::shared_ptr<FlatParameters> flat);

  // Converts every float32 group's values to bf16 (one dispatch a group), into fresh buffers: the
  // previous step's copies stay alive while its autograd graph holds views of them.
  void refresh();
  // A new view (its own tensor: cast records autograd on it) of parameter x's bf16 values as of the
  // last refresh, shaped as x; undefined when x is not a float32 member of the layout, or its group has
  // moved to another device or buffer since.
  Tensor bf16_of(const Tensor& x) const override;

  // The scope of one step's forward and backward: refreshes when bf16 precision is on (autocast) and
  // makes the copies cast's source until it ends; otherwise does nothing.
  class Scope {
   public:
    explicit Scope(WeightShadows* shadows);
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Bf16CastSourceScope source_;
  };

 private:
  struct Place {
    size_t group;
    int64_t offset;
  };
  std::shared_ptr<FlatParameters> flat_;
  std::unordered_map<const TensorImpl*, Place> places_;  // float32 members by their parameter's TensorImpl
  // A group's values rounded to bf16 at the last refresh (undefined before, and for other dtypes), and
  // the data they were made from (an exchange swaps the values' storage under the same tensor, so the
  // address tells).
  struct Copy {
    Tensor bf16;
    const void* made_from = nullptr;
  };
  std::vector<Copy> copies_;  // per group
};

}  // namespace sru::nn
