// A training step composed from the library's public pieces, for the host-wait tests on the CPU and on
// a GPU: forward, cross-entropy, backward, gradient clipping on the device, the loss and norm read
// together (the step's one host wait), the optimiser update. It mirrors train::Trainer's step; once the
// shared step function of src/train exists the tests should call that instead.
#pragma once

#include <cmath>
#include <vector>

#include "autograd/engine.h"
#include "core/host_sync.h"
#include "ops/softmax.h"
#include "optim/optimizer.h"
#include "tasks/charlm.h"

namespace sru::testing {

struct StepValues {
  double loss, grad_norm;
};

// One step of a char-LM on batch x (L, B) with targets (L*B), both made on the CPU; state is carried.
inline StepValues charlm_train_step(const tasks::CharLM& model, std::vector<Tensor>& state, const Tensor& x,
                                    const Tensor& target, optim::Optimizer& optimizer, double max_norm, double lr) {
  const Tensor logits = model.forward(x, state);
  const Tensor loss = cross_entropy(logits, target.to(logits.device()));
  autograd::backward(loss);
  const Tensor norm = optim::clip_grad_norm_tensor(optimizer.parameters(), max_norm);
  const std::vector<double> v = read_scalars({loss, norm});
  if (std::isfinite(v[0]) && std::isfinite(v[1])) optimizer.step(lr);
  optimizer.zero_grad();
  for (Tensor& s : state) s = s.detach();
  return {v[0], v[1]};
}

// A small char-LM config exercising every op of a step: embedding, dropout, layer norm, the SRU with
// rescale (scale_x read by the kernel), the output layer, cross-entropy.
inline config::ModelConfig small_charlm_config(const std::string& type) {
  config::ModelConfig cfg;
  cfg.type = type;
  cfg.embedding_size = 16;
  cfg.hidden_size = 16;
  cfg.num_layers = 2;
  cfg.dropout = 0.2;
  cfg.embedding_dropout = 0.1;
  cfg.output_dropout = 0.1;
  cfg.highway_bias = -1.0;
  cfg.rescale = true;
  cfg.layer_norm = true;
  return cfg;
}

// Random bytes (L, B) and their next-byte targets (L*B), on the CPU.
inline std::pair<Tensor, Tensor> random_byte_batch(int64_t L, int64_t B, uint64_t seed) {
  Generator gen(seed);
  const Tensor u = Tensor::uniform({L + 1, B}, 0, 256, DType::F64, gen);
  std::vector<int64_t> bytes(static_cast<size_t>((L + 1) * B));
  const double* p = u.data<double>();
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<int64_t>(p[i]);
  const std::vector<int64_t> x(bytes.begin(), bytes.begin() + L * B), y(bytes.begin() + B, bytes.end());
  return {Tensor::from_vector(x, {L, B}), Tensor::from_vector(y, {L * B})};
}

}  // namespace sru::testing
