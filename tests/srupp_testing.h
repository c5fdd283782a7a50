// Helpers of the SRU++ tests (unit, gradcheck, CUDA parity): small stack options and setting the
// attention weight alpha of every attention layer (a new layer has alpha = 0, which hides the
// attention path from a test).
#pragma once

#include "nn/srupp.h"

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

inline void set_alpha(const nn::SRUpp& model, double value) {
  for (const auto& layer : model.layers)
    if (auto* a = dynamic_cast<nn::SRUppAttention*>(layer->transform_module.get())) a->alpha.fill_(value);
}

}  // namespace sru::testing
