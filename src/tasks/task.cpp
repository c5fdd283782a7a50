// The parts of the Task interface every task shares: split checks, metric lookup and formatting, the
// training loss.
#include "tasks/task.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "ops/softmax.h"

namespace sru::tasks {

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

void Task::check_split(const std::string& split) const {
  const std::vector<std::string> all = splits();
  SRU_CHECK(std::find(all.begin(), all.end(), split) != all.end(), "task ", name_, " has no split '", split,
            "' (its splits: ", joined(all), ")");
}

MetricSpec Task::metric(const std::string& name) const {
  std::vector<std::string> names;
  for (const MetricSpec& m : metrics()) {
    if (m.name == name && !m.is_count) return m;
    if (!m.is_count) names.push_back(m.name);
  }
  SRU_FAIL("task ", name_, " reports no metric '", name, "' (its metrics: ", joined(names), ")");
}

std::string translation_speed(const TranslationStats& stats) {
  const auto per_second = [&](double n) { return stats.seconds > 0 ? n / stats.seconds : 0.0; };
  std::ostringstream out;
  out << "translated " << stats.sentences << " sentences in " << stats.seconds << " s: "
      << per_second(static_cast<double>(stats.sentences)) << " sentences/s, "
      << per_second(static_cast<double>(stats.target_tokens)) << " target tokens/s (" << stats.search << ")";
  return out.str();
}

std::string encoder_not_capturable(const nn::SequenceEncoder& encoder, const std::string& type, Device device) {
  return encoder.capturable_on(device)
             ? ""
             : "model.type " + type + " on " + device.str() + " cannot be captured (nn/encoder.h capturable_on)";
}

std::string format_metrics(const Task& task, const Metrics& metrics) {
  std::ostringstream os;
  os << std::fixed;
  for (const MetricSpec& m : task.metrics()) {
    auto it = metrics.find(m.name);
    if (m.is_count || it == metrics.end()) continue;
    os << (os.tellp() > 0 ? "  " : "") << m.name << " " << std::setprecision(m.precision) << it->second;
  }
  return os.str();
}

Tensor string_tensor(const std::string& text) {
  std::vector<int32_t> v(text.begin(), text.end());
  for (auto& x : v) x &= 0xff;
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
}

std::string tensor_string(const Tensor& t, const std::string& name) {
  SRU_CHECK(t.dtype() == DType::I32 && t.dim() == 1, "checkpoint tensor '", name, "' must be a 1-d i32 byte string");
  std::string s;
  for (int32_t x : t.to_vector<int32_t>()) {
    SRU_CHECK(x >= 0 && x < 256, "checkpoint tensor '", name, "' holds a value outside 0..255");
    s.push_back(static_cast<char>(x));
  }
  return s;
}

std::string checkpoint_string(const safetensors::File& file, const std::string& name, const std::string& task) {
  const Tensor* t = file.find(name);
  SRU_CHECK(t, "the checkpoint has no '", name, "' tensor (not a ", task, " checkpoint?)");
  return tensor_string(*t, name);
}

void stage_into(Tensor& slot, const Tensor& host, Device device) {
  if (!slot.defined()) slot = Tensor::zeros(host.shape(), host.dtype(), device);
  slot.copy_(host);
}

Tensor training_cross_entropy(const Tensor& logits, const Tensor& target, const config::TrainConfig& train,
                              int64_t ignore_index) {
  return cross_entropy(logits, target, ignore_index, Reduction::Mean, train.label_smoothing);
}

}  // namespace sru::tasks
