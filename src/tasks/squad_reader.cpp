// The Document Reader (see squad_reader.h): layers, forward pass, partial fine-tuning of the
// embedding, and span decoding.
#include "tasks/squad_reader.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/node.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/shape_ops.h"

namespace sru::tasks {

DocumentReader::DocumentReader(const config::Config& cfg, int64_t vocab_size, Generator& gen)
    : cfg_(cfg.model), gen_(&gen) {
  const int64_t E = cfg.model.embedding_size;
  embedding_ = register_module("embedding", std::make_shared<nn::Embedding>(vocab_size, E, 0, DType::F32, gen));
  qemb_match_ = register_module("qemb_match", std::make_shared<nn::SeqAttnMatch>(E, DType::F32, gen));
  doc_rnn_ = register_module("doc_rnn", make_encoder(cfg, 2 * E + kFeatures, gen, vocab_size));
  question_rnn_ = register_module("question_rnn", make_encoder(cfg, E, gen, vocab_size));
  const int64_t out = doc_rnn_->output_size();
  self_attn_ = register_module("self_attn", std::make_shared<nn::LinearSeqAttn>(out, DType::F32, gen));
  start_attn_ = register_module("start_attn", std::make_shared<nn::BilinearSeqAttn>(out, out, DType::F32, gen));
  end_attn_ = register_module("end_attn", std::make_shared<nn::BilinearSeqAttn>(out, out, DType::F32, gen));
}

std::pair<Tensor, Tensor> DocumentReader::forward(const ReaderBatch& b) const {
  const bool training = is_training();
  const Device device = this->device();  // batches are made on the CPU
  const Tensor doc = b.doc.to(device), question = b.question.to(device);
  // The encoders take their (L, B) masks on the CPU (see tasks/classify.cpp); the attention layers
  // read theirs on the device.
  const Tensor doc_mask_bf = b.doc_mask_bf.to(device), question_mask_bf = b.question_mask_bf.to(device);

  // Time-major activations: the batch is dim 1 of their dropout masks (data-parallel shards, ops/dropout.h).
  const Tensor p = dropout(embedding_->forward(doc), cfg_.embedding_dropout, training, *gen_, 1);       // (Ld, B, E)
  const Tensor q = dropout(embedding_->forward(question), cfg_.embedding_dropout, training, *gen_, 1);  // (Lq, B, E)
  const Tensor aligned = qemb_match_->forward(transpose(p, 0, 1), transpose(q, 0, 1), question_mask_bf);  // (B, Ld, E)
  const Tensor doc_in = concat({p, b.doc_features.to(device), transpose(aligned, 0, 1)}, 2);
  nn::EncoderStatePtr doc_state, question_state;
  const Tensor P = dropout(doc_rnn_->forward_sequence({doc_in, b.doc_mask, doc}, doc_state), cfg_.output_dropout,
                           training, *gen_, 1);
  const Tensor Q = dropout(question_rnn_->forward_sequence({q, b.question_mask, question}, question_state),
                           cfg_.output_dropout, training, *gen_, 1);
  const Tensor P_bf = transpose(P, 0, 1), Q_bf = transpose(Q, 0, 1);  // (B, L, out)
  const Tensor u = nn::weighted_average(Q_bf, self_attn_->forward(Q_bf, question_mask_bf));  // (B, out)
  return {start_attn_->forward(P_bf, u, doc_mask_bf), end_attn_->forward(P_bf, u, doc_mask_bf)};
}

void DocumentReader::fix_embedding_rows(const std::vector<bool>& fixed, const Tensor& row_values) {
  const Tensor& w = embedding_->weight;
  const int64_t V = w.size(0), E = w.size(1);
  SRU_CHECK(static_cast<int64_t>(fixed.size()) == V && row_values.shape() == w.shape(), "fix_embedding_rows: ",
            fixed.size(), " flags and values ", row_values.str(), " for ", w.str());
  const Tensor values = row_values.to(Device::cpu()).to(DType::F32);
  keep_ = Tensor::ones({V, E});
  held_ = Tensor::zeros({V, E});
  float* keep = keep_.data<float>();
  float* held = held_.data<float>();
  const float* v = values.data<float>();
  for (int64_t i = 0; i < V; ++i) {
    if (!fixed[i]) continue;
    std::fill(keep + i * E, keep + (i + 1) * E, 0.0f);
    std::copy(v + i * E, v + (i + 1) * E, held + i * E);
  }
}

void DocumentReader::on_after_update() {
  if (!keep_.defined()) return;
  Tensor& w = embedding_->weight;
  if (keep_.device() != w.device()) {
    keep_ = keep_.to(w.device());
    held_ = held_.to(w.device());
  }
  autograd::NoGradGuard no_grad;
  w.copy_(add(mul(w, keep_), held_));
}

Span best_span(const float* start_scores, const float* end_scores, int64_t length, int64_t max_span) {
  // Probabilities over the paragraph's own positions (the scores past `length` are -inf padding).
  auto normalised = [length](const float* s) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < length; ++i) m = std::max(m, static_cast<double>(s[i]));
    std::vector<double> p(length);
    double z = 0;
    for (int64_t i = 0; i < length; ++i) z += p[i] = std::exp(s[i] - m);
    for (double& x : p) x /= z;
    return p;
  };
  const std::vector<double> ps = normalised(start_scores), pe = normalised(end_scores);
  Span best{0, 0, -1.0};
  for (int64_t s = 0; s < length; ++s)
    for (int64_t e = s; e < std::min(length, s + max_span); ++e)
      if (ps[s] * pe[e] > best.probability) best = {s, e, ps[s] * pe[e]};
  return best;
}

}  // namespace sru::tasks
