// Checkpoint averaging (see average.h).
#include "train/average.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "core/error.h"
#include "train/checkpoint.h"

namespace sru::train {

namespace {

// The model-defining part of a stored config, as "section.key" -> value: the task and the model section.
std::map<std::string, std::string> model_keys(const std::string& config_yaml, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(config_yaml);
  } catch (const YAML::Exception& e) {
    SRU_FAIL(path, ": the stored config does not parse: ", e.what());
  }
  std::map<std::string, std::string> keys;
  const auto flatten = [&](auto&& self, const YAML::Node& node, const std::string& prefix) -> void {
    if (node.IsMap()) {
      for (const auto& kv : node) self(self, kv.second, prefix + "." + kv.first.as<std::string>());
    } else if (node.IsSequence()) {
      std::string joined;
      for (const auto& item : node) joined += (joined.empty() ? "" : ", ") + YAML::Dump(item);
      keys[prefix] = "[" + joined + "]";
    } else {
      keys[prefix] = node.IsNull() ? "null" : node.Scalar();
    }
  };
  keys["task"] = root["task"] ? root["task"].Scalar() : "";
  if (root["model"]) flatten(flatten, root["model"], "model");
  return keys;
}

std::string shape_of(const Tensor& t) { return shape_str(t.shape()) + " " + std::string(dtype_name(t.dtype())); }

// The first way checkpoint b differs from a (model config, vocabulary, tensor names, shapes and dtypes,
// or the values of non-floating tensors that must be equal), or "" when they hold the same model.
std::string first_difference(const LoadedCheckpoint& a, const std::string& pa, const LoadedCheckpoint& b,
                             const std::string& pb) {
  const auto ka = model_keys(a.file.metadata.at("config"), pa), kb = model_keys(b.file.metadata.at("config"), pb);
  for (const auto& [key, value] : ka) {
    const auto it = kb.find(key);
    if (it == kb.end()) return "the config key " + key + " is " + value + " in " + pa + " and absent from " + pb;
    if (it->second != value)
      return "the config key " + key + " is " + value + " in " + pa + " and " + it->second + " in " + pb;
  }
  for (const auto& [key, value] : kb)
    if (!ka.contains(key)) return "the config key " + key + " is " + value + " in " + pb + " and absent from " + pa;
  const auto vocabulary = [](const LoadedCheckpoint& c) {
    const auto it = c.file.metadata.find("vocabulary");
    return it == c.file.metadata.end() ? std::string() : it->second;
  };
  if (vocabulary(a) != vocabulary(b))
    return "the vocabulary is " + vocabulary(a) + " in " + pa + " and " + vocabulary(b) + " in " + pb;
  // The model tensors and the task's non-floating state (a vocabulary) must match, in both directions;
  // not the optimiser's state, the raw weights of a run with a weight average, or the task's floating
  // state (carried recurrent state: the last checkpoint's is kept).
  const auto compared = [](const std::string& name, const Tensor& t) {
    return !is_training_state(name) || (name.rfind("task.", 0) == 0 && !is_floating(t.dtype()));
  };
  std::map<std::string, const Tensor*> tb;
  for (const auto& [name, t] : b.file.tensors)
    if (compared(name, t)) tb[name] = &t;
  for (const auto& [name, t] : a.file.tensors) {
    if (!compared(name, t)) continue;
    const auto it = tb.find(name);
    if (it == tb.end()) return "tensor '" + name + "' is in " + pa + " and not in " + pb;
    const Tensor& u = *it->second;
    if (t.shape() != u.shape() || t.dtype() != u.dtype())
      return "tensor '" + name + "' is " + shape_of(t) + " in " + pa + " and " + shape_of(u) + " in " + pb;
    if (!is_floating(t.dtype()) && t.to_vector<int64_t>() != u.to_vector<int64_t>())
      return "tensor '" + name + "' (" + std::string(dtype_name(t.dtype())) + ", must be equal to average) differs " +
             "between " + pa + " and " + pb;
    tb.erase(it);
  }
  if (!tb.empty()) return "tensor '" + tb.begin()->first + "' is in " + pb + " and not in " + pa;
  return "";
}

}  // namespace

std::string average_checkpoints(const std::vector<std::string>& inputs, const std::string& out) {
  SRU_CHECK(inputs.size() >= 2, "--average needs two checkpoints or more, got ", inputs.size());
  SRU_CHECK(!out.empty(), "--average needs --out FILE: where to write the averaged checkpoint");
  for (const std::string& in : inputs)
    SRU_CHECK(!std::filesystem::exists(out) || !std::filesystem::exists(in) || !std::filesystem::equivalent(in, out),
              "--out ", out, " is one of the checkpoints being averaged: write the average to another file");
  std::vector<LoadedCheckpoint> ckpts;
  for (const std::string& in : inputs) ckpts.push_back(read_checkpoint(in));
  for (size_t i = 1; i < ckpts.size(); ++i) {
    const std::string diff = first_difference(ckpts[0], inputs[0], ckpts[i], inputs[i]);
    SRU_CHECK(diff.empty(), "--average: the checkpoints hold different models: ", diff);
  }
  // The model tensors of the first file, in its order, averaged over every file (in double).
  std::vector<std::map<std::string, const Tensor*>> by_name(ckpts.size());
  for (size_t i = 0; i < ckpts.size(); ++i)
    for (const auto& [name, t] : ckpts[i].file.tensors) by_name[i][name] = &t;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : ckpts[0].file.tensors) {
    if (is_training_state(name)) continue;
    if (!is_floating(t.dtype())) {
      tensors.emplace_back(name, t);
      continue;
    }
    std::vector<double> sum = t.to_vector<double>();
    for (size_t i = 1; i < ckpts.size(); ++i) {
      const std::vector<double> v = by_name[i].at(name)->to_vector<double>();
      for (size_t j = 0; j < sum.size(); ++j) sum[j] += v[j];
    }
    for (double& x : sum) x /= static_cast<double>(ckpts.size());
    tensors.emplace_back(name, Tensor::from_vector(sum, t.shape(), DType::F64).to(t.dtype()));
  }
  const size_t model_tensors = tensors.size();
  const LoadedCheckpoint& last = ckpts.back();
  for (const auto& [name, t] : last.file.tensors)
    if (name.rfind("task.", 0) == 0) tensors.emplace_back(name, t);
  safetensors::Metadata metadata = last.file.metadata;
  std::ostringstream from, steps;
  for (size_t i = 0; i < inputs.size(); ++i) {
    from << (i ? "\n" : "") << inputs[i] << " (step " << ckpts[i].progress.step << ")";
    steps << (i ? ", " : "") << ckpts[i].progress.step;
  }
  metadata["averaged_from"] = from.str();
  safetensors::save(out, tensors, metadata);
  std::ostringstream summary;
  summary << "averaged " << inputs.size() << " checkpoints (steps " << steps.str() << ") -> " << out << ": "
          << model_tensors << " model tensors, no optimiser state";
  return summary.str();
}

}  // namespace sru::train
