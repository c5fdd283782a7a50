// Flat storage for a model's trainable parameters and their gradients (llm.c's one allocation for all
// parameters): per dtype and device one buffer of values and one of gradients, each parameter a view of
// the first at its offset (rounded up to 64 bytes: aligned vector loads) and its gradient's place
// (TensorImpl::grad_home) the same offset of the second. Backward writes a parameter's first gradient of
// a pass into its place (autograd::gradient_destination, or AccumulateGrad's copy), so after backward
// the gradients are one buffer: the optimiser updates a group in one call over whole buffers (its slots
// laid out alike), whatever the number of tensors.
//
// Layout: members in the order given (Module::named_parameters: registration order), each group's
// buffers zero between members (the padding stays zero under every update rule). A parameter that shares
// its storage with another tensor (a view of a larger one, or one some module keeps a view of) stays
// where it is: rebinding it would split it from that view.
//
// The handles stay valid: flattening and to() change each parameter's storage and offset in place, so a
// module's members, named_parameters() lists, optimiser state and checkpoint names all follow. A
// gradient read from .grad is a view of the flat buffer: the next backward pass after zero_grad writes
// over it (as PyTorch's DDP with gradient_as_bucket_view); clone it to keep it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace sru::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class FlatParameters {
 public:
  struct Group {
    DType dtype = DType::F32;
    Device device;
    Tensor values;     // 1-d, every member's values at its offset
    Tensor gradients;  // 1-d, every member's gradient place at the same offset
    int64_t gradient_head = 0;  // elements of the gradient allocation before `gradients` (widen_gradients)
    std::vector<size_t> members;  // indices into members()
  };
  struct Member {
    std::string name;
    Tensor parameter;
    int64_t offset = 0;  // elements into its group's buffers
    size_t group = 0;
  };

  // Lays out the trainable parameters among params (requires_grad) that own their storage alone,
  // copying their values (and a gradient they hold) into the new buffers.
  explicit FlatParameters(const NamedTensors& params);

  const std::vector<Group>& groups() const { return groups_; }
  const std::vector<Member>& members() const { return members_; }
  // The member whose parameter is t (same TensorImpl), or nullptr.
  const Member* find(const Tensor& t) const;
  // A zero-filled buffer laid out as group g's values, and the views of it that correspond to its
  // members (in the group's member order): optimiser slots and weight averages laid out alike.
  Tensor zeros_like(size_t group) const;
  std::vector<Tensor> member_views(size_t group, const Tensor& buffer) const;
  // Whether every member of group g has its gradient of this pass in its place (.grad is the place):
  // then group.gradients holds them all.
  bool gradients_in_place(size_t group) const;
  // The group whose members are exactly `params` (the same tensors in the same order), or -1: where a
  // caller over a parameter list (the optimiser's) may work on whole buffers instead.
  int group_of(const NamedTensors& params) const;
  // Exchanges group g's values with `buffer` (a whole tensor laid out as them, zeros_like's) without a
  // copy: the members then read what buffer held, and buffer holds their values (the weight average's
  // exchange, train/ema.h). Views of buffer made before keep pointing at its old storage.
  void exchange_values(size_t group, Tensor& buffer);
  // Moves every group's buffers to `device` (one copy each for the values; gradients are dropped, as
  // Tensor::to_ drops them), rebinding the members in place.
  void to(Device device);
  // Reallocates group g's gradient buffer with `head` elements before it (zeros; the gradients held
  // so far are copied over) and returns the whole: data-parallel training sums the gradients and the
  // step's loss, votes and flags in the head with one all-reduce (dist/grad_sync.h). group.gradients
  // stays the members' part.
  Tensor widen_gradients(size_t group, int64_t head);

 private:
  std::vector<Group> groups_;
  std::vector<Member> members_;
};

}  // namespace sru::nn
