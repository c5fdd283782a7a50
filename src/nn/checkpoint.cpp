// Module state <-> safetensors, with complete mismatch reports.
#include "nn/checkpoint.h"

#include <set>
#include <sstream>

namespace sru::nn {

void save_state(const Module& module, const std::string& path, const safetensors::Metadata& metadata) {
  safetensors::save(path, module.state(), metadata);
}

safetensors::Metadata load_state(Module& module, const std::string& path) {
  const safetensors::File file = safetensors::load(path);
  load_state_from(module, file, path);
  return file.metadata;
}

void load_state_from(Module& module, const safetensors::File& file, const std::string& source,
                     const std::vector<std::string>& ignored_prefixes) {
  auto ignored = [&](const std::string& name) {
    for (const std::string& prefix : ignored_prefixes)
      if (name.rfind(prefix, 0) == 0) return true;
    return false;
  };
  const NamedTensors expected = module.state();
  std::ostringstream problems;
  int count = 0;
  std::set<std::string> known;
  for (const auto& [name, t] : expected) {
    known.insert(name);
    const Tensor* found = file.find(name);
    if (!found) {
      problems << "\n  missing: " << name << " " << shape_str(t.shape()) << " " << dtype_name(t.dtype());
      ++count;
    } else if (found->shape() != t.shape() || found->dtype() != t.dtype()) {
      problems << "\n  mismatch: " << name << " is " << shape_str(found->shape()) << " " << dtype_name(found->dtype())
               << " in the file, the model expects " << shape_str(t.shape()) << " " << dtype_name(t.dtype());
      ++count;
    }
  }
  for (const auto& [name, t] : file.tensors)
    if (!known.count(name) && !ignored(name)) {
      problems << "\n  unexpected: " << name << " " << shape_str(t.shape()) << " " << dtype_name(t.dtype());
      ++count;
    }
  SRU_CHECK(count == 0, "checkpoint '", source, "' does not match the model (", count, " problem",
            count == 1 ? "" : "s", "):", problems.str());
  for (const auto& [name, t] : expected) {
    Tensor target = t;
    target.copy_(*file.find(name));
  }
}

}  // namespace sru::nn
