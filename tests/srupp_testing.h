// Helpers of the SRU++ tests (unit, gradcheck, CUDA parity): small stack options, setting the
// attention weight alpha of every attention layer (a new layer has alpha = 0, which hides the
// attention path from a test), and comparing two stacks tensor by tensor.
#pragma once

#include <string>
#include <vector>

#include "nn/srupp.h"
#include "testing.h"

namespace sru::testing {

inline nn::SRUppOptions srupp_options(int64_t input, int64_t hidden, int64_t proj, int64_t layers, int64_t heads,
                                      DType dtype = DType::F64) {
  nn::SRUppOptions o;
  o.input_size = input;
  o.hidden_size = hidden;
  o.proj_size = proj;
  o.num_layers = layers;
  o.num_heads = heads;
  o.dtype = dtype;
  return o;
}

// Every tensor of an SRU++ carried state, in order: c, then the raw memories (SruppState) or each attention
// layer's cached keys and values (SruppCacheState, evaluation with a memory).
inline std::vector<Tensor> srupp_state_tensors(const nn::EncoderStatePtr& state) {
  if (!state) return {};
  if (const auto* raw = dynamic_cast<const nn::SruppState*>(state.get())) return raw->tensors();
  const auto& cached = dynamic_cast<const nn::SruppCacheState&>(*state);
  std::vector<Tensor> out = {cached.c};
  for (const nn::KeyValueCache& cache : cached.caches) {
    out.push_back(cache.keys);
    out.push_back(cache.values);
  }
  return out;
}

inline void set_alpha(const nn::SRUpp& model, double value) {
  for (const auto& layer : model.layers)
    if (auto* a = dynamic_cast<nn::SRUppAttention*>(layer->transform_module.get())) a->alpha.fill_(value);
}

// Expects the two stacks' tensors to have the same names in the same order and to be equal bit for
// bit, except those whose name ends with `except` (none when it is empty); returns those names.
inline std::vector<std::string> expect_same_state_except(const nn::SRUpp& a, const nn::SRUpp& b,
                                                         const std::string& except = "") {
  const auto a_state = a.state(), b_state = b.state();
  std::vector<std::string> excepted;
  EXPECT_EQ(a_state.size(), b_state.size());
  for (size_t i = 0; i < std::min(a_state.size(), b_state.size()); ++i) {
    const auto& [name, tensor] = a_state[i];
    EXPECT_EQ(name, b_state[i].first);
    if (!except.empty() && name.ends_with(except)) excepted.push_back(name);
    else EXPECT_TRUE(tensors_near(tensor, b_state[i].second, 0, 0)) << name;
  }
  return excepted;
}

}  // namespace sru::testing
