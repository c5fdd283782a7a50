// Character language modelling: data streams, model, TBPTT training steps, BPC evaluation, sampling.
#include "tasks/charlm.h"

#include <cmath>

#include "autograd/node.h"
#include "data/byte_file.h"
#include "core/philox.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/shape_ops.h"
#include "ops/softmax.h"

namespace sru::tasks {

namespace {

// bytes -> (streams, len) i64, dropping the tail that does not fill every stream.
Tensor make_streams(const std::string& bytes, int64_t streams) {
  const int64_t len = static_cast<int64_t>(bytes.size()) / streams;
  Tensor t = Tensor::empty({streams, len}, DType::I64);
  int64_t* p = t.data<int64_t>();
  for (int64_t s = 0; s < streams; ++s)
    for (int64_t i = 0; i < len; ++i) p[s * len + i] = static_cast<unsigned char>(bytes[s * len + i]);
  return t;
}

// Columns [start, start + n) of (B, len) streams as an (n, B) time-major batch.
Tensor time_major(const Tensor& streams, int64_t start, int64_t n) {
  const int64_t B = streams.size(0), len = streams.size(1);
  Tensor out = Tensor::empty({n, B}, DType::I64);
  const int64_t* s = streams.data<int64_t>();
  int64_t* o = out.data<int64_t>();
  for (int64_t t = 0; t < n; ++t)
    for (int64_t b = 0; b < B; ++b) o[t * B + b] = s[b * len + start + t];
  return out;
}

std::vector<Tensor> detached(const std::vector<Tensor>& state) {
  std::vector<Tensor> out;
  for (const Tensor& t : state) out.push_back(t.detach());
  return out;
}

}  // namespace

std::string read_bytes(const std::string& path) { return data::read_byte_file(path); }

CharLM::CharLM(const config::ModelConfig& cfg, Generator& gen) : cfg_(cfg), gen_(&gen) {
  embedding_ = register_module("embedding", std::make_shared<nn::Embedding>(256, cfg.embedding_size, -1, DType::F32, gen));
  rnn_ = RecurrentLayers::make(cfg, cfg.embedding_size, gen);
  register_module("rnn", rnn_.module());
  output_ = register_module("output", std::make_shared<nn::Linear>(cfg.hidden_size, 256, true, DType::F32, gen));
}

Tensor CharLM::forward(const Tensor& x, std::vector<Tensor>& state) const {
  const bool training = is_training();
  // Batches are made on the CPU; a carried state may come from a checkpoint read on the CPU.
  const Device device = this->device();
  for (Tensor& s : state) s = s.to(device);
  Tensor e = dropout(embedding_->forward(x.to(device)), cfg_.embedding_dropout, training, *gen_);  // (L, B, E)
  const Tensor h = dropout(rnn_.forward(e, state), cfg_.output_dropout, training, *gen_);
  return output_->forward(reshape(h, {-1, h.size(2)}));
}

double StreamLoss::bits_per_char() const { return predictions > 0 ? nats / predictions / std::log(2.0) : 0.0; }

StreamLoss stream_loss(const CharLM& model, const std::string& bytes, int64_t streams, int64_t chunk,
                       int64_t max_chunks) {
  autograd::NoGradGuard no_grad;
  StreamLoss result;
  if (static_cast<int64_t>(bytes.size()) < 2 * streams) return result;
  const Tensor data = make_streams(bytes, streams);
  const int64_t len = data.size(1);
  std::vector<Tensor> state;
  int64_t chunks = 0;
  for (int64_t start = 0; start + 1 < len; start += chunk) {
    if (max_chunks > 0 && chunks++ >= max_chunks) break;
    const int64_t n = std::min(chunk, len - 1 - start);
    const Tensor logits = model.forward(time_major(data, start, n), state);
    const Tensor target = time_major(data, start + 1, n).view({-1});
    result.nats += cross_entropy(logits, target.to(logits.device()), -100, Reduction::Sum).item<double>();
    result.predictions += target.numel();
  }
  return result;
}

std::string generate(const CharLM& model, const std::string& prompt, int64_t n, double temperature, Generator& gen) {
  SRU_CHECK(temperature > 0, "generate: temperature must be > 0, got ", temperature);
  autograd::NoGradGuard no_grad;
  std::vector<Tensor> state;
  const std::string context = prompt.empty() ? std::string("\n") : prompt;
  Tensor x = Tensor::empty({static_cast<int64_t>(context.size()), 1}, DType::I64);
  for (size_t i = 0; i < context.size(); ++i) x.data<int64_t>()[i] = static_cast<unsigned char>(context[i]);
  Tensor logits = model.forward(x, state);
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    const Tensor last = slice(logits, 0, logits.size(0) - 1, logits.size(0));  // (1, 256)
    const auto p = softmax(last * (1.0 / temperature)).to_vector<double>();
    const double u = philox::u32_to_unit_float(philox::random_u32(gen.seed(), gen.reserve(1), 0));
    int64_t k = 0;
    for (double acc = p[0]; acc < u && k < 255; acc += p[++k]) {
    }
    out.push_back(static_cast<char>(k));
    Tensor next = Tensor::full({1, 1}, static_cast<double>(k), DType::I64);
    logits = model.forward(next, state);
  }
  return out;
}

CharLMTask::CharLMTask(const config::Config& cfg, Generator& gen, bool load_data)
    : cfg_(cfg), model_(std::make_unique<CharLM>(cfg.model, gen)) {
  if (!load_data) return;
  const std::string bytes = read_bytes(cfg.data.path);
  const size_t n = bytes.size();
  const size_t n_test = static_cast<size_t>(static_cast<double>(n) * cfg.data.test_fraction);
  const size_t n_valid = static_cast<size_t>(static_cast<double>(n) * cfg.data.valid_fraction);
  const size_t n_train = n - n_valid - n_test;
  train_ = bytes.substr(0, n_train);
  valid_ = bytes.substr(n_train, n_valid);
  test_ = bytes.substr(n_train + n_valid);
  const int64_t B = cfg.data.batch_size;
  SRU_CHECK(static_cast<int64_t>(train_.size()) >= B * 2, "data file '", cfg.data.path, "' has ", n,
            " bytes: its training part (", train_.size(), " bytes) cannot fill ", B, " streams (data.batch_size)");
  train_streams_ = make_streams(train_, B);
}

int64_t CharLMTask::steps_per_epoch() const {
  const int64_t len = train_streams_.size(1);
  return (len - 1 + cfg_.data.bptt - 1) / cfg_.data.bptt;
}

void CharLMTask::start_epoch(int64_t, int64_t first_step) {
  if (first_step == 0) state_.clear();  // mid-epoch resumes keep the state loaded from the checkpoint
}

StepResult CharLMTask::forward_step(int64_t index) {
  model_->train(true);
  const int64_t len = train_streams_.size(1), start = index * cfg_.data.bptt;
  const int64_t n = std::min(cfg_.data.bptt, len - 1 - start);
  SRU_CHECK(n > 0, "charlm: training step ", index, " is past the end of the epoch");
  std::vector<Tensor> state = state_;
  const Tensor logits = model_->forward(time_major(train_streams_, start, n), state);
  const Tensor target = time_major(train_streams_, start + 1, n).view({-1});
  state_ = detached(state);  // truncated back-propagation: the next step starts here, without history
  return {cross_entropy(logits, target.to(logits.device())), target.numel()};
}

Metrics CharLMTask::evaluate(const std::string& split, int64_t max_batches) {
  const std::string& bytes = split == "valid" ? valid_ : split == "test" ? test_ : train_;
  model_->eval();
  const StreamLoss r = stream_loss(*model_, bytes, cfg_.data.eval_batch_size, cfg_.data.bptt, max_batches);
  model_->train(true);
  return {{"bpc", r.bits_per_char()}, {"loss", r.predictions ? r.nats / r.predictions : 0.0},
          {"chars", static_cast<double>(r.predictions)}};
}

nn::NamedTensors CharLMTask::extra_state() {
  nn::NamedTensors out;
  for (size_t i = 0; i < state_.size(); ++i) out.emplace_back("task.state." + std::to_string(i), state_[i]);
  return out;
}

void CharLMTask::load_extra_state(const safetensors::File& file) {
  state_.clear();
  for (size_t i = 0;; ++i) {
    const Tensor* t = file.find("task.state." + std::to_string(i));
    if (!t) break;
    state_.push_back(t->clone());
  }
}

}  // namespace sru::tasks
