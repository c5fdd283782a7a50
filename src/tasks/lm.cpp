// Token-stream language modelling: vocabularies, streams, the model, TBPTT training steps,
// evaluation (bits per character or perplexity), sampling, and the charlm / wordlm registry entries.
#include "tasks/lm.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>

#include "autograd/node.h"
#include "core/philox.h"
#include "data/byte_file.h"
#include "data/labeled_text.h"
#include "data/line_reader.h"
#include "nn/embed_sru.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/shape_ops.h"
#include "ops/softmax.h"
#include "search/search.h"
#include "tasks/batching.h"

namespace sru::tasks {

namespace {

constexpr const char* kEos = "<eos>";
constexpr const char* kUnk = "<unk>";

// Splits a line into words on ASCII whitespace.
std::vector<std::string> words_of_line(const std::string& line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    const size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// Rows [start, start + n) of streams [first, first + count) of the contiguous streams of `tokens`
// (each `len` long), as an (n, count) time-major i64 batch.
Tensor time_major(const std::vector<int32_t>& tokens, int64_t len, int64_t start, int64_t n, dist::Rows streams) {
  const int64_t B = streams.count;
  Tensor out = Tensor::empty({n, B}, DType::I64);
  int64_t* o = out.data<int64_t>();
  for (int64_t t = 0; t < n; ++t)
    for (int64_t b = 0; b < B; ++b) o[t * B + b] = tokens[(streams.first + b) * len + start + t];
  return out;
}

// A carried state's checkpoint tensors have the streams at dim 1 (nn::EncoderState::tensors).
constexpr int kStateStreamDim = 1;

// Whether two states' tensors have the same shapes and dtypes (all defined).
bool same_shapes(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].defined() || !b[i].defined() || a[i].shape() != b[i].shape() || a[i].dtype() != b[i].dtype())
      return false;
  return true;
}

}  // namespace

// ---- vocabulary ----

StreamVocabulary StreamVocabulary::bytes() { return StreamVocabulary(); }

StreamVocabulary StreamVocabulary::words_of(const std::string& path, const std::string& key) {
  data::LineReader in(path);
  std::map<std::string, int64_t> counts;
  for (std::string line; in.next(line);) {
    for (std::string& w : words_of_line(line)) ++counts[w];
    ++counts[kEos];
  }
  SRU_CHECK(counts.size() > 1, "'", path, "' (", key, ") holds no words");
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());  // byte order
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  StreamVocabulary v;
  for (const auto& [word, n] : sorted) {
    v.ids_.emplace(word, static_cast<int32_t>(v.words_.size()));
    v.words_.push_back(word);
  }
  return v;
}

StreamVocabulary StreamVocabulary::deserialize(const std::string& text) {
  StreamVocabulary v;
  for (const std::string& word : data::newline_terminated_lines(text, "word list in the checkpoint")) {
    SRU_CHECK(!word.empty() && v.ids_.emplace(word, static_cast<int32_t>(v.words_.size())).second,
              "malformed word list in the checkpoint (empty or repeated word)");
    v.words_.push_back(word);
  }
  return v;
}

std::string StreamVocabulary::serialize() const {
  std::string out;
  for (const std::string& w : words_) out += w + "\n";
  return out;
}

std::string StreamVocabulary::name() const {
  return is_bytes() ? "bytes-256" : "words-" + std::to_string(words_.size()) + " (task.vocab)";
}

int32_t StreamVocabulary::word_id(const std::string& word, const std::string& where) const {
  if (auto it = ids_.find(word); it != ids_.end()) return it->second;
  auto unk = ids_.find(kUnk);
  SRU_CHECK(unk != ids_.end(), where, ": word '", word, "' is not in the vocabulary of the training file, which has no ",
            kUnk, " to stand for it");
  return unk->second;
}

std::vector<int32_t> StreamVocabulary::encode_file(const std::string& path, const std::string& key) const {
  std::vector<int32_t> ids;
  if (is_bytes()) {
    const std::string bytes = data::read_byte_file(path, key);
    ids.reserve(bytes.size());
    for (char c : bytes) ids.push_back(static_cast<unsigned char>(c));
    return ids;
  }
  SRU_CHECK(std::filesystem::is_regular_file(path), "cannot open data file '", path, "' (", key, ")");
  data::LineReader in(path);
  for (std::string line; in.next(line);) {
    const std::string where = path + ":" + std::to_string(in.line_number());
    for (const std::string& w : words_of_line(line)) ids.push_back(word_id(w, where));
    ids.push_back(word_id(kEos, where));
  }
  return ids;
}

std::vector<int32_t> StreamVocabulary::encode_text(const std::string& text) const {
  std::vector<int32_t> ids;
  if (is_bytes()) {
    for (char c : text) ids.push_back(static_cast<unsigned char>(c));
    return ids;
  }
  for (const std::string& w : words_of_line(text)) ids.push_back(word_id(w, "the prompt"));
  return ids;
}

std::string StreamVocabulary::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (is_bytes()) {
      out.push_back(static_cast<char>(id));
    } else if (words_[id] == kEos) {
      out += "\n";
    } else {
      out += (out.empty() || out.back() == '\n' ? "" : " ") + words_[id];
    }
  }
  return out;
}

// ---- model ----

LanguageModel::LanguageModel(const config::Config& cfg, int64_t vocab_size, Generator& gen)
    : cfg_(cfg.model), gen_(&gen) {
  SRU_CHECK(!cfg.model.bidirectional, "model.bidirectional: a language model reads left to right (set it to false)");
  const int64_t E = cfg.model.embedding_size;
  embedding_ = register_module("embedding", std::make_shared<nn::Embedding>(vocab_size, E, -1, DType::F32, gen));
  rnn_ = register_module("rnn", make_encoder(cfg, E, gen, vocab_size));
  output_ = register_module("output",
                            std::make_shared<nn::Linear>(rnn_->output_size(), vocab_size, true, DType::F32, gen));
  if (const double a = cfg.task_as<LMOptions>().init_range; a > 0) {
    for (Tensor w : {embedding_->weight, output_->weight, output_->bias})  // handles alias the parameters
      w.copy_(Tensor::uniform(w.shape(), -a, a, w.dtype(), gen));
  }
  if (cfg.task_as<LMOptions>().tie_weights) {
    SRU_CHECK(E == rnn_->output_size(), "model.tie_weights: the output layer can use the embedding matrix only when "
              "model.embedding_size (", E, ") equals the encoder's output size (", rnn_->output_size(), ")");
    output_->tie_weight(embedding_->weight);
  }
}

Tensor LanguageModel::forward(const Tensor& x, nn::EncoderStatePtr& state) const {
  const bool training = is_training();
  // Batches are made on the CPU; a carried state may come from a checkpoint read on the CPU.
  const Device device = this->device();
  if (state) state = state->on(device);
  const Tensor ids = x.to(device);
  // Time-major: the batch (streams) is dim 1 of the dropout masks.
  Tensor e = dropout(embedding_->forward(ids), cfg_.embedding_dropout, training, *gen_, 1);  // (L, B, E)
  const Tensor h = dropout(rnn_->forward_sequence({e, Tensor(), ids}, state), cfg_.output_dropout, training, *gen_, 1);
  return output_->forward(reshape(h, {-1, h.size(2)}));
}

nn::NamedTensors LanguageModel::super_embed_state(const std::string& type) const {
  const nn::SuperEmbedConversion conv = nn::convert_to_super_embed(*rnn_, type, embedding_->weight);
  nn::NamedTensors out = {{"embedding.weight", conv.input_rows}};
  for (const auto& [name, t] : conv.encoder) out.emplace_back("rnn." + name, t);
  out.emplace_back("output.weight", output_->weight);
  out.emplace_back("output.bias", output_->bias);
  return out;
}

StreamLoss stream_loss(const LanguageModel& model, const std::vector<int32_t>& tokens, int64_t streams, int64_t chunk,
                       int64_t max_chunks, dist::Rows part) {
  autograd::NoGradGuard no_grad;
  StreamLoss result;
  if (part.count < 0) part = {0, streams};
  if (static_cast<int64_t>(tokens.size()) < 2 * streams || part.count == 0) return result;
  const int64_t len = static_cast<int64_t>(tokens.size()) / streams;
  nn::EncoderStatePtr state;
  int64_t chunks = 0;
  for (int64_t start = 0; start + 1 < len; start += chunk) {
    if (max_chunks > 0 && chunks++ >= max_chunks) break;
    const int64_t n = std::min(chunk, len - 1 - start);
    const Tensor logits = model.forward(time_major(tokens, len, start, n, part), state);
    const Tensor target = time_major(tokens, len, start + 1, n, part).view({-1});
    result.nats += cross_entropy(logits, target.to(logits.device()), -100, Reduction::Sum).item<double>();
    result.predictions += target.numel();
  }
  return result;
}

// ---- task ----

LanguageModelTask::LanguageModelTask(const config::Config& cfg, Generator& gen, bool words, const TaskContext& context)
    : cfg_(cfg),
      options_(cfg.task_as<LMOptions>()),
      comm_(context.comm ? context.comm : &dist::single_process()),
      gen_(&gen),
      streams_(dist::share_of(cfg.data.batch_size, comm_->rank(), comm_->size())) {
  if (words)
    vocab_ = context.checkpoint ? StreamVocabulary::deserialize(checkpoint_string(*context.checkpoint, "task.vocab", cfg.task))
                                : StreamVocabulary::words_of(cfg.data.path, "data.path");
  model_ = std::make_unique<LanguageModel>(cfg, vocab_.size(), gen);
  if (!context.load_data) return;
  const int64_t B = cfg.data.batch_size;
  if (words) {
    train_ = vocab_.encode_file(cfg.data.path, "data.path");
    valid_ = vocab_.encode_file(options_.valid_path, "data.valid_path");
    test_ = vocab_.encode_file(options_.test_path, "data.test_path");
  } else {
    std::vector<int32_t> all = vocab_.encode_file(cfg.data.path, "data.path");
    const size_t n = all.size();
    const size_t n_test = static_cast<size_t>(static_cast<double>(n) * options_.test_fraction);
    const size_t n_valid = static_cast<size_t>(static_cast<double>(n) * options_.valid_fraction);
    const size_t n_train = n - n_valid - n_test;
    valid_.assign(all.begin() + n_train, all.begin() + n_train + n_valid);
    test_.assign(all.begin() + n_train + n_valid, all.end());
    all.resize(n_train);
    all.shrink_to_fit();
    train_ = std::move(all);
  }
  SRU_CHECK(static_cast<int64_t>(train_.size()) >= B * 2, "data file '", cfg.data.path, "': its training part (",
            train_.size(), " ", token_name(), ") cannot fill ", B, " streams (data.batch_size)");
  stream_length_ = static_cast<int64_t>(train_.size()) / B;
}

std::vector<MetricSpec> LanguageModelTask::metrics() const {
  if (vocab_.is_bytes()) return {{"bpc", false}, {"loss", false}, {"chars", false, true}};
  return {{"ppl", false, false, 2}, {"loss", false}, {"words", false, true}};
}

Metrics LanguageModelTask::metrics_of(const StreamLoss& r) const {
  const double loss = r.predictions ? r.nats / r.predictions : 0.0;
  if (vocab_.is_bytes())
    return {{"bpc", loss / std::log(2.0)}, {"loss", loss}, {"chars", static_cast<double>(r.predictions)}};
  return {{"ppl", std::exp(loss)}, {"loss", loss}, {"words", static_cast<double>(r.predictions)}};
}

int64_t LanguageModelTask::steps_per_epoch() const { return (stream_length_ - 1 + options_.bptt - 1) / options_.bptt; }

void LanguageModelTask::start_epoch(int64_t, int64_t first_step) {
  if (first_step == 0) reset_carried_state();  // mid-epoch resumes keep the state loaded from the checkpoint
}

StepResult LanguageModelTask::forward_step(int64_t index) {
  model_->train(true);
  const int64_t B = cfg_.data.batch_size, start = index * options_.bptt;
  const int64_t n = std::min(options_.bptt, stream_length_ - 1 - start);
  SRU_CHECK(n > 0, cfg_.task, ": training step ", index, " is past the end of the epoch");
  SRU_CHECK(streams_.count > 0, cfg_.task, ": this rank has none of the ", B, " streams (data.batch_size)");
  // Data parallel: this rank's streams (all of them in a single process), and their dropout masks.
  const BatchShardScope shard(*gen_, batch_part(B, *comm_).shard);
  nn::EncoderStatePtr state = state_;
  const Tensor logits = model_->forward(time_major(train_, stream_length_, start, n, streams_), state);
  const Tensor target = time_major(train_, stream_length_, start + 1, n, streams_).view({-1});
  state_shapes_settled_ = state_ ? state && same_shapes(state_->tensors(), state->tensors()) : !state;
  state_ = state ? state->detached() : nullptr;  // truncated back-propagation: the next step starts here
  return {training_cross_entropy(logits, target.to(logits.device()), cfg_.train), n * B,
          static_cast<double>(streams_.count) / static_cast<double>(B)};
}

std::string LanguageModelTask::why_not_staged() const {
  return encoder_not_capturable(model_->encoder(), cfg_.model.type, model_->device());
}

std::optional<std::string> LanguageModelTask::staged_shape(int64_t index) const {
  return carried_state_stageable() ? planned_shape(index) : std::nullopt;
}

std::optional<std::string> LanguageModelTask::planned_shape(int64_t index) const {
  const int64_t n = std::min(options_.bptt, stream_length_ - 1 - index * options_.bptt);
  if (n != options_.bptt || streams_.count <= 0 || !why_not_staged().empty()) return std::nullopt;
  return "bptt";
}

StagedStep LanguageModelTask::stage_step(int64_t index) {
  SRU_CHECK(staged_shape(index), cfg_.task, ": training step ", index, " cannot be staged");
  const int64_t start = index * options_.bptt, n = options_.bptt;
  stage_carried_state();
  if (!staged_input_.defined()) {
    const Device device = model_->device();
    staged_input_ = Tensor::zeros({n, streams_.count}, DType::I64, device);
    staged_target_ = Tensor::zeros({n * streams_.count}, DType::I64, device);
  }
  // Host-to-device copies through the runtime's staging buffer: queued, no host wait.
  staged_input_.copy_(time_major(train_, stream_length_, start, n, streams_));
  staged_target_.copy_(time_major(train_, stream_length_, start + 1, n, streams_));
  return {"bptt", n * cfg_.data.batch_size};
}

bool LanguageModelTask::carried_state_stageable() const {
  if (state_ && state_ == staged_state_) return true;  // the last step was a staged one
  // Only a state whose shapes a step keeps: not the null state of an epoch's start or a reset (zeros
  // are not the same as no state for an SRU++ memory), nor a memory still growing to its length.
  if (!state_shapes_settled_) return false;
  if (!state_) return !staged_state_;  // a stateless encoder (a causal Transformer in training)
  return !staged_state_ || same_shapes(staged_state_->tensors(), state_->tensors());
}

void LanguageModelTask::stage_carried_state() {
  if (!state_ || state_ == staged_state_) return;  // stateless, or staged already
  const std::vector<Tensor> current = state_->on(model_->device())->tensors();
  if (!staged_state_) {
    std::vector<Tensor> copies;
    for (const Tensor& t : current) copies.push_back(t.clone());
    staged_state_ = model_->state_from(copies);
  } else {
    std::vector<Tensor> staged = staged_state_->tensors();
    for (size_t i = 0; i < staged.size(); ++i) staged[i].copy_(current[i]);
  }
  state_ = staged_state_;
}

StepResult LanguageModelTask::forward_staged() {
  SRU_CHECK(staged_input_.defined() && state_ == staged_state_, cfg_.task, ": forward_staged without a staged step");
  model_->train(true);
  const int64_t B = cfg_.data.batch_size, n = options_.bptt;
  const BatchShardScope shard(*gen_, batch_part(B, *comm_).shard);
  // From a copy of the static state: the backward pass reads the state the step started from, and the
  // static one receives the step's final state below, before backward runs.
  nn::EncoderStatePtr state;
  if (staged_state_) {
    std::vector<Tensor> start;
    for (const Tensor& t : staged_state_->tensors()) start.push_back(t.clone());
    state = model_->state_from(start);
  }
  const Tensor logits = model_->forward(staged_input_, state);
  SRU_CHECK(static_cast<bool>(state) == static_cast<bool>(staged_state_), cfg_.task,
            ": the encoder's carried state appeared or vanished in a staged step");
  if (staged_state_) {
    std::vector<Tensor> staged = staged_state_->tensors();
    const std::vector<Tensor> final_state = state->tensors();
    for (size_t i = 0; i < staged.size(); ++i) staged[i].copy_(final_state[i].detach());
  }
  return {training_cross_entropy(logits, staged_target_, cfg_.train), n * B,
          static_cast<double>(streams_.count) / static_cast<double>(B)};
}

Metrics LanguageModelTask::evaluate(const std::string& split, int64_t max_batches) {
  check_split(split);
  const std::vector<int32_t>& tokens = split == "valid" ? valid_ : split == "test" ? test_ : train_;
  model_->eval();
  // Data parallel: each rank evaluates its share of the streams; the sums are added over the ranks.
  const int64_t E = cfg_.data.eval_batch_size;
  const StreamLoss r = stream_loss(*model_, tokens, E, options_.bptt, max_batches,
                                   dist::share_of(E, comm_->rank(), comm_->size()));
  model_->train(true);
  std::vector<double> sums = {r.nats, static_cast<double>(r.predictions)};
  comm_->all_reduce_sum(sums, "evaluation of " + split);
  return metrics_of({sums[0], static_cast<int64_t>(sums[1])});
}

Metrics LanguageModelTask::evaluate_file(const std::string& path, int64_t max_batches, int64_t chunk) {
  model_->eval();
  const StreamLoss r = stream_loss(*model_, vocab_.encode_file(path, "--text"), 1, chunk > 0 ? chunk : options_.bptt,
                                   max_batches);
  return metrics_of(r);
}

namespace {

// The language model as the search layer sees it: log-probabilities of the next token of each row, the
// encoder state carried from step to step and reordered with the rows.
class LanguageModelScorer : public search::StepScorer {
 public:
  LanguageModelScorer(const LanguageModel& model, nn::EncoderStatePtr state) : model_(model), state_(std::move(state)) {}
  Tensor next_log_probs(const std::vector<int64_t>& last_tokens) override {
    const int64_t N = static_cast<int64_t>(last_tokens.size());
    return search::log_probs_of_logits(model_.forward(Tensor::from_vector(last_tokens, {1, N}), state_));  // (N, V)
  }
  void reorder(const std::vector<int64_t>& rows) override {
    if (state_) state_ = state_->reordered(Tensor::from_vector(rows, {static_cast<int64_t>(rows.size())}));
  }

 private:
  const LanguageModel& model_;
  nn::EncoderStatePtr state_;
};

}  // namespace

nn::EncoderStatePtr LanguageModel::state_from(const std::vector<Tensor>& tensors) const {
  return rnn_->state_from(tensors);
}

std::vector<std::vector<std::string>> LanguageModelTask::generate(const std::string& prompt,
                                                                   const GenerationOptions& options) {
  SRU_CHECK(options.tokens >= 0 && options.batch >= 1, "generate: tokens must be >= 0 and the batch >= 1, got ",
            options.tokens, " and ", options.batch);
  autograd::NoGradGuard no_grad;
  model_->eval();
  std::vector<int32_t> context = vocab_.encode_text(prompt);
  if (context.empty()) context = vocab_.encode_text(vocab_.is_bytes() ? "\n" : kEos);  // start after a line end
  // The prompt but its last token sets the state; the search feeds the last token first.
  const int64_t B = options.batch, P = static_cast<int64_t>(context.size());
  nn::EncoderStatePtr state;
  if (P > 1) {
    std::vector<int64_t> ids;
    for (int64_t t = 0; t + 1 < P; ++t) ids.insert(ids.end(), B, context[t]);
    model_->forward(Tensor::from_vector(ids, {P - 1, B}), state);
  }
  LanguageModelScorer scorer(*model_, std::move(state));
  search::Request request;
  request.first_tokens.assign(B, context.back());
  request.max_len_b = options.tokens;  // no end token: exactly `tokens` of them
  std::vector<search::NBest> found;
  switch (options.strategy) {
    case GenerationOptions::Strategy::Sample: found = search::sample(scorer, request, options.sampling); break;
    case GenerationOptions::Strategy::Greedy: found = search::greedy(scorer, request); break;
    case GenerationOptions::Strategy::Beam: found = search::beam(scorer, request, options.beam); break;
  }
  std::vector<std::vector<std::string>> out;
  for (const search::NBest& nbest : found) {
    out.emplace_back();
    for (const search::Hypothesis& h : nbest) out.back().push_back(vocab_.decode(std::vector<int32_t>(h.tokens.begin(), h.tokens.end())));
  }
  return out;
}

ConvertedModel LanguageModelTask::convert_model(const std::string& form) {
  SRU_CHECK(form == "super-embed", "--convert: unknown form '", form, "' (available: super-embed)");
  model_->eval();
  ConvertedModel out;
  out.state = model_->super_embed_state(cfg_.model.type);
  config::Config source = cfg_;
  out.config = config::parse_config(source.to_yaml(), "the converted config",
                                    {"model.type=super-embed-sru",
                                     "model.embedding_size=" + std::to_string(cfg_.model.hidden_size),
                                     "model.tie_weights=false"},
                                    config::Origin::Stored);
  return out;
}

nn::NamedTensors LanguageModelTask::extra_state() {
  nn::NamedTensors out;
  // Every stream's state: data-parallel ranks each hold theirs, gathered in stream order.
  const std::vector<Tensor> carried = state_ ? state_->tensors() : std::vector<Tensor>();
  for (size_t i = 0; i < carried.size(); ++i) {
    const Tensor& t = carried[i];
    SRU_CHECK(t.dim() > kStateStreamDim && t.size(kStateStreamDim) == streams_.count, cfg_.task,
              ": carried state tensor ", i, " is ", shape_str(t.shape()), ", expected the ", streams_.count,
              " streams at dim ", kStateStreamDim);
    const Tensor whole = comm_->size() == 1 ? t : dist::all_gather(*comm_, t.to(Device::cpu()), kStateStreamDim,
                                                                   "the carried state");
    out.emplace_back("task.state." + std::to_string(i), whole);
  }
  if (!vocab_.is_bytes()) out.emplace_back("task.vocab", string_tensor(vocab_.serialize()));
  return out;
}

void LanguageModelTask::load_extra_state(const safetensors::File& file) {
  std::vector<Tensor> carried;
  const int64_t B = cfg_.data.batch_size;
  for (size_t i = 0;; ++i) {
    const Tensor* t = file.find("task.state." + std::to_string(i));
    if (!t) break;
    SRU_CHECK(t->dim() > kStateStreamDim && t->size(kStateStreamDim) == B, "the checkpoint's carried state ",
              "task.state.", i, " is ", shape_str(t->shape()), ": it holds ", t->dim() > kStateStreamDim ? t->size(1) : 0,
              " streams, but data.batch_size is ", B, " (resume with the batch size it was trained with)");
    // This rank's streams of the whole state (any world size can resume any other's checkpoint).
    carried.push_back(slice(*t, kStateStreamDim, streams_.first, streams_.first + streams_.count).clone());
  }
  state_ = model_->state_from(carried);
  state_shapes_settled_ = false;
}

// ---- registry entries ----

namespace {

config::Section bptt_and_tying(LMOptions& o, std::vector<config::Field> data_fields) {
  data_fields.insert(data_fields.begin(),
                     config::int_field("bptt", &o.bptt, "Unroll length for truncated back-propagation", 1));
  return {"data", "", std::move(data_fields)};
}

config::Section tying(LMOptions& o) {
  return {"model", "", {config::bool_field("tie_weights", &o.tie_weights,
                                           "The output layer uses the embedding matrix (needs embedding_size equal to "
                                           "the encoder's output size)"),
                        config::real_field("init_range", &o.init_range,
                                           "Initialise the embedding and the output layer U(-a, a) (Zaremba et al. "
                                           "2014: 0.1); 0 = N(0, 1) and U(+-1/sqrt(H)). The encoder keeps its own", 0)}};
}

std::vector<config::Section> charlm_fields(LMOptions& o) {
  using namespace config;
  return {bptt_and_tying(o, {real_field("valid_fraction", &o.valid_fraction,
                                        "Share of the file held out for validation (after the training part)", 0, 0.5),
                             real_field("test_fraction", &o.test_fraction, "Share of the file (its end) used for testing",
                                        0, 0.5)}),
          tying(o)};
}

std::vector<config::Section> wordlm_fields(LMOptions& o) {
  using namespace config;
  return {bptt_and_tying(o, {string_field("valid_path", &o.valid_path, "Validation text (one sentence a line)", {}, true),
                             string_field("test_path", &o.test_path, "Test text (one sentence a line)", {}, true)}),
          tying(o)};
}

}  // namespace

TaskSpec charlm_task() {
  return {"charlm",
          "Character (byte) language modelling, as the paper's enwik8 experiment: `data.path` is any byte file (or a "
          ".zip holding one), split train / valid / test by proportion; metric bits per character (`bpc`).",
          [] { return config::Options::of(LMOptions{}, &charlm_fields); },
          [](const config::Config& cfg, Generator& gen, const TaskContext& ctx) -> std::unique_ptr<Task> {
            return std::make_unique<LanguageModelTask>(cfg, gen, /*words=*/false, ctx);
          },
          {}};
}

TaskSpec wordlm_task() {
  return {"wordlm",
          "Word language modelling (the Penn Treebank as Mikolov's ptb.{train,valid,test}.txt): `data.path` is the "
          "training text, one sentence a line, whose words make the vocabulary; metric perplexity (`ppl`).",
          [] { return config::Options::of(LMOptions{}, &wordlm_fields); },
          [](const config::Config& cfg, Generator& gen, const TaskContext& ctx) -> std::unique_ptr<Task> {
            return std::make_unique<LanguageModelTask>(cfg, gen, /*words=*/true, ctx);
          },
          {}};
}

}  // namespace sru::tasks
