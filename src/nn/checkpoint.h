// Saving and loading a Module's state (parameters and buffers, by their dotted names) as safetensors.
#pragma once

#include <string>

#include "core/safetensors.h"
#include "nn/module.h"

namespace sru::nn {

// Atomic write of module.state() plus `metadata` (see core/safetensors.h).
void save_state(const Module& module, const std::string& path, const safetensors::Metadata& metadata = {});
// Copies every tensor of the file into the module. Names, shapes and dtypes must match exactly;
// otherwise nothing is changed and the error lists every missing, unexpected and mismatched tensor.
safetensors::Metadata load_state(Module& module, const std::string& path);
// The same from an already read file; tensors whose names start with one of ignored_prefixes (e.g.
// training state stored beside the model) are neither loaded nor reported. `source` names the file.
void load_state_from(Module& module, const safetensors::File& file, const std::string& source,
                     const std::vector<std::string>& ignored_prefixes = {});

}  // namespace sru::nn
