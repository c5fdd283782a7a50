// What a sequence encoder carries from one call to the next (truncated back-propagation through time,
// decoding step by step): a struct of the encoder's own with named fields (nn/encoder.h), handed around
// as EncoderStatePtr. A state is a value: forward_sequence and the methods below make new states and
// never change one, so a copy kept elsewhere (a beam hypothesis, a checkpoint's) stays as it was. A null
// pointer means zeros (and no memory or cache).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/index.h"

namespace sru::nn {

class EncoderState;
using EncoderStatePtr = std::shared_ptr<const EncoderState>;

class EncoderState {
 public:
  virtual ~EncoderState() = default;
  // Row i of the result continues row rows[i] of this one (I64 indices, any device; beam search).
  virtual EncoderStatePtr reordered(const Tensor& rows) const = 0;
  // Every tensor on `device`.
  virtual EncoderStatePtr on(Device device) const = 0;
  // Without autograd history (the next segment of truncated back-propagation starts here).
  virtual EncoderStatePtr detached() const = 0;
  // The tensors a checkpoint keeps, in a fixed order, each with the batch (streams) at dim 1, so a
  // data-parallel rank's rows are a slice (the encoder's state_from reads them back).
  virtual std::vector<Tensor> tensors() const = 0;
};

// A state whose fields are tensors with the batch at dim 1 (the recurrences' (layers, B, out) states, raw
// memories (M, B, n)): reordered, on and detached map every field. Derived lists its fields in
// `template <typename F> void each(F&& f)` (f(Tensor&) per field, in a fixed order).
template <typename Derived>
class BatchAtDim1State : public EncoderState {
 public:
  EncoderStatePtr reordered(const Tensor& rows) const override {
    return mapped([&](const Tensor& t) { return index_select(t, 1, rows.to(t.device())); });
  }
  EncoderStatePtr on(Device device) const override {
    return mapped([&](const Tensor& t) { return t.to(device); });
  }
  EncoderStatePtr detached() const override {
    return mapped([](const Tensor& t) { return t.detach(); });
  }
  std::vector<Tensor> tensors() const override {
    std::vector<Tensor> out;
    Derived copy = static_cast<const Derived&>(*this);
    copy.each([&](Tensor& t) { out.push_back(t); });
    return out;
  }

 private:
  template <typename F>
  EncoderStatePtr mapped(F&& f) const {
    auto copy = std::make_shared<Derived>(static_cast<const Derived&>(*this));
    copy->each([&](Tensor& t) {
      if (t.defined()) t = f(t);
    });
    return copy;
  }
};

// The state of the recurrences whose only carried tensor is the cell state (SRU, Embed-SRU, SRU++
// without a memory): c (layers, B, out).
struct CellState : BatchAtDim1State<CellState> {
  Tensor c;
  explicit CellState(Tensor c_ = Tensor()) : c(std::move(c_)) {}
  template <typename F>
  void each(F&& f) {
    f(c);
  }
};

// `state` as the encoder's own type S; null stays null. A state of another type (another encoder's) is
// an error naming the encoder.
template <typename S>
const S* state_as(const EncoderStatePtr& state, const char* encoder) {
  if (!state) return nullptr;
  const S* typed = dynamic_cast<const S*>(state.get());
  SRU_CHECK(typed, encoder, ": the carried state is another encoder's (its type does not match)");
  return typed;
}

}  // namespace sru::nn
