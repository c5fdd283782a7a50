// SQuAD v1.1 with the Document Reader: vocabulary and embeddings, encoding paragraphs and questions,
// batches and token features, training steps, span answers, the official metric, srueval's files.
#include "tasks/squad.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <ostream>
#include <unordered_set>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "autograd/node.h"
#include "data/squad_metric.h"
#include "data/word_vectors.h"
#include "ops/elementwise.h"
#include "ops/softmax.h"
#include "tasks/batching.h"

namespace sru::tasks {

// ---- batches ----

std::vector<int64_t> ReaderSplit::doc_lengths() const {
  std::vector<int64_t> out;
  for (const Example& e : examples) out.push_back(static_cast<int64_t>(contexts[e.paragraph].size()));
  return out;
}

ReaderBatch ReaderSplit::batch(const std::vector<int64_t>& batch, int64_t min_doc, int64_t min_question) const {
  const int64_t B = static_cast<int64_t>(batch.size()), F = DocumentReader::kFeatures;
  int64_t Ld = std::max<int64_t>(1, min_doc), Lq = std::max<int64_t>(1, min_question);
  for (int64_t i : batch) {
    Ld = std::max<int64_t>(Ld, static_cast<int64_t>(contexts[examples[i].paragraph].size()));
    Lq = std::max<int64_t>(Lq, static_cast<int64_t>(examples[i].question_ids.size()));
  }
  ReaderBatch r;
  r.doc = Tensor::zeros({Ld, B}, DType::I64);
  r.doc_features = Tensor::zeros({Ld, B, F});
  r.doc_mask = Tensor::ones({Ld, B});
  r.doc_mask_bf = Tensor::ones({B, Ld});
  r.question = Tensor::zeros({Lq, B}, DType::I64);
  r.question_mask = Tensor::ones({Lq, B});
  r.question_mask_bf = Tensor::ones({B, Lq});
  int64_t* doc = r.doc.data<int64_t>();
  float* features = r.doc_features.data<float>();
  float *dm = r.doc_mask.data<float>(), *dmb = r.doc_mask_bf.data<float>();
  int64_t* question = r.question.data<int64_t>();
  float *qm = r.question_mask.data<float>(), *qmb = r.question_mask_bf.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    const Example& e = examples[batch[b]];
    const auto& tokens = contexts[e.paragraph];
    for (size_t t = 0; t < tokens.size(); ++t) {
      doc[t * B + b] = context_ids[e.paragraph][t];
      dm[t * B + b] = dmb[b * Ld + t] = 0.0f;
      float* f = features + (t * B + b) * F;
      for (const data::Token& q : e.question) {
        f[0] = f[0] > 0 || q.text == tokens[t].text ? 1.0f : 0.0f;
        f[1] = f[1] > 0 || q.lower == tokens[t].lower ? 1.0f : 0.0f;
      }
      f[2] = term_frequency[e.paragraph][t];
    }
    for (size_t t = 0; t < e.question_ids.size(); ++t) {
      question[t * B + b] = e.question_ids[t];
      qm[t * B + b] = qmb[b * Lq + t] = 0.0f;
    }
  }
  return r;
}

// ---- task ----

namespace {

// The examples of `dataset` whose ids are in `predictions`, for scoring part of a file.
data::SquadDataset only_predicted(const data::SquadDataset& dataset, const data::SquadPredictions& predictions) {
  data::SquadDataset out = dataset;
  out.questions = 0;
  for (data::SquadParagraph& p : out.paragraphs) {
    std::erase_if(p.questions, [&](const data::SquadQuestion& q) { return !predictions.count(q.id); });
    out.questions += static_cast<int64_t>(p.questions.size());
  }
  return out;
}

}  // namespace

SquadTask::SquadTask(const config::Config& cfg, Generator& gen, const TaskContext& context)
    : cfg_(cfg),
      options_(cfg.task_as<SquadOptions>()),
      comm_(context.comm ? context.comm : &dist::single_process()),
      gen_(&gen) {
  if (context.load_data) {
    train_data_ = data::read_squad(cfg.data.path);
    valid_data_ = data::read_squad(options_.valid_path);
    for (const auto* d : {&train_data_, &valid_data_})
      if (d->version != "1.1")
        spdlog::warn("{}: version '{}', expected '1.1' (evaluated as v1.1)", d->path, d->version);
  }
  data::WordVectors vectors;
  if (context.checkpoint) {
    vocab_ = data::Vocabulary::deserialize(checkpoint_string(*context.checkpoint, "task.vocab", cfg.task));
  } else {
    SRU_CHECK(context.load_data, "squad: without data a checkpoint must supply the vocabulary");
    vectors = build_vocabulary();
  }
  model_ = std::make_unique<DocumentReader>(cfg, vocab_.size(), gen);
  Tensor& embedding = model_->embedding().weight;
  if (cfg.model.freeze_embedding) {
    embedding.set_requires_grad(false);
    if (options_.vectors.empty())
      spdlog::warn("model.freeze_embedding is set but data.vectors is empty: the embeddings stay random");
  }
  if (!context.checkpoint && !options_.vectors.empty()) {
    // Rows of words the vectors cover start at their vectors; the others keep N(0, 1) (DrQA).
    const int64_t E = embedding.size(1);
    float* w = embedding.data<float>();
    int64_t found = 0;
    for (int64_t i = 2; i < vocab_.size(); ++i)
      if (auto it = vectors.vectors.find(vocab_.words()[i]); it != vectors.vectors.end()) {
        std::copy(it->second.begin(), it->second.end(), w + i * E);
        ++found;
      }
    spdlog::info("vectors {}: {} of {} vocabulary words ({} rows read)", options_.vectors, found, vocab_.size() - 2,
                 vectors.rows_read);
  }
  if (!context.load_data) return;
  if (!options_.vectors.empty() && !cfg.model.freeze_embedding && options_.tune_partial > 0) {
    // DrQA's partial fine-tuning: <unk> and the tune_partial most frequent training-question words are
    // trained; every other row keeps its vector. The values held are the current ones: the vectors, or
    // on resume the checkpoint's (unchanged) rows.
    std::vector<int64_t> question_counts(vocab_.size(), 0);
    for (const data::SquadParagraph& p : train_data_.paragraphs)
      for (const data::SquadQuestion& q : p.questions)
        for (const data::Token& t : data::tokenize(q.question)) ++question_counts[vocab_.id(word(t))];
    std::vector<int64_t> order;
    for (int64_t i = 2; i < vocab_.size(); ++i) order.push_back(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return question_counts[a] > question_counts[b]; });
    std::vector<bool> fixed(vocab_.size(), true);
    fixed[data::Vocabulary::kPad] = fixed[data::Vocabulary::kUnk] = false;
    for (size_t k = 0; k < order.size() && static_cast<int64_t>(k) < options_.tune_partial; ++k)
      fixed[order[k]] = false;
    const Tensor* stored = context.checkpoint ? context.checkpoint->find("embedding.weight") : nullptr;
    model_->fix_embedding_rows(fixed, stored ? *stored : embedding);
  }
  train_ = encode(train_data_);
  valid_ = encode(valid_data_);
  for (size_t i = 0; i < train_.examples.size(); ++i)
    if (train_.examples[i].start >= 0) trainable_.push_back(static_cast<int64_t>(i));
  const auto spans = data::map_answer_spans(train_data_);
  if (spans.unaligned_answers > 0)
    spdlog::warn("{}: {} of {} answers do not align with token boundaries and are skipped; {} questions have no "
                 "aligned answer and are not trained on", train_data_.path, spans.unaligned_answers, spans.answers,
                 spans.skipped_questions.size());
  SRU_CHECK(!trainable_.empty(), "'", cfg.data.path, "' (data.path) has no question with an answer to train on");
  spdlog::info("squad: {} training questions ({} with an aligned answer), {} in {}; vocabulary {}", train_.examples.size(),
               trainable_.size(), valid_.examples.size(), options_.valid_path, vocab_.size());
}

std::string SquadTask::word(const data::Token& token) const { return options_.lowercase ? token.lower : token.text; }

data::WordVectors SquadTask::build_vocabulary() {
  // The words of the training questions and paragraphs; with vectors, those of both files that the
  // vectors cover (DrQA), since their rows keep the vectors' values.
  std::vector<std::vector<std::string>> sentences;
  for (const auto* d : {&train_data_, &valid_data_}) {
    if (d == &valid_data_ && options_.vectors.empty()) break;
    for (const data::SquadParagraph& p : d->paragraphs) {
      std::vector<std::string>& words = sentences.emplace_back();
      for (const data::Token& t : data::tokenize(p.context)) words.push_back(word(t));
      for (const data::SquadQuestion& q : p.questions) {
        std::vector<std::string>& question = sentences.emplace_back();
        for (const data::Token& t : data::tokenize(q.question)) question.push_back(word(t));
      }
    }
  }
  data::WordVectors vectors;
  if (!options_.vectors.empty()) {
    SRU_CHECK(std::filesystem::is_regular_file(options_.vectors), "cannot open word vectors '", options_.vectors,
              "' (data.vectors)");
    std::unordered_set<std::string> wanted;
    for (const auto& s : sentences) wanted.insert(s.begin(), s.end());
    vectors = data::load_word_vectors(options_.vectors, wanted, options_.vectors_format, options_.normalize_vectors);
    SRU_CHECK(vectors.dim == cfg_.model.embedding_size, "data.vectors '", options_.vectors, "' has ", vectors.dim,
              "-dimensional vectors but model.embedding_size is ", cfg_.model.embedding_size, " (make them equal)");
    for (auto& s : sentences) std::erase_if(s, [&](const std::string& w) { return !vectors.vectors.count(w); });
  }
  vocab_ = data::Vocabulary::build(sentences, options_.vectors.empty() ? options_.min_count : 1);
  return vectors;
}

ReaderSplit SquadTask::encode(const data::SquadDataset& dataset) const {
  ReaderSplit s;
  for (size_t pi = 0; pi < dataset.paragraphs.size(); ++pi) {
    const data::SquadParagraph& p = dataset.paragraphs[pi];
    s.context_text.push_back(p.context);
    std::vector<data::Token> tokens = data::tokenize(p.context);
    std::vector<int64_t> ids;
    std::map<std::string, int64_t> counts;
    for (const data::Token& t : tokens) {
      ids.push_back(vocab_.id(word(t)));
      ++counts[t.lower];
    }
    std::vector<float> tf;
    for (const data::Token& t : tokens) tf.push_back(static_cast<float>(counts[t.lower]) / tokens.size());
    for (const data::SquadQuestion& q : p.questions) {
      ReaderSplit::Example e;
      e.paragraph = static_cast<int64_t>(pi);
      e.id = q.id;
      e.question = data::tokenize(q.question);
      for (const data::Token& t : e.question) e.question_ids.push_back(vocab_.id(word(t)));
      if (e.question_ids.empty()) e.question_ids.push_back(data::Vocabulary::kUnk);
      for (const data::SquadAnswer& a : q.answers)
        if (auto span = data::align_answer(p.context, tokens, a.begin, a.end)) {
          e.start = span->first;
          e.end = span->last;
          break;
        }
      s.examples.push_back(std::move(e));
    }
    s.contexts.push_back(std::move(tokens));
    s.context_ids.push_back(std::move(ids));
    s.term_frequency.push_back(std::move(tf));
  }
  return s;
}

int64_t SquadTask::steps_per_epoch() const {
  return (static_cast<int64_t>(trainable_.size()) + cfg_.data.batch_size - 1) / cfg_.data.batch_size;
}

void SquadTask::start_epoch(int64_t epoch, int64_t) {
  const std::vector<int64_t> all = train_.doc_lengths();
  std::vector<int64_t> lengths;
  for (int64_t i : trainable_) lengths.push_back(all[i]);
  batches_ = epoch_batches(lengths, cfg_.data.batch_size, static_cast<uint64_t>(cfg_.train.seed), epoch);
}

std::pair<int64_t, int64_t> SquadTask::padded_lengths(int64_t index) const {
  SRU_CHECK(index >= 0 && index < static_cast<int64_t>(batches_.size()), "squad: training step ", index,
            " is outside the epoch's ", batches_.size(), " batches");
  int64_t doc_length = 1, question_length = 1;
  for (int64_t i : batches_[index]) {
    const ReaderSplit::Example& e = train_.examples[trainable_[i]];
    doc_length = std::max(doc_length, static_cast<int64_t>(train_.contexts[e.paragraph].size()));
    question_length = std::max(question_length, static_cast<int64_t>(e.question_ids.size()));
  }
  return {round_up(doc_length, options_.pad_to_multiple), round_up(question_length, options_.pad_to_multiple)};
}

SquadTask::TrainingBatch SquadTask::training_batch(int64_t index) const {
  const auto [doc_length, question_length] = padded_lengths(index);
  // Data parallel: this rank's questions of the batch, padded as the whole batch is.
  const std::vector<int64_t>& whole = batches_[index];
  TrainingBatch out;
  out.part = batch_part(static_cast<int64_t>(whole.size()), *comm_);
  out.questions = static_cast<int64_t>(whole.size());
  std::vector<int64_t> mine;
  for (size_t k = 0; k < whole.size(); ++k) {
    const ReaderSplit::Example& e = train_.examples[trainable_[whole[k]]];
    out.words += static_cast<int64_t>(train_.contexts[e.paragraph].size() + e.question_ids.size());
    if (static_cast<int64_t>(k) < out.part.first || static_cast<int64_t>(k) >= out.part.first + out.part.count) continue;
    mine.push_back(trainable_[whole[k]]);
    out.starts.push_back(e.start);
    out.ends.push_back(e.end);
  }
  out.batch = train_.batch(mine, doc_length, question_length);
  return out;
}

Tensor SquadTask::span_loss(const ReaderBatch& batch, const Tensor& starts, const Tensor& ends) const {
  const auto [start_scores, end_scores] = model_->forward(batch);
  const Device device = start_scores.device();
  return add(training_cross_entropy(start_scores, starts.to(device), cfg_.train),
             training_cross_entropy(end_scores, ends.to(device), cfg_.train));
}

StepResult SquadTask::forward_step(int64_t index) {
  model_->train(true);
  const TrainingBatch t = training_batch(index);
  const BatchShardScope shard(*gen_, t.part.shard);
  const Shape shape{static_cast<int64_t>(t.starts.size())};
  const Tensor loss = span_loss(t.batch, Tensor::from_vector(t.starts, shape), Tensor::from_vector(t.ends, shape));
  return {loss, t.words, t.part.share, t.questions};
}

std::string SquadTask::why_not_staged() const {
  if (options_.pad_to_multiple == 0)
    return "data.pad_to_multiple is 0 (every batch padded to its longest paragraph and question: too many batch "
           "shapes to capture)";
  return encoder_not_capturable(model_->encoder(), cfg_.model.type, model_->device());
}

std::optional<std::string> SquadTask::staged_shape(int64_t index) const {
  if (!why_not_staged().empty() || index < 0 || index >= static_cast<int64_t>(batches_.size())) return std::nullopt;
  const auto [doc_length, question_length] = padded_lengths(index);
  const int64_t rows = batch_part(static_cast<int64_t>(batches_[index].size()), *comm_).count;
  return std::to_string(doc_length) + "x" + std::to_string(question_length) + "x" + std::to_string(rows);
}

StagedStep SquadTask::stage_step(int64_t index) {
  const std::optional<std::string> shape = staged_shape(index);
  SRU_CHECK(shape, "squad: training step ", index, " cannot be staged");
  const TrainingBatch t = training_batch(index);
  StagedBatch& s = staged_[*shape];
  ReaderBatch& b = s.batch;
  const Device device = model_->device();
  for (auto [slot, host] : {std::pair{&b.doc, &t.batch.doc}, {&b.doc_features, &t.batch.doc_features},
                            {&b.doc_mask, &t.batch.doc_mask}, {&b.doc_mask_bf, &t.batch.doc_mask_bf},
                            {&b.question, &t.batch.question}, {&b.question_mask, &t.batch.question_mask},
                            {&b.question_mask_bf, &t.batch.question_mask_bf}})
    stage_into(*slot, *host, device);
  const Shape rows{static_cast<int64_t>(t.starts.size())};
  stage_into(s.starts, Tensor::from_vector(t.starts, rows), device);
  stage_into(s.ends, Tensor::from_vector(t.ends, rows), device);
  staged_batch_ = &s;
  staged_part_ = t.part;
  staged_questions_ = t.questions;
  return {*shape, t.words, t.questions};
}

StepResult SquadTask::forward_staged() {
  SRU_CHECK(staged_batch_, "squad: forward_staged without a staged step");
  model_->train(true);
  const BatchShardScope shard(*gen_, staged_part_.shard);
  // tokens: the trainer takes each step's from stage_step.
  return {span_loss(staged_batch_->batch, staged_batch_->starts, staged_batch_->ends), 0, staged_part_.share,
          staged_questions_};
}

data::SquadPredictions SquadTask::answer(const ReaderSplit& split, int64_t max_batches, bool distributed) {
  autograd::NoGradGuard no_grad;
  model_->eval();
  data::SquadPredictions out;
  int64_t index = -1;
  for (const auto& batch : evaluation_batches(split.doc_lengths(), cfg_.data.eval_batch_size)) {
    if (++index >= max_batches && max_batches > 0) break;
    // Distributed: batch i is rank i % world's, so each batch is what one process would run.
    if (distributed && index % comm_->size() != comm_->rank()) continue;
    const auto [start_scores, end_scores] = model_->forward(split.batch(batch));
    // Float32 on the host whatever the precision (a bf16 run's scores are bf16).
    const Tensor s = start_scores.to(Device::cpu()).to(DType::F32), e = end_scores.to(Device::cpu()).to(DType::F32);
    const int64_t L = s.size(1);
    for (size_t b = 0; b < batch.size(); ++b) {
      const ReaderSplit::Example& ex = split.examples[batch[b]];
      const auto& tokens = split.contexts[ex.paragraph];
      if (tokens.empty()) {
        out[ex.id] = "";
        continue;
      }
      const Span span = best_span(s.data<float>() + b * L, e.data<float>() + b * L,
                                  static_cast<int64_t>(tokens.size()), options_.max_span);
      const int64_t begin = tokens[span.start].begin, end = tokens[span.end].end;
      out[ex.id] = split.context_text[ex.paragraph].substr(begin, end - begin);
    }
  }
  model_->train(true);
  if (distributed && comm_->size() > 1) {
    // Every rank's answers to every rank, as (id, answer) pairs of strings.
    std::vector<std::string> mine;
    for (const auto& [id, text] : out) {
      mine.push_back(id);
      mine.push_back(text);
    }
    const std::vector<std::string> all = dist::all_gather(*comm_, mine, "the evaluation's answers");
    for (size_t i = 0; i + 1 < all.size(); i += 2) out[all[i]] = all[i + 1];
  }
  return out;
}

Metrics SquadTask::score(const data::SquadDataset& dataset, const data::SquadPredictions& predictions) const {
  // A partial evaluation (eval.max_batches) scores the questions it answered; a full one, every question.
  const bool partial = static_cast<int64_t>(predictions.size()) < dataset.questions;
  const data::SquadScore r = data::score_squad(partial ? only_predicted(dataset, predictions) : dataset, predictions);
  return {{"f1", r.f1}, {"exact_match", r.exact_match}, {"questions", static_cast<double>(r.questions)}};
}

Metrics SquadTask::evaluate(const std::string& split, int64_t max_batches) {
  check_split(split);
  const bool valid = split == "valid";
  return score(valid ? valid_data_ : train_data_, answer(valid ? valid_ : train_, max_batches, true));
}

Metrics SquadTask::evaluate_file(const std::string& path, int64_t max_batches, int64_t) {
  const data::SquadDataset dataset = data::read_squad(path);
  return score(dataset, answer(encode(dataset), max_batches));
}

Metrics SquadTask::evaluate_with_predictions(const std::string& split, const std::string& file, std::ostream& out) {
  data::SquadDataset dataset;
  if (!file.empty()) {
    dataset = data::read_squad(file);
  } else {
    check_split(split);
    dataset = split == "valid" ? valid_data_ : train_data_;
  }
  const data::SquadPredictions predictions =
      answer(!file.empty() ? encode(dataset) : split == "valid" ? valid_ : train_, 0);
  // In the data file's order, as the official script's input usually is.
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const data::SquadParagraph& p : dataset.paragraphs)
    for (const data::SquadQuestion& q : p.questions) j[q.id] = predictions.at(q.id);
  out << j.dump(1) << "\n";
  return score(dataset, predictions);
}

void SquadTask::predict_file(const std::string& path, std::ostream& out) {
  // A JSON array of {"id" (optional), "context", "question"} objects; answers by id (or index).
  const nlohmann::json input = data::read_json_file(path, "questions file");
  SRU_CHECK(input.is_array(), "'", path, "' (--predict): expected a JSON array of {\"context\", \"question\"} "
            "objects, got ", data::describe_json(input));
  data::SquadDataset dataset;
  std::vector<std::string> ids;
  for (size_t i = 0; i < input.size(); ++i) {
    const nlohmann::json& item = input[i];
    auto text = [&](const char* key) {
      SRU_CHECK(item.is_object() && item.contains(key) && item[key].is_string(), "'", path, "' (--predict): item ", i,
                " needs a string \"", key, "\"");
      return item[key].get<std::string>();
    };
    data::SquadParagraph p;
    p.context = text("context");
    data::SquadQuestion q;
    q.question = text("question");
    q.id = item.is_object() && item.contains("id") ? (item["id"].is_string() ? item["id"].get<std::string>()
                                                                              : item["id"].dump())
                                                   : std::to_string(i);
    ids.push_back(q.id);
    p.questions.push_back(std::move(q));
    dataset.paragraphs.push_back(std::move(p));
  }
  const data::SquadPredictions predictions = answer(encode(dataset), 0);
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const std::string& id : ids) j[id] = predictions.at(id);
  out << j.dump(1) << "\n";
}

std::string SquadTask::vocabulary_name() const { return "words-" + std::to_string(vocab_.size()) + " (task.vocab)"; }

nn::NamedTensors SquadTask::extra_state() { return {{"task.vocab", string_tensor(vocab_.serialize())}}; }

// ---- registry entry ----

namespace {

std::vector<config::Section> squad_fields(SquadOptions& o) {
  using namespace config;
  return {{"data", "", {
      string_field("valid_path", &o.valid_path, "Evaluation file in SQuAD v1.1 format (dev-v1.1.json)", {}, true),
      bool_field("lowercase", &o.lowercase, "Lower-case words for the vocabulary (the exact-match features see both)"),
      int_field("min_count", &o.min_count, "Training words seen fewer times become <unk> (without data.vectors)", 1),
      string_field("vectors", &o.vectors, "Pretrained word vectors (GloVe/fastText text, word2vec .bin; .gz or .zip); "
                   "empty = embeddings trained from random"),
      string_field("vectors_format", &o.vectors_format, "Format of data.vectors (auto: .bin = word2vec)",
                   {"auto", "text", "word2vec"}),
      bool_field("normalize_vectors", &o.normalize_vectors, "Scale pretrained vectors to unit L2 norm"),
      int_field("tune_partial", &o.tune_partial, "With data.vectors: fine-tune only the embeddings of this many most "
                "frequent question words (and <unk>); 0 = all", 0),
      int_field("max_span", &o.max_span, "Longest answer in tokens (DrQA's max_len)", 1),
      int_field("pad_to_multiple", &o.pad_to_multiple, "Round training batches' paragraph and question lengths up "
                "to multiples of N (0 = each batch's longest): fewer batch shapes, so that CUDA graphs "
                "(train.cuda_graphs) replay most steps; the padding is masked", 0)}}};
}

// srueval squad-score --data FILE --predictions FILE: the official metric of a predictions file alone.
Scorer squad_scorer() {
  return {"squad-score",
          "Score a SQuAD v1.1 predictions file exactly as the official evaluate-v1.1.py does; prints "
          "{\"exact_match\": ..., \"f1\": ...}",
          {{"data", "The SQuAD v1.1 data file (e.g. dev-v1.1.json)"},
           {"predictions", "A JSON object {question id: answer text}"}},
          [](const ScorerArgs& args, std::ostream& out, std::ostream& err) {
            const data::SquadDataset dataset = data::read_squad(args.at("data"));
            const data::SquadScore r = data::score_squad(dataset, data::read_squad_predictions(args.at("predictions")));
            // Like the official script: questions without a prediction score 0 and are named on stderr.
            for (const std::string& id : r.unanswered) err << "Unanswered question " << id << " will receive score 0.\n";
            out << nlohmann::json{{"exact_match", r.exact_match}, {"f1", r.f1}}.dump() << "\n";
            return 0;
          }};
}

}  // namespace

TaskSpec squad_task() {
  TaskSpec spec{"squad",
                "SQuAD v1.1 reading comprehension with the Document Reader (DrQA) on the registry's encoders: "
                "`data.path` is train-v1.1.json, `data.valid_path` dev-v1.1.json; metrics `f1` and `exact_match` "
                "exactly as the official evaluate-v1.1.py.",
                [] { return config::Options::of(SquadOptions{}, &squad_fields); },
                [](const config::Config& cfg, Generator& gen, const TaskContext& ctx) -> std::unique_ptr<Task> {
                  return std::make_unique<SquadTask>(cfg, gen, ctx);
                },
                {}};
  spec.scorers = {squad_scorer()};
  return spec;
}

}  // namespace sru::tasks
