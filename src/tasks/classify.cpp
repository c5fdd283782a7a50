// Sentence classification: data splits, tokenisation, embeddings, bucketed batches, accuracy.
#include "tasks/classify.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <ostream>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "autograd/node.h"
#include "data/line_reader.h"
#include "data/word_vectors.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/shape_ops.h"
#include "ops/softmax.h"
#include "tasks/batching.h"

namespace sru::tasks {

namespace {

std::vector<data::LabeledSentence> pick(const std::vector<data::LabeledSentence>& all, const std::vector<int64_t>& idx) {
  std::vector<data::LabeledSentence> out;
  out.reserve(idx.size());
  for (int64_t i : idx) out.push_back(all[i]);
  return out;
}

// (L, B) ids, zero-padded after each sentence, with the sentences' lengths; L is at least min_length
// (a data-parallel rank pads its rows as the whole batch is padded).
Tensor pad_batch(const std::vector<std::vector<int64_t>>& ids, const std::vector<int64_t>& batch,
                 std::vector<int64_t>& lengths, int64_t min_length = 0) {
  const int64_t B = static_cast<int64_t>(batch.size());
  int64_t L = min_length;
  lengths.clear();
  for (int64_t i : batch) {
    lengths.push_back(static_cast<int64_t>(ids[i].size()));
    L = std::max(L, lengths.back());
  }
  Tensor x = Tensor::zeros({L, B}, DType::I64);
  int64_t* p = x.data<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < lengths[b]; ++t) p[t * B + b] = ids[batch[b]][t];
  return x;
}

// The reference classifier's training batches: the examples in one seeded order, cut into consecutive
// batches of `size` once; every epoch sees the same batches in the same order.
std::vector<std::vector<int64_t>> fixed_batches(int64_t n, int64_t size, uint64_t seed) {
  const std::vector<int64_t> order = data::shuffled_indices(n, seed);
  std::vector<std::vector<int64_t>> batches;
  for (int64_t i = 0; i < n; i += size) batches.emplace_back(order.begin() + i, order.begin() + std::min(n, i + size));
  return batches;
}

// The highest-scoring class of row b of logits (B, C).
int64_t argmax_row(const Tensor& logits, int64_t b) {
  const int64_t C = logits.size(1);
  const float* p = logits.data<float>() + b * C;
  return std::max_element(p, p + C) - p;
}

}  // namespace

std::vector<data::LabeledSentence> read_sentences(const std::string& path, const std::string& key) {
  SRU_CHECK(std::filesystem::is_regular_file(path), "cannot open data file '", path, "' (", key, ")");
  data::LabeledFile f = data::read_labeled_file(path);
  if (!f.lines_without_words.empty()) {
    std::string lines;
    for (size_t i = 0; i < f.lines_without_words.size() && i < 10; ++i)
      lines += (i ? ", " : "") + std::to_string(f.lines_without_words[i]);
    spdlog::warn("{}: skipped {} line(s) that hold a label but no words (line {}{})", path,
                 f.lines_without_words.size(), lines, f.lines_without_words.size() > 10 ? ", ..." : "");
  }
  return std::move(f.sentences);
}

// ---- model ----

Classifier::Classifier(const config::Config& cfg, int64_t vocab_size, int64_t num_classes, Generator& gen)
    : cfg_(cfg.model), gen_(&gen) {
  embedding_ = register_module("embedding", std::make_shared<nn::Embedding>(vocab_size, cfg.model.embedding_size,
                                                                            data::Vocabulary::kPad, DType::F32, gen));
  rnn_ = register_module("rnn", make_encoder(cfg, cfg.model.embedding_size, gen, vocab_size));
  output_ = register_module("output", std::make_shared<nn::Linear>(rnn_->output_size(), num_classes, true, DType::F32, gen));
}

Tensor Classifier::forward(const Tensor& x, const std::vector<int64_t>& lengths) const {
  const int64_t L = x.size(0), B = x.size(1);
  SRU_CHECK(static_cast<int64_t>(lengths.size()) == B, "classifier: ", lengths.size(), " lengths for a batch of ", B);
  // The mask is left on the CPU: the encoders take it from there (the cuDNN LSTM reads its lengths from
  // it, the SRU moves it to its device once), so no device value is read back.
  return forward(x, padding_mask_of(lengths, L), last_rows_of(lengths, L));
}

Tensor Classifier::padding_mask_of(const std::vector<int64_t>& lengths, int64_t L) const {
  const int64_t B = static_cast<int64_t>(lengths.size());
  if (std::none_of(lengths.begin(), lengths.end(), [L](int64_t n) { return n < L; })) return Tensor();
  Tensor mask = Tensor::zeros({L, B});
  float* m = mask.data<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = lengths[b]; t < L; ++t) m[t * B + b] = 1.0f;
  return mask;
}

Tensor Classifier::last_rows_of(const std::vector<int64_t>& lengths, int64_t L) const {
  // The state after each sentence's last word, gathered by an embedding lookup into the (L*B*D, H)
  // rows of h: forward direction at t = length - 1, backward direction (when bidirectional) at t = 0.
  const int64_t B = static_cast<int64_t>(lengths.size()), D = rnn_->directions();
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < B; ++b) {
    SRU_CHECK(lengths[b] >= 1 && lengths[b] <= L, "classifier: sentence ", b, " has length ", lengths[b]);
    rows.push_back(((lengths[b] - 1) * B + b) * D);
    if (D == 2) rows.push_back(b * D + 1);
  }
  return Tensor::from_vector(rows, {static_cast<int64_t>(rows.size())});
}

Tensor Classifier::forward(const Tensor& x, const Tensor& mask_pad, const Tensor& last_rows) const {
  const int64_t L = x.size(0), B = x.size(1);
  const bool training = is_training();
  const Device device = this->device();  // batches, masks and gather rows may be made on the CPU
  const Tensor ids = x.to(device);
  Tensor e = dropout(embedding_->forward(ids), cfg_.embedding_dropout, training, *gen_, 1);  // (L, B, E): batch dim 1
  nn::EncoderStatePtr state;
  const Tensor h = rnn_->forward_sequence({e, mask_pad, ids}, state);
  const int64_t D = rnn_->directions(), H = h.size(2) / D;
  Tensor last = sru::embedding(reshape(h, {L * B * D, H}), last_rows.to(device));
  last = reshape(last, {B, D * H});
  return output_->forward(dropout(last, cfg_.output_dropout, training, *gen_));
}

// ---- task ----

namespace {

// The training, validation and test sentences: a cross-validation fold of data.path (with a validation
// share of its training part) when there is no data.test_path, else the given files (validation from
// data.valid_path or a share of the training data).
void read_splits(const config::Config& cfg, const ClassifyOptions& d, std::vector<data::LabeledSentence>& train_s,
                 std::vector<data::LabeledSentence>& valid_s, std::vector<data::LabeledSentence>& test_s) {
  std::vector<data::LabeledSentence> all = read_sentences(cfg.data.path, "data.path");
  const uint64_t seed = static_cast<uint64_t>(cfg.train.seed);
  if (d.test_path.empty()) {
    SRU_CHECK(d.valid_path.empty(), "data.valid_path is set but data.test_path is not: cross-validation holds out "
              "data.valid_fraction of each fold's training part instead (clear data.valid_path, or set data.test_path)");
    SRU_CHECK(d.fold >= 0, "data.fold is -1 (all folds): a single run trains one fold; srutrain runs every fold "
              "when it is given the config (set data.fold to choose one)");
    SRU_CHECK(d.fold < d.folds, "data.fold ", d.fold, " is out of range: data.folds is ", d.folds);
    const auto split = data::cross_validation_split(static_cast<int64_t>(all.size()), d.folds, d.fold,
                                                    d.valid_fraction, seed);
    train_s = pick(all, split.train), valid_s = pick(all, split.valid), test_s = pick(all, split.test);
  } else {
    test_s = read_sentences(d.test_path, "data.test_path");
    if (!d.valid_path.empty()) {
      train_s = std::move(all);
      valid_s = read_sentences(d.valid_path, "data.valid_path");
    } else {
      const auto split = data::holdout_split(static_cast<int64_t>(all.size()), d.valid_fraction, seed);
      train_s = pick(all, split.train), valid_s = pick(all, split.valid);
    }
  }
  SRU_CHECK(!valid_s.empty(), "no validation examples: data.valid_fraction is ", d.valid_fraction,
            " of ", train_s.size(), " training sentences (raise it, or set data.valid_path)");
  SRU_CHECK(!train_s.empty(), "no training examples in '", cfg.data.path, "'");
}

}  // namespace


ClassifyTask::ClassifyTask(const config::Config& cfg, Generator& gen, const TaskContext& context)
    : cfg_(cfg),
      options_(cfg.task_as<ClassifyOptions>()),
      comm_(context.comm ? context.comm : &dist::single_process()),
      gen_(&gen) {
  const ClassifyOptions& d = options_;
  const bool load_data = context.load_data;
  const safetensors::File* checkpoint = context.checkpoint;
  std::vector<data::LabeledSentence> train_s, valid_s, test_s;
  if (load_data) read_splits(cfg, d, train_s, valid_s, test_s);

  int64_t num_classes = 0;
  if (checkpoint) {
    vocab_ = data::Vocabulary::deserialize(checkpoint_string(*checkpoint, "task.vocab", cfg.task));
    if (d.tokenizer == "sentencepiece")
      subwords_ = data::SubwordModel::from_serialized(checkpoint_string(*checkpoint, "task.subword_model", cfg.task),
                                                      "the checkpoint");
    const Tensor* out = checkpoint->find("output.weight");
    SRU_CHECK(out && out->dim() == 2, "the checkpoint has no 'output.weight' matrix");
    num_classes = out->size(0);
  } else {
    SRU_CHECK(load_data, "classify: without data a checkpoint must supply the vocabulary");
    if (d.tokenizer == "sentencepiece") {
      if (!d.sentencepiece_model.empty()) {
        subwords_ = data::SubwordModel::load(d.sentencepiece_model);
      } else {
        std::vector<std::string> texts;
        for (const auto& s : train_s) texts.push_back(d.lowercase ? data::ascii_lower(s.text) : s.text);
        subwords_ = data::SubwordModel::train(texts, d.sentencepiece_vocab_size, static_cast<uint64_t>(cfg.train.seed));
      }
    }
    // With vocab_from all, words seen only in validation or test get rows of their own (random, or
    // their pretrained vectors) instead of <unk>, as in the reference classifier; no label is read.
    std::vector<std::vector<std::string>> words;
    for (const auto* split : {&train_s, &valid_s, &test_s})
      if (split == &train_s || d.vocab_from == "all")
        for (const auto& s : *split) words.push_back(tokens(s.text));
    vocab_ = data::Vocabulary::build(words, d.min_count);
    for (const auto* split : {&train_s, &valid_s, &test_s})
      for (const auto& s : *split) num_classes = std::max(num_classes, s.label + 1);
    SRU_CHECK(num_classes >= 2, "'", cfg.data.path, "': every label is ", num_classes - 1, "; classification needs two classes or more");
  }
  if (load_data) {
    train_ = encode(train_s), valid_ = encode(valid_s), test_ = encode(test_s);
    for (const auto* split : {&train_, &valid_, &test_})
      for (int64_t y : split->labels)
        SRU_CHECK(y < num_classes, "label ", y, " in the data, but the model has ", num_classes, " classes");
  }

  model_ = std::make_unique<Classifier>(cfg, vocab_.size(), num_classes, gen);
  if (!checkpoint) init_embeddings(gen);
  if (cfg.model.freeze_embedding) model_->embedding().weight.set_requires_grad(false);
  if (load_data)
    spdlog::info("classify: {} train / {} valid / {} test sentences, {} classes, vocabulary {} ({}){}", train_.size(),
                 valid_.size(), test_.size(), num_classes, vocab_.size(), d.tokenizer,
                 d.test_path.empty() ? fmt::format(", fold {} of {}", d.fold + 1, d.folds) : "");
}

std::vector<std::string> ClassifyTask::tokens(const std::string& text) const {
  if (options_.tokenizer == "clean_str") return data::clean_str_words(text, options_.lowercase);
  if (!subwords_) return data::split_words(text, options_.lowercase);
  return subwords_->pieces(options_.lowercase ? data::ascii_lower(text) : text);
}

EncodedSplit ClassifyTask::encode(const std::vector<data::LabeledSentence>& sentences) const {
  EncodedSplit out;
  for (const auto& s : sentences) {
    std::vector<int64_t> ids;
    for (const std::string& w : tokens(s.text)) ids.push_back(vocab_.id(w));
    if (ids.empty()) ids.push_back(data::Vocabulary::kUnk);  // e.g. a sentence SentencePiece maps to nothing
    out.ids.push_back(std::move(ids));
    out.labels.push_back(s.label);
  }
  return out;
}

void ClassifyTask::init_embeddings(Generator& gen) {
  Tensor& w = model_->embedding().weight;
  const int64_t V = w.size(0), E = w.size(1);
  w.copy_(Tensor::uniform({V, E}, -0.25, 0.25, DType::F32, gen));
  float* p = w.data<float>();
  if (options_.vectors.empty()) {
    if (cfg_.model.freeze_embedding)
      spdlog::info("model.freeze_embedding is set and data.vectors is empty: the embeddings are fixed random vectors");
  } else {
    load_vectors(p, V, E);
  }
  if (options_.normalize_embeddings) normalize_rows(p, V, E);
  std::fill(p, p + E, 0.0f);  // <pad>
}

void ClassifyTask::load_vectors(float* p, int64_t V, int64_t E) {
  SRU_CHECK(std::filesystem::is_regular_file(options_.vectors), "cannot open word vectors '", options_.vectors,
            "' (data.vectors)");
  std::unordered_set<std::string> wanted(vocab_.words().begin() + 2, vocab_.words().end());
  const data::WordVectors vectors =
      data::load_word_vectors(options_.vectors, wanted, options_.vectors_format, options_.normalize_vectors);
  SRU_CHECK(vectors.dim == E, "data.vectors '", options_.vectors, "' has ", vectors.dim,
            "-dimensional vectors but model.embedding_size is ", E, " (make them equal)");
  for (int64_t i = 2; i < V; ++i) {
    auto it = vectors.vectors.find(vocab_.words()[i]);
    if (it == vectors.vectors.end()) continue;
    std::copy(it->second.begin(), it->second.end(), p + i * E);
    ++pretrained_words_;
  }
  spdlog::info("vectors {}: {} of {} vocabulary words found ({} rows read); the others start at U(-0.25, 0.25)",
               options_.vectors, pretrained_words_, V - 2, vectors.rows_read);
}

void ClassifyTask::normalize_rows(float* p, int64_t V, int64_t E) {
  for (int64_t i = 0; i < V; ++i) {
    float* row = p + i * E;
    double sum = 0;
    for (int64_t j = 0; j < E; ++j) sum += static_cast<double>(row[j]) * row[j];
    if (sum == 0) continue;
    const double scale = 1.0 / std::sqrt(sum);
    for (int64_t j = 0; j < E; ++j) row[j] = static_cast<float>(row[j] * scale);
  }
}

int64_t ClassifyTask::steps_per_epoch() const {
  return (train_.size() + cfg_.data.batch_size - 1) / cfg_.data.batch_size;
}

void ClassifyTask::start_epoch(int64_t epoch, int64_t) {
  batches_ = options_.batching == "fixed"
                 ? fixed_batches(train_.size(), cfg_.data.batch_size, static_cast<uint64_t>(cfg_.train.seed))
                 : epoch_batches(train_.lengths(), cfg_.data.batch_size, static_cast<uint64_t>(cfg_.train.seed), epoch);
}

ClassifyTask::PaddedBatch ClassifyTask::padded_batch(int64_t index) const {
  SRU_CHECK(index >= 0 && index < static_cast<int64_t>(batches_.size()), "classify: training step ", index,
            " is outside the epoch's ", batches_.size(), " batches");
  const auto& batch = batches_[index];
  PaddedBatch out;
  for (int64_t i : batch) out.words += static_cast<int64_t>(train_.ids[i].size());
  // Data parallel: this rank's examples of the batch, padded as the whole batch is.
  out.part = batch_part(static_cast<int64_t>(batch.size()), *comm_);
  const std::vector<int64_t> rows(batch.begin() + out.part.first, batch.begin() + out.part.first + out.part.count);
  out.ids = pad_batch(train_.ids, rows, out.lengths, padded_length(batch));
  for (int64_t i : rows) out.labels.push_back(train_.labels[i]);
  return out;
}

StepResult ClassifyTask::forward_step(int64_t index) {
  model_->train(true);
  const PaddedBatch b = padded_batch(index);
  const BatchShardScope shard(*gen_, b.part.shard);
  const Tensor logits = model_->forward(b.ids, b.lengths);
  const Tensor labels = Tensor::from_vector(b.labels, {static_cast<int64_t>(b.labels.size())});
  return {training_cross_entropy(logits, labels.to(logits.device()), cfg_.train), b.words, b.part.share,
          static_cast<int64_t>(batches_[index].size())};
}

std::string ClassifyTask::why_not_staged() const {
  if (options_.pad_to_multiple == 0)
    return "data.pad_to_multiple is 0 (every batch padded to its longest sentence: too many batch shapes to capture)";
  return encoder_not_capturable(model_->encoder(), cfg_.model.type, model_->device());
}

std::optional<std::string> ClassifyTask::staged_shape(int64_t index) const {
  if (!why_not_staged().empty() || index < 0 || index >= static_cast<int64_t>(batches_.size())) return std::nullopt;
  const auto& batch = batches_[index];
  return std::to_string(padded_length(batch)) + "x" +
         std::to_string(batch_part(static_cast<int64_t>(batch.size()), *comm_).count);
}

int64_t ClassifyTask::padded_length(const std::vector<int64_t>& batch) const {
  int64_t longest = 0;
  for (int64_t i : batch) longest = std::max<int64_t>(longest, static_cast<int64_t>(train_.ids[i].size()));
  return round_up(longest, options_.pad_to_multiple);
}

StagedStep ClassifyTask::stage_step(int64_t index) {
  const std::optional<std::string> shape = staged_shape(index);
  SRU_CHECK(shape, "classify: training step ", index, " cannot be staged");
  const PaddedBatch b = padded_batch(index);
  const int64_t L = b.ids.size(0), B = b.ids.size(1);
  StagedBatch& s = staged_[*shape];
  // Host-to-device copies through the runtime's staging buffer: queued, no host wait. The mask is
  // always there (zeros for a batch without padding), so that every step of a shape runs one graph.
  const Device device = model_->device();
  const Tensor mask = model_->padding_mask_of(b.lengths, L);
  stage_into(s.ids, b.ids, device);
  stage_into(s.mask_pad, mask.defined() ? mask : Tensor::zeros({L, B}), device);
  stage_into(s.last_rows, model_->last_rows_of(b.lengths, L), device);
  stage_into(s.labels, Tensor::from_vector(b.labels, {B}), device);
  staged_batch_ = &s;
  staged_part_ = b.part;
  staged_examples_ = static_cast<int64_t>(batches_[index].size());
  return {*shape, b.words, staged_examples_};
}

StepResult ClassifyTask::forward_staged() {
  SRU_CHECK(staged_batch_, "classify: forward_staged without a staged step");
  model_->train(true);
  const BatchShardScope shard(*gen_, staged_part_.shard);
  const Tensor logits = model_->forward(staged_batch_->ids, staged_batch_->mask_pad, staged_batch_->last_rows);
  // tokens: the trainer takes each step's from stage_step.
  return {training_cross_entropy(logits, staged_batch_->labels, cfg_.train), 0, staged_part_.share, staged_examples_};
}

void ClassifyTask::eval_batches(const EncodedSplit& split, int64_t max_batches, bool distributed,
                                const std::function<void(const std::vector<int64_t>&, const Tensor&)>& fn) {
  autograd::NoGradGuard no_grad;
  model_->eval();
  int64_t index = -1;
  for (const auto& batch : evaluation_batches(split.lengths(), cfg_.data.eval_batch_size)) {
    if (++index >= max_batches && max_batches > 0) break;
    // Distributed: batch i is rank i % world's, so each batch is what one process would run.
    if (distributed && index % comm_->size() != comm_->rank()) continue;
    std::vector<int64_t> lengths;
    // Float32 on the host whatever the precision (a bf16 run's head answers in bf16).
    fn(batch, model_->forward(pad_batch(split.ids, batch, lengths), lengths).to(Device::cpu()).to(DType::F32));
  }
  model_->train(true);
}

Metrics ClassifyTask::evaluate_encoded(const EncodedSplit& split, int64_t max_batches, std::vector<int64_t>* predicted,
                                       bool distributed) {
  double loss = 0;
  int64_t correct = 0, seen = 0;
  if (predicted) predicted->assign(split.labels.size(), -1);
  eval_batches(split, max_batches, distributed, [&](const std::vector<int64_t>& batch, const Tensor& logits) {
    std::vector<int64_t> labels;
    for (int64_t i : batch) labels.push_back(split.labels[i]);
    loss += cross_entropy(logits, Tensor::from_vector(labels, {static_cast<int64_t>(labels.size())}), -100,
                          Reduction::Sum).item<double>();
    for (size_t b = 0; b < batch.size(); ++b) {
      const int64_t label = argmax_row(logits, static_cast<int64_t>(b));
      correct += label == labels[b];
      if (predicted) (*predicted)[batch[b]] = label;
    }
    seen += static_cast<int64_t>(batch.size());
  });
  if (distributed) {
    std::vector<double> sums = {loss, static_cast<double>(correct), static_cast<double>(seen)};
    comm_->all_reduce_sum(sums, "evaluation");
    loss = sums[0];
    correct = static_cast<int64_t>(sums[1]);
    seen = static_cast<int64_t>(sums[2]);
  }
  return {{"accuracy", seen ? static_cast<double>(correct) / seen : 0.0},
          {"loss", seen ? loss / seen : 0.0},
          {"examples", static_cast<double>(seen)}};
}

Metrics ClassifyTask::evaluate(const std::string& split, int64_t max_batches) {
  check_split(split);
  return evaluate_encoded(split == "valid" ? valid_ : split == "test" ? test_ : train_, max_batches, nullptr, true);
}

EncodedSplit ClassifyTask::encode_file(const std::string& path) const {
  EncodedSplit split = encode(read_sentences(path, "--text"));
  for (int64_t y : split.labels)
    SRU_CHECK(y < model_->num_classes(), "'", path, "' has label ", y, " but the model has ", model_->num_classes(),
              " classes");
  return split;
}

Metrics ClassifyTask::evaluate_file(const std::string& path, int64_t max_batches, int64_t) {
  return evaluate_encoded(encode_file(path), max_batches);
}

Metrics ClassifyTask::evaluate_with_predictions(const std::string& split, const std::string& file, std::ostream& out) {
  if (file.empty()) check_split(split);
  const EncodedSplit data = !file.empty() ? encode_file(file) : split == "valid" ? valid_ : split == "test" ? test_ : train_;
  std::vector<int64_t> predicted;
  const Metrics m = evaluate_encoded(data, 0, &predicted);
  for (int64_t label : predicted) out << label << "\n";  // one class a line, in the split's order
  return m;
}

std::vector<int64_t> ClassifyTask::predict(const std::vector<std::string>& sentences) {
  std::vector<data::LabeledSentence> unlabeled;
  for (const auto& s : sentences) unlabeled.push_back({0, s, 0});
  const EncodedSplit split = encode(unlabeled);
  std::vector<int64_t> out(sentences.size());
  eval_batches(split, 0, false, [&](const std::vector<int64_t>& batch, const Tensor& logits) {
    for (size_t b = 0; b < batch.size(); ++b) out[batch[b]] = argmax_row(logits, static_cast<int64_t>(b));
  });
  return out;
}

void ClassifyTask::predict_file(const std::string& path, std::ostream& out) {
  SRU_CHECK(std::filesystem::is_regular_file(path), "cannot open '", path, "' (--predict)");
  data::LineReader in(path);
  std::vector<std::string> lines;
  for (std::string line; in.next(line);) lines.push_back(line);
  for (int64_t label : predict(lines)) out << label << "\n";
}

std::string ClassifyTask::vocabulary_name() const {
  return (subwords_ ? "sentencepiece-" : "words-") + std::to_string(vocab_.size()) + " (task.vocab)";
}

nn::NamedTensors ClassifyTask::extra_state() {
  nn::NamedTensors out = {{"task.vocab", string_tensor(vocab_.serialize())}};
  if (subwords_) out.emplace_back("task.subword_model", string_tensor(subwords_->serialized()));
  return out;
}

// ---- registry entry ----

namespace {

std::vector<config::Section> classify_fields(ClassifyOptions& o) {
  using namespace config;
  return {{"data", "", {
      real_field("valid_fraction", &o.valid_fraction, "Share of the training examples held out for validation "
                 "(when data.valid_path is empty)", 0, 0.5),
      string_field("valid_path", &o.valid_path, "Validation file (empty = hold out data.valid_fraction)"),
      string_field("test_path", &o.test_path, "Test file (empty = cross-validation on data.path)"),
      int_field("folds", &o.folds, "Cross-validation folds when there is no test file", 2),
      int_field("fold", &o.fold, "This run's test fold (-1 = run every fold, report mean and std)", -1),
      int_field("run_folds", &o.run_folds, "With data.fold -1, run only the first N folds (0 = all)", 0),
      bool_field("lowercase", &o.lowercase, "Lower-case ASCII letters before building the vocabulary"),
      string_field("tokenizer", &o.tokenizer, "whitespace (the files are tokenised), clean_str (the reference "
                   "classifier's rules: drops characters but letters, digits and ( ) , ! ? ' `, splits clitics) or "
                   "sentencepiece", {"whitespace", "clean_str", "sentencepiece"}),
      string_field("sentencepiece_model", &o.sentencepiece_model,
                   "SentencePiece .model to use (empty = train one on the training split)"),
      int_field("sentencepiece_vocab_size", &o.sentencepiece_vocab_size, "Pieces of a SentencePiece model trained here",
                16),
      int_field("min_count", &o.min_count, "Words seen fewer times in training become <unk>", 1),
      string_field("vocab_from", &o.vocab_from, "Vocabulary from the training split, or from all splits (the "
                   "reference's; unseen test words then get their own random or pretrained rows, not <unk>)",
                   {"train", "all"}),
      string_field("batching", &o.batching, "Training batches: bucketed (similar lengths, reshuffled each epoch) or "
                   "fixed (the reference's: one seeded order cut once, the same batches every epoch)",
                   {"bucketed", "fixed"}),
      int_field("pad_to_multiple", &o.pad_to_multiple, "Pad each training batch to a length that is a multiple of "
                "N (fairseq's --pad-to-multiple; 0 = the batch's longest sentence): fewer batch shapes, so that CUDA "
                "graphs (train.cuda_graphs) replay most steps; the padding is masked", 0),
      string_field("vectors", &o.vectors, "Pretrained word vectors (word2vec .bin, GloVe/fastText text, .gz or .zip); "
                   "empty = random trainable embeddings"),
      string_field("vectors_format", &o.vectors_format, "Format of data.vectors (auto: .bin = word2vec)",
                   {"auto", "text", "word2vec"}),
      bool_field("normalize_vectors", &o.normalize_vectors, "Scale pretrained vectors to unit L2 norm"),
      bool_field("normalize_embeddings", &o.normalize_embeddings, "Scale every embedding row (random ones too) to "
                 "unit L2 norm at initialisation, as the reference classifier does")}}};
}

}  // namespace

TaskSpec classify_task() {
  return {"classify",
          "Sentence classification (MR, SUBJ, CR, MPQA, TREC, SST): `data.path` holds \"LABEL text\" lines, the "
          "training set, or the whole set for k-fold cross-validation when `data.test_path` is empty; metric "
          "`accuracy`.",
          [] { return config::Options::of(ClassifyOptions{}, &classify_fields); },
          [](const config::Config& cfg, Generator& gen, const TaskContext& ctx) -> std::unique_ptr<Task> {
            return std::make_unique<ClassifyTask>(cfg, gen, ctx);
          },
          [](const config::Config& cfg) -> std::optional<CrossValidationPlan> {
            const ClassifyOptions& o = cfg.task_as<ClassifyOptions>();
            if (!o.test_path.empty() || o.fold >= 0) return std::nullopt;
            return CrossValidationPlan{o.folds, o.run_folds > 0 ? std::min(o.run_folds, o.folds) : o.folds, "data.fold"};
          }};
}

}  // namespace sru::tasks
