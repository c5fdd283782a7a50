// Scaled dot-product attention, head split/merge, mask builders and DrQA's attention layers (see
// nn/attention.h), composed from differentiable ops: bmm with transpose flags, masked softmax,
// dropout, reshape/transpose.
#include "nn/attention.h"

#include <cmath>
#include <limits>

#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/masked_softmax.h"
#include "ops/matmul.h"
#include "ops/select.h"
#include "ops/shape_ops.h"

namespace sru::nn {

namespace {

Shape leading_dims(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

Shape with_last_two(Shape lead, int64_t rows, int64_t cols) {
  lead.push_back(rows);
  lead.push_back(cols);
  return lead;
}

void check_attention_shapes(const Tensor& q, const Tensor& k, const Tensor& v) {
  SRU_CHECK(q.defined() && k.defined() && v.defined(), "scaled_dot_product_attention: q, k and v must be defined");
  const auto shapes = [&] {
    return "q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " + shape_str(v.shape());
  };
  SRU_CHECK(q.dim() >= 3 && k.dim() == q.dim() && v.dim() == q.dim(),
            "scaled_dot_product_attention: q, k, v must be (..., L, d) of one rank >= 3, got ", shapes());
  SRU_CHECK(leading_dims(k) == leading_dims(q) && leading_dims(v) == leading_dims(q),
            "scaled_dot_product_attention: the batch dims of q, k, v differ: ", shapes());
  SRU_CHECK(k.size(-1) == q.size(-1), "scaled_dot_product_attention: q and k have different feature sizes: ",
            shapes());
  SRU_CHECK(v.size(-2) == k.size(-2), "scaled_dot_product_attention: k and v have different lengths: ", shapes());
}

// A DrQA-style padding mask must be exactly (B, L) for its (B, L, ...) input; undefined is allowed.
void check_sequence_mask(const Tensor& mask, const Tensor& x, const char* who, const char* mask_name) {
  if (!mask.defined()) return;
  SRU_CHECK(mask.dim() == 2 && mask.size(0) == x.size(0) && mask.size(1) == x.size(1), who, ": ", mask_name,
            " must be (B, L) = (", x.size(0), ", ", x.size(1), ") for input ", shape_str(x.shape()), ", got ",
            shape_str(mask.shape()));
}

void check_rank3(const Tensor& x, const char* who, const char* name, int64_t features) {
  SRU_CHECK(x.dim() == 3 && x.size(2) == features, who, ": ", name, " must be (B, L, ", features, "), got ",
            shape_str(x.shape()));
}

Tensor mask_tensor(const Shape& shape, const std::vector<int32_t>& hidden, DType dtype, Device device) {
  return Tensor::from_vector(hidden, shape).to(dtype).to(device);
}

}  // namespace

AttentionResult scaled_dot_product_attention_with_weights(const Tensor& q, const Tensor& k, const Tensor& v,
                                                          const Tensor& mask, double dropout_p, bool training,
                                                          Generator& gen, std::optional<double> scale) {
  check_attention_shapes(q, k, v);
  const Shape lead = leading_dims(q);
  const int64_t batch = shape_numel(lead), Lq = q.size(-2), d = q.size(-1), Lk = k.size(-2), dv = v.size(-1);
  SRU_CHECK(scale.has_value() || d > 0, "scaled_dot_product_attention: the default scale 1/sqrt(d) needs d > 0");
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(d)));
  Tensor q3 = reshape(q, {batch, Lq, d});
  if (s != 1.0) q3 = q3 * s;  // scaling q costs Lq*d, scaling the scores Lq*Lk
  const Tensor scores = reshape(bmm(q3, reshape(k, {batch, Lk, d}), false, true), with_last_two(lead, Lq, Lk));
  const Tensor weights = masked_softmax(scores, mask);
  const Tensor dropped = dropout(reshape(weights, {batch, Lq, Lk}), dropout_p, training, gen);
  const Tensor out = bmm(dropped, reshape(v, {batch, Lk, dv}));
  return {reshape(out, with_last_two(lead, Lq, dv)), weights};
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                    double dropout_p, bool training, Generator& gen, std::optional<double> scale) {
  return scaled_dot_product_attention_with_weights(q, k, v, mask, dropout_p, training, gen, scale).output;
}

Tensor split_heads(const Tensor& x, int64_t heads) {
  SRU_CHECK(heads > 0 && x.dim() == 3 && x.size(2) % heads == 0, "split_heads: x must be (L, B, H*dh) with H = ",
            heads, " dividing the last dim, got ", shape_str(x.shape()));
  const int64_t L = x.size(0), B = x.size(1), dh = x.size(2) / heads;
  return transpose(reshape(x, {L, B * heads, dh}), 0, 1);
}

Tensor merge_heads(const Tensor& x, int64_t heads) {
  SRU_CHECK(heads > 0 && ((x.dim() == 3 && x.size(0) % heads == 0) || (x.dim() == 4 && x.size(1) == heads)),
            "merge_heads: x must be (B*H, L, dh) or (B, H, L, dh) with H = ", heads, ", got ", shape_str(x.shape()));
  const int64_t BH = x.dim() == 3 ? x.size(0) : x.size(0) * heads, L = x.size(-2), dh = x.size(-1);
  return reshape(transpose(reshape(x, {BH, L, dh}), 0, 1), {L, BH / heads, heads * dh});
}

Tensor causal_mask(int64_t query_length, int64_t key_length, int64_t memory_length, DType dtype, Device device) {
  SRU_CHECK(query_length >= 0 && key_length >= 0 && memory_length >= 0, "causal_mask: lengths must be >= 0, got Lq ",
            query_length, ", Lk ", key_length, ", memory ", memory_length);
  std::vector<int32_t> hidden(query_length * key_length);
  for (int64_t i = 0; i < query_length; ++i)
    for (int64_t j = 0; j < key_length; ++j) hidden[i * key_length + j] = j > i + memory_length;
  return mask_tensor({query_length, key_length}, hidden, dtype, device);
}

Tensor padding_mask(const std::vector<int64_t>& lengths, int64_t max_length, DType dtype, Device device) {
  const int64_t B = static_cast<int64_t>(lengths.size());
  std::vector<int32_t> hidden(B * max_length);
  for (int64_t b = 0; b < B; ++b) {
    SRU_CHECK(lengths[b] >= 0 && lengths[b] <= max_length, "padding_mask: length ", lengths[b], " of sequence ", b,
              " is outside [0, ", max_length, "]");
    for (int64_t j = lengths[b]; j < max_length; ++j) hidden[b * max_length + j] = 1;
  }
  return mask_tensor({B, max_length}, hidden, dtype, device);
}

SeqAttnMatch::SeqAttnMatch(int64_t dim, DType dtype, Generator& gen) {
  linear = register_module("linear", std::make_shared<Linear>(dim, dim, true, dtype, gen));
}

Tensor SeqAttnMatch::forward(const Tensor& x, const Tensor& y, const Tensor& y_mask) const {
  const int64_t d = linear->weight.size(1);
  check_rank3(x, "SeqAttnMatch", "x", d);
  check_rank3(y, "SeqAttnMatch", "y", d);
  SRU_CHECK(x.size(0) == y.size(0), "SeqAttnMatch: x ", shape_str(x.shape()), " and y ", shape_str(y.shape()),
            " have different batch sizes");
  check_sequence_mask(y_mask, y, "SeqAttnMatch", "y_mask");
  const Tensor x_proj = relu(linear->forward(x)), y_proj = relu(linear->forward(y));
  const Tensor mask = y_mask.defined() ? y_mask.view({y.size(0), 1, y.size(1)}) : Tensor();
  return scaled_dot_product_attention(x_proj, y_proj, y, mask, 0.0, false, default_generator(), 1.0);
}

LinearSeqAttn::LinearSeqAttn(int64_t dim, DType dtype, Generator& gen) {
  linear = register_module("linear", std::make_shared<Linear>(dim, 1, true, dtype, gen));
}

Tensor LinearSeqAttn::forward(const Tensor& x, const Tensor& x_mask) const {
  check_rank3(x, "LinearSeqAttn", "x", linear->weight.size(1));
  check_sequence_mask(x_mask, x, "LinearSeqAttn", "x_mask");
  return masked_softmax(reshape(linear->forward(x), {x.size(0), x.size(1)}), x_mask);
}

Tensor weighted_average(const Tensor& x, const Tensor& w) {
  SRU_CHECK(x.dim() == 3 && w.dim() == 2 && w.size(0) == x.size(0) && w.size(1) == x.size(1),
            "weighted_average: expected x (B, L, d) and w (B, L), got ", shape_str(x.shape()), " and ",
            shape_str(w.shape()));
  const int64_t B = x.size(0), L = x.size(1), d = x.size(2);
  return reshape(bmm(reshape(w, {B, 1, L}), x), {B, d});
}

BilinearSeqAttn::BilinearSeqAttn(int64_t x_dim, int64_t y_dim, DType dtype, Generator& gen) {
  linear = register_module("linear", std::make_shared<Linear>(y_dim, x_dim, true, dtype, gen));
}

Tensor BilinearSeqAttn::scores(const Tensor& x, const Tensor& y, const Tensor& x_mask) const {
  const int64_t dx = linear->weight.size(0), dy = linear->weight.size(1);
  check_rank3(x, "BilinearSeqAttn", "x", dx);
  SRU_CHECK(y.dim() == 2 && y.size(0) == x.size(0) && y.size(1) == dy, "BilinearSeqAttn: y must be (B, ", dy,
            ") = (", x.size(0), ", ", dy, "), got ", shape_str(y.shape()));
  check_sequence_mask(x_mask, x, "BilinearSeqAttn", "x_mask");
  const int64_t B = x.size(0), L = x.size(1);
  return reshape(bmm(x, reshape(linear->forward(y), {B, dx, 1})), {B, L});
}

Tensor BilinearSeqAttn::forward(const Tensor& x, const Tensor& y, const Tensor& x_mask) const {
  const Tensor s = scores(x, y, x_mask);
  return x_mask.defined() ? masked_fill(s, x_mask, -std::numeric_limits<double>::infinity()) : s;
}

Tensor BilinearSeqAttn::log_probs(const Tensor& x, const Tensor& y, const Tensor& x_mask) const {
  return masked_log_softmax(scores(x, y, x_mask), x_mask);
}

}  // namespace sru::nn
