// A small char-LM trained with srutrain's own step (train::TrainingStep), for the host-wait tests on
// the CPU and on a GPU: forward, cross-entropy, backward, gradient clipping on the device, the loss and
// norm read together (the step's one host wait), the optimiser update.
#pragma once

#include <fstream>
#include <memory>
#include <string>

#include "config/config.h"
#include "nn/sru.h"
#include "tasks/lm.h"
#include "tasks/registry.h"
#include "testing.h"
#include "train/step.h"
#include "train/trainer.h"

namespace sru::testing {

class CharLmSteps {
 public:
  // Every op of a step: embedding, dropout, layer norm, the SRU with rescale (scale_x read by the
  // kernel) or the LSTM, the output layer, cross-entropy; batches of 4 streams x 12 bytes.
  // cuda_graphs: train.cuda_graphs (on a GPU, "auto" captures the step of the repeating shape).
  CharLmSteps(const std::string& type, Device device, const std::string& cuda_graphs = "auto") {
    const std::string path = sru::testing::tmp_dir() + "host_waits_" + type + ".bin";
    {
      Generator gen(7);
      std::ofstream out(path, std::ios::binary);
      for (double u : Tensor::uniform({4000}, 0, 256, DType::F64, gen).to_vector<double>()) out.put(static_cast<char>(static_cast<unsigned char>(u)));
    }
    cfg_ = config::Config::defaults("charlm", type);
    cfg_.data.path = path;
    cfg_.data.batch_size = 4;
    cfg_.task_as<tasks::LMOptions>().bptt = 12;
    cfg_.model.embedding_size = cfg_.model.hidden_size = 16;
    cfg_.model.dropout = 0.2;
    cfg_.model.embedding_dropout = cfg_.model.output_dropout = 0.1;
    if (type == "sru") {
      auto& sru = cfg_.encoder_options.as<nn::SRUOptions>();
      sru.highway_bias = -1.0;
      sru.rescale = sru.layer_norm = true;
    }
    cfg_.train.clip_grad_norm = 0.5;
    cfg_.train.cuda_graphs = cuda_graphs;
    task_ = tasks::make_task(cfg_, gen_);
    task_->model().to(device);
    optimizer_ = train::make_optimizer(cfg_.train, task_->model());
    step_ = std::make_unique<train::TrainingStep>(*task_, *optimizer_, cfg_.train,
                                                  train::schedule_options(cfg_.train, 16, 100));
    task_->start_epoch(0, 0);
  }
  train::StepOutcome next() {
    const int64_t index = taken_ % task_->steps_per_epoch();
    return step_->run(index, ++taken_, 0);
  }
  const train::TrainingStep& step() const { return *step_; }

 private:
  config::Config cfg_;
  Generator gen_{11};
  std::unique_ptr<tasks::Task> task_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<train::TrainingStep> step_;
  int64_t taken_ = 0;
};

}  // namespace sru::testing
