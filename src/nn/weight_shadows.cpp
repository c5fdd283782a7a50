// bf16 copies of the flat float32 parameters for a training step (see weight_shadows.h).
#include "nn/weight_shadows.h"

#include "ops/matmul.h"

namespace sru::nn {

WeightShadows::WeightShadows(std::shared_ptr<FlatParameters> flat) : flat_(std::move(flat)) {
  SRU_CHECK(flat_ != nullptr, "WeightShadows: the model's parameters are not in flat storage");
  for (const FlatParameters::Member& m : flat_->members())
    if (flat_->groups()[m.group].dtype == DType::F32) places_[m.parameter.impl().get()] = {m.group, m.offset};
  copies_.resize(flat_->groups().size());
}

void WeightShadows::refresh() {
  for (size_t g = 0; g < flat_->groups().size(); ++g) {
    const FlatParameters::Group& group = flat_->groups()[g];
    if (group.dtype != DType::F32) continue;
    copies_[g] = {group.values.detach().to(DType::BF16), group.values.data_ptr()};
  }
}

Tensor WeightShadows::bf16_of(const Tensor& x) const {
  const auto found = places_.find(x.impl().get());
  if (found == places_.end()) return Tensor();
  const Place& place = found->second;
  const FlatParameters::Group& group = flat_->groups()[place.group];
  const Copy& copy = copies_[place.group];
  // The copy must be of the buffer x lives in now (an exchange or a move since makes it stale), and x
  // must still be that buffer's view at its place.
  if (!copy.bf16.defined() || copy.made_from != group.values.data_ptr() || copy.bf16.device() != x.device() ||
      x.numel() == 0 || x.data_ptr() != static_cast<const float*>(group.values.data_ptr()) + place.offset)
    return Tensor();
  return copy.bf16.narrow0(place.offset, x.numel()).view(x.shape());
}

WeightShadows::Scope::Scope(WeightShadows* shadows)
    : source_([shadows]() -> const Bf16CastSource* {
        if (!shadows || !autocast_bf16()) return nullptr;
        shadows->refresh();
        return shadows;
      }()) {}

}  // namespace sru::nn
