// The Document Reader of DrQA (Chen et al. 2017) with the encoders of the registry — bidirectional
// SRUs in the SRU paper's section 3.2, LSTMs for the baseline — and only the last layer's output
// feeding the next stage (the SRU's highway connection makes DrQA's concatenation of every layer
// unnecessary).
//
//   paragraph: word embedding p (Ld, B, E), token features f (Ld, B, F) (exact match of the original
//              and the lower-cased word in the question, term frequency), aligned question embedding
//              a_i = sum_j softmax_j(relu(W p_i) . relu(W q_j)) q_j (SeqAttnMatch, question padding masked)
//              -> doc_rnn([p; f; a]) -> P (Ld, B, out)
//   question:  word embedding q (Lq, B, E) -> question_rnn(q) -> Q (Lq, B, out); self-attentive pooling
//              u = sum_j softmax_j(w . Q_j + b) Q_j (LinearSeqAttn)
//   scores:    start_i = P_i W_s u (+ W_s's bias . P_i), end_i = P_i W_e u (BilinearSeqAttn), paragraph
//              padding -inf; the loss is the cross-entropy of the answer's first and last token.
// Dropout: model.embedding_dropout on both embeddings, model.output_dropout on both encoders' outputs,
// model.dropout (and the SRU's rnn_dropout) inside the encoders.
//
// Parameter names (checkpoints): embedding.weight (V, E), qemb_match.linear.{weight,bias} (E, E),
// doc_rnn.* and question_rnn.* (the encoder's own: rnn_lst.{i}.* for the SRU), self_attn.linear.*
// (1, out), start_attn.linear.* and end_attn.linear.* (out, out) — DrQA's layer names.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "nn/attention.h"
#include "nn/encoder.h"
#include "nn/layers.h"
#include "tasks/registry.h"

namespace sru::tasks {

// A padded batch of (paragraph, question) pairs. Time-major tensors feed the encoders; the batch-first
// masks feed the attention layers. Masks: 1 = padding.
struct ReaderBatch {
  Tensor doc;            // (Ld, B) i64 word ids, 0 after each paragraph's end
  Tensor doc_features;   // (Ld, B, F) f32
  Tensor doc_mask;       // (Ld, B)
  Tensor doc_mask_bf;    // (B, Ld)
  Tensor question;       // (Lq, B) i64
  Tensor question_mask;  // (Lq, B)
  Tensor question_mask_bf;  // (B, Lq)
};

class DocumentReader : public nn::Module {
 public:
  static constexpr int64_t kFeatures = 3;  // exact match (original, lower case), term frequency

  DocumentReader(const config::Config& cfg, int64_t vocab_size, Generator& gen);
  // Start and end scores (B, Ld), -inf at padded paragraph positions.
  std::pair<Tensor, Tensor> forward(const ReaderBatch& batch) const;
  nn::Embedding& embedding() { return *embedding_; }
  // The paragraph's encoder (the question's is of the same type).
  const nn::SequenceEncoder& encoder() const { return *doc_rnn_; }

  // Rows of the embedding set back to `values` (V, E) after every update (DrQA's partial fine-tuning:
  // only the most frequent question words are tuned). fixed[i] true = row i fixed.
  void fix_embedding_rows(const std::vector<bool>& fixed, const Tensor& values);

 protected:
  void on_after_update() override;  // puts the fixed rows back

 private:
  config::ModelConfig cfg_;
  Generator* gen_;
  std::shared_ptr<nn::Embedding> embedding_;
  std::shared_ptr<nn::SeqAttnMatch> qemb_match_;
  std::shared_ptr<nn::SequenceEncoder> doc_rnn_, question_rnn_;
  std::shared_ptr<nn::LinearSeqAttn> self_attn_;
  std::shared_ptr<nn::BilinearSeqAttn> start_attn_, end_attn_;
  // weight = weight * keep + held after each update: keep (V, E) is 0 on fixed rows and 1 elsewhere,
  // held (V, E) the fixed rows' values and 0 elsewhere. Not checkpointed: the fixed rows never change.
  Tensor keep_, held_;
};

// The most probable span of one example: argmax over start <= end < start + max_span of
// p_start(start) * p_end(end), positions < length. Scores are a row of forward()'s output.
struct Span {
  int64_t start = 0, end = 0;
  double probability = 0;
};
Span best_span(const float* start_scores, const float* end_scores, int64_t length, int64_t max_span);

}  // namespace sru::tasks
