// Multi-head attention and its key/value cache, scaled dot-product attention, head split/merge, mask
// builders and DrQA's attention layers (see nn/attention.h), composed from differentiable ops: bmm with
// transpose flags, the fused softmax kernels, dropout, reshape/transpose, index_select / index_copy_.
#include "nn/attention.h"

#include <atomic>
#include <cmath>
#include <limits>

#include "ops/attention.h"
#include "ops/dropout.h"
#include "ops/index.h"
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

// The attention weights from the raw scores (B*H, Lq, Lk): scaled, masked, softmax over the keys, and
// dropped out in training.
Tensor attention_weights(const Tensor& scores, int64_t heads, const AttentionMask& mask, double scale, double dropout_p,
                         bool training, Generator& gen) {
  const int64_t BH = scores.size(0), B = BH / heads, Lq = scores.size(1), Lk = scores.size(2);
  const auto padding_as_heads = [&] {
    const Tensor& p = mask.key_padding;
    SRU_CHECK(p.dim() == 2 && p.size(0) == B && p.size(1) == Lk, "attention: key_padding must be (B, Lk) = (", B,
              ", ", Lk, "), got ", shape_str(p.shape()));
    return p.view({B, 1, 1, Lk});
  };
  Tensor weights;
  switch (mask.kind) {
    case AttentionMask::Kind::None:
      // Every key at or before each query: the causal kernel with nothing hidden, scale folded in.
      weights = causal_softmax(scores, scale, Lk);
      break;
    case AttentionMask::Kind::KeyPadding:
      weights = reshape(masked_softmax(reshape(scores * scale, {B, heads, Lq, Lk}), padding_as_heads()), {BH, Lq, Lk});
      break;
    case AttentionMask::Kind::Causal:
      weights = mask.key_padding.defined()
                    ? reshape(causal_softmax(reshape(scores, {B, heads, Lq, Lk}), scale, mask.offset, mask.window,
                                             padding_as_heads()),
                              {BH, Lq, Lk})
                    : causal_softmax(scores, scale, mask.offset, mask.window);
      break;
  }
  if (training && dropout_p > 0)
    weights = reshape(dropout(reshape(weights, {B, heads, Lq, Lk}), dropout_p, training, gen), {BH, Lq, Lk});
  return weights;
}

}  // namespace

namespace {

std::atomic<AttentionKernel> process_attention_kernel{AttentionKernel::Auto};

// Whether `kernel` means the fused op for heads of dh, dv features of q (else the composed attention).
// A call's explicit Fused is strict (unsupported heads are an error); the process-wide choice behind
// Auto takes the fused op only where it supports the heads.
bool use_fused(AttentionKernel kernel, const Tensor& q, int64_t dh, int64_t dv) {
  if (kernel != AttentionKernel::Auto) return kernel == AttentionKernel::Fused;
  // Auto's rule is composed (nn/attention.h); the process's Fused takes the fused op where it can.
  return attention_kernel() == AttentionKernel::Fused && fused_attention_supports(dh, dv, q.dtype(), q.device());
}

// The fused op in `layout` with the mask's pattern and key padding.
Tensor attend_fused(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const AttentionMask& mask,
                    double scale, double dropout_p, bool training, Generator& gen, HeadsLayout layout) {
  AttentionPattern pattern;
  if (mask.kind == AttentionMask::Kind::Causal) pattern = {true, mask.offset, mask.window};
  const Tensor padding = mask.kind == AttentionMask::Kind::None ? Tensor() : mask.key_padding;
  return fused_attention(q, k, v, heads, pattern, padding, scale, dropout_p, training, gen, layout);
}

}  // namespace

void set_attention_kernel(AttentionKernel kernel) { process_attention_kernel = kernel; }
AttentionKernel attention_kernel() { return process_attention_kernel; }

const std::vector<std::string>& attention_kernel_names() {
  static const std::vector<std::string> names = {"auto", "composed", "fused"};
  return names;
}

AttentionKernel parse_attention_kernel(const std::string& name, const std::string& what) {
  if (name == "auto") return AttentionKernel::Auto;
  if (name == "composed") return AttentionKernel::Composed;
  if (name == "fused") return AttentionKernel::Fused;
  SRU_FAIL(what, ": '", name, "' is not an attention kernel (auto, composed or fused)");
}

Tensor attend_heads(const Tensor& qh, const Tensor& kh, const Tensor& vh, int64_t heads, const AttentionMask& mask,
                    double scale, double dropout_p, bool training, Generator& gen, AttentionKernel kernel) {
  SRU_CHECK(qh.dim() == 3 && kh.dim() == 3 && vh.dim() == 3 && qh.size(0) == kh.size(0) && kh.size(0) == vh.size(0) &&
                qh.size(2) == kh.size(2) && kh.size(1) == vh.size(1) && heads > 0 && qh.size(0) % heads == 0,
            "attention: expected q (B*H, Lq, dh), k (B*H, Lk, dh), v (B*H, Lk, dv) with H = ", heads, ", got q ",
            shape_str(qh.shape()), ", k ", shape_str(kh.shape()), ", v ", shape_str(vh.shape()));
  if (use_fused(kernel, qh, qh.size(2), vh.size(2)))
    return attend_fused(qh, kh, vh, heads, mask, scale, dropout_p, training, gen, HeadsLayout::HeadMajor);
  const Tensor scores = bmm(qh, kh, false, true);  // (B*H, Lq, Lk)
  return bmm(attention_weights(scores, heads, mask, scale, dropout_p, training, gen), vh);
}

// ---- key/value cache ----

namespace {

// Slot indices [first, first + n) of a ring of `capacity` slots, wrapped, as an I64 tensor.
Tensor ring_slots(int64_t first, int64_t n, int64_t capacity, Device device) {
  std::vector<int64_t> slots(n);
  for (int64_t i = 0; i < n; ++i) slots[i] = (first + i) % capacity;
  return Tensor::from_vector(slots, {n}).to(device);
}

// buffer[:, slot, :] = rows[:, 0, :] for buffer (N, capacity, d), rows (N, 1, d): one index_copy_ along
// dim 1 with the one-element index {slot} on the buffer's device. The cache carries no history (the
// step's attention reads the buffer as it is), so both go in detached: the buffer's storage is written
// in place, and an evaluation under grad mode writes as it did before.
void write_slot(const Tensor& buffer, int64_t slot, const Tensor& rows) {
  Tensor dst = buffer.detach();
  index_copy_(dst, 1, Tensor::from_vector(std::vector<int64_t>{slot}, {1}).to(buffer.device()), rows.detach());
}

// A fresh (B*H, capacity, dh) buffer whose first rows are `rows` (B*H, n, dh); the rest zero.
Tensor buffer_with(const Tensor& rows, int64_t capacity) {
  const int64_t n = rows.size(1);
  if (n == capacity) return rows.clone();
  return concat({rows, Tensor::zeros({rows.size(0), capacity - n, rows.size(2)}, rows.dtype(), rows.device())}, 1);
}

}  // namespace

std::pair<Tensor, Tensor> KeyValueCache::ordered() const {
  if (length == 0 || !keys.defined()) return {Tensor(), Tensor()};
  if (start + length <= capacity()) {
    if (start == 0 && length == capacity()) return {keys, values};
    return {slice(keys, 1, start, start + length), slice(values, 1, start, start + length)};
  }
  const Tensor slots = ring_slots(start, length, capacity(), keys.device());
  return {index_select(keys, 1, slots), index_select(values, 1, slots)};
}

void KeyValueCache::assign(const Tensor& kh, const Tensor& vh) {
  SRU_CHECK(kh.dim() == 3 && vh.dim() == 3 && kh.size(0) == vh.size(0) && kh.size(1) == vh.size(1),
            "key/value cache: expected keys and values (B*H, n, dh), got ", shape_str(kh.shape()), " and ",
            shape_str(vh.shape()));
  // The last rows (bounded) or all of them, in a fresh buffer starting at slot 0.
  const int64_t total = kh.size(1), keep = max_length >= 0 ? std::min(max_length, total) : total;
  const int64_t cap = max_length >= 0 ? max_length + 1 : std::max<int64_t>(16, 2 * keep);
  keys = buffer_with(slice(kh, 1, total - keep, total), cap);
  values = buffer_with(slice(vh, 1, total - keep, total), cap);
  start = 0;
  length = keep;
}

void KeyValueCache::reorder(const Tensor& rows, int64_t heads) {
  if (!keys.defined()) return;
  const int64_t BH = keys.size(0), B = BH / heads, cap = keys.size(1), dh = keys.size(2);
  const Tensor index = rows.to(keys.device());
  const int64_t B2 = index.numel();
  keys = reshape(index_select(keys.view({B, heads * cap * dh}), 0, index), {B2 * heads, cap, dh});
  values = reshape(index_select(values.view({B, heads * cap * dh}), 0, index), {B2 * heads, cap, values.size(2)});
}

// ---- multi-head attention ----

MultiHeadAttention::MultiHeadAttention(const MultiHeadAttentionOptions& o, Generator& gen) : options_(o), gen_(&gen) {
  if (options_.key_size == 0) options_.key_size = o.query_size;
  const int64_t d = o.model_size;
  SRU_CHECK(o.query_size > 0 && d > 0 && o.heads > 0 && d % o.heads == 0,
            "multi-head attention: query_size and model_size must be positive and model_size (", d,
            ") divisible by the heads (", o.heads, "), got query_size ", o.query_size);
  query = register_module(o.names.query, std::make_shared<Linear>(o.query_size, d, o.bias, o.dtype, gen));
  if (o.keys_from_queries) {
    key_value = register_module(o.names.key_value, std::make_shared<Linear>(d, 2 * d, false, o.dtype, gen));
  } else {
    key = register_module(o.names.key, std::make_shared<Linear>(options_.key_size, d, o.bias, o.dtype, gen));
    value = register_module(o.names.value, std::make_shared<Linear>(options_.key_size, d, o.bias, o.dtype, gen));
  }
  if (o.output_size > 0)
    output = register_module(o.names.output, std::make_shared<Linear>(d, o.output_size, o.bias, o.dtype, gen));
}

Tensor MultiHeadAttention::project_queries(const Tensor& x) const {
  SRU_CHECK(x.defined() && x.dim() == 3 && x.size(2) == options_.query_size, "multi-head attention: queries must be (L, B, ",
            options_.query_size, "), got ", x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  return query->forward(x);
}

std::pair<Tensor, Tensor> MultiHeadAttention::project_keys_values(const Tensor& source) const {
  const int64_t d = options_.model_size, width = options_.keys_from_queries ? d : options_.key_size;
  SRU_CHECK(source.defined() && source.dim() == 3 && source.size(2) == width, "multi-head attention: the keys' source "
            "must be (L, B, ", width, "), got ", source.defined() ? shape_str(source.shape()) : std::string("undefined"));
  if (!options_.keys_from_queries) return {key->forward(source), value->forward(source)};
  // W_kv's two row blocks are K's and V's weights; slicing the (2d, d) weight costs less than slicing the
  // (L, B, 2d) product.
  const Tensor& w = key_value->weight;
  return {matmul(source, slice(w, 0, 0, d), false, true), matmul(source, slice(w, 0, d, 2 * d), false, true)};
}

Tensor attend_projected(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const AttentionMask& mask,
                        double scale, double dropout_p, bool training, Generator& gen, AttentionKernel kernel) {
  SRU_CHECK(heads > 0 && q.dim() == 3 && k.dim() == 3 && v.dim() == 3 && q.size(1) == k.size(1) &&
                k.size(0) == v.size(0) && k.size(1) == v.size(1) && q.size(2) % heads == 0 && v.size(2) % heads == 0,
            "multi-head attention: expected q (Lq, B, d), k and v (Lk, B, d) with ", heads, " heads, got q ",
            shape_str(q.shape()), ", k ", shape_str(k.shape()), ", v ", shape_str(v.shape()));
  if (use_fused(kernel, q, q.size(2) / heads, v.size(2) / heads))
    return attend_fused(q, k, v, heads, mask, scale, dropout_p, training, gen, HeadsLayout::TimeMajor);
  // attend_heads over split_heads' views, merged back, without the copies: the products read and write
  // the (L, B, H*dh) layout (ops/matmul.h head_scores, head_mix).
  const Tensor weights = attention_weights(head_scores(q, k, heads), heads, mask, scale, dropout_p, training, gen);
  return head_mix(weights, v, heads);
}

Tensor MultiHeadAttention::attend(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask) const {
  const int64_t H = options_.heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(options_.model_size / H));
  return attend_projected(q, k, v, H, mask, scale, options_.attn_dropout, is_training(), *gen_);
}

Tensor MultiHeadAttention::project_output(const Tensor& attended) const {
  return output ? output->forward(attended) : attended;
}

Tensor MultiHeadAttention::forward(const Tensor& x, const Tensor& source, const AttentionMask& mask) const {
  const Tensor q = project_queries(x);
  const auto [k, v] = project_keys_values(source.defined() ? source : options_.keys_from_queries ? q : x);
  return project_output(attend(q, k, v, mask));
}

Tensor MultiHeadAttention::attend_incremental(const Tensor& q, const Tensor& source, KeyValueCache& cache,
                                              int64_t window, const Tensor& cache_source) const {
  const int64_t H = options_.heads, L = q.size(0), B = q.size(1), dh = options_.model_size / H;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  const auto [k_new, v_new] = project_keys_values(source);
  const Tensor qh = split_heads(q, H), kh = split_heads(k_new, H), vh = split_heads(v_new, H);
  Tensor kh_cache = kh, vh_cache = vh;
  if (cache_source.defined()) {
    const auto [kc, vc] = project_keys_values(cache_source);
    kh_cache = split_heads(kc, H);
    vh_cache = split_heads(vc, H);
  }
  SRU_CHECK(!cache.keys.defined() || cache.keys.size(0) == B * H, "multi-head attention: the cache holds ",
            cache.keys.size(0) / H, " batch rows, the queries ", B);
  const int64_t bound = cache.max_length;
  // One position, nothing to leave out: write its row into a free slot and attend over every slot (the
  // order of keys does not matter), so the step costs the same however many tokens came before.
  const bool single_step = L == 1 && !cache_source.defined() && (window < 0 || window >= std::max<int64_t>(cache.length, bound));
  if (single_step) {
    int64_t cap = cache.capacity();
    if (cache.length + 1 > cap) {
      // Grow (bounded caches start at their full max_length + 1 slots; unbounded ones double).
      const int64_t new_cap = bound >= 0 ? bound + 1 : std::max<int64_t>(16, 2 * cap);
      const auto [ok, ov] = cache.ordered();
      cache.keys = ok.defined() ? buffer_with(ok, new_cap) : Tensor::zeros({B * H, new_cap, dh}, q.dtype(), q.device());
      cache.values = ov.defined() ? buffer_with(ov, new_cap)
                                  : Tensor::zeros({B * H, new_cap, vh.size(2)}, q.dtype(), q.device());
      cache.start = 0;
      cap = new_cap;
    }
    const int64_t slot = (cache.start + cache.length) % cap;
    write_slot(cache.keys, slot, kh);
    write_slot(cache.values, slot, vh);
    const int64_t visible = cache.length + 1;
    // Before the ring wraps the valid slots are [0, visible): the causal pattern of the one query at
    // offset visible - 1 hides the rest, with no mask tensor. Once full, every slot is valid.
    const int64_t offset = visible == cap ? cap - 1 : cache.start + cache.length;
    const Tensor attended = attend_heads(qh, cache.keys, cache.values, H, AttentionMask::causal(offset), scale);
    if (bound >= 0 && visible > bound) {
      cache.start = (cache.start + 1) % cap;
      cache.length = bound;
    } else {
      cache.length = visible;
    }
    return merge_heads(attended, H);
  }
  // Several positions (a prompt, an evaluation chunk): keys [cached rows in time order | new rows], causal.
  const auto [ok, ov] = cache.ordered();
  const int64_t n = cache.length;
  const Tensor keys = ok.defined() ? concat({ok, kh}, 1) : kh, values = ov.defined() ? concat({ov, vh}, 1) : vh;
  const Tensor attended = attend_heads(qh, keys, values, H, AttentionMask::causal(n, window), scale);
  cache.assign(ok.defined() ? concat({ok, kh_cache}, 1) : kh_cache, ov.defined() ? concat({ov, vh_cache}, 1) : vh_cache);
  return merge_heads(attended, H);
}

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
  const Tensor x_proj = linear->forward_relu(x), y_proj = linear->forward_relu(y);
  // One head: batch-first (B, L, d) is already attend_heads' (B*H, L, dh) layout.
  return attend_heads(x_proj, y_proj, y, 1, y_mask.defined() ? AttentionMask::padding(y_mask) : AttentionMask::none(),
                      1.0);
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
