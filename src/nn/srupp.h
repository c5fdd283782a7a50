// SRU++ (Lei 2021, "When Attention Meets Fast Recurrence"): the SRU whose input projection U comes from
// self-attention, with the options and parameter names of the reference implementation
// (asappresearch/sru, 3.0 development branch: classes SRUpp, SRUppCell, SRUppAttention,
// SRUppProjectedLinear), so a checkpoint's encoder tensors map onto its state_dict. Per layer i with
// input size n_in, d per direction, out = D*d, d' = proj_size, k = 3 when n_in == out else 4:
//
//   Q = W1 x                                   (L, B, d')     transform_module.linear1.weight (d', n_in)
//   [K | V] = W2 Z, Z = W1 [memory | x]        (M+L, B, 2d')  transform_module.linear2.weight (2d', d')
//   A = softmax(Q K^T / sqrt(d'/H) + causal mask) V, per head (H heads of d'/H features)
//   U = W3 dropout(LN(Q + alpha A))            (L, B, out*k)  transform_module.linear3.weight (out*k, d')
//                                                             transform_module.alpha (1), starts at
//                                                             rezero_init_alpha (0)
//                                                             transform_module.layer_norm.{weight,bias}
//                                                             (d') with attn_layer_norm
//   h, c = the SRU recurrence on U (ops/sru_recurrence), x the skip input: weight_c (2*out) ~
//   U(+-weight_c_init), bias (2*out) = [0 | highway_bias], scale_x (1) buffer, the layer's own
//   layer_norm.{weight,bias} with layer_norm (on x before the transform, or on h with normalize_after).
//
// Layers without attention (attention_every_n_layers / attention_last_n_layers) use SRUppProjectedLinear:
// U = W2 dropout(LN(W1 x)) (transform_module.linear1.weight (d', n_in), .linear2.weight (out*k, d')).
// With proj_input_to_hidden_first and input_size != out, input_to_hidden.weight (out, input_size) maps the
// input to the layers' width first. Names are prefixed rnn_lst.{i}. as the reference's ModuleList.
// Initialisation as the reference's reset_parameters: W1, W2, W3 Xavier-uniform, the last projection
// scaled by sqrt(1 - p) with p the dropout before it (proj_dropout, or dropout when that is -1); alpha
// rezero_init_alpha, 0 by default, so a new layer is an SRU with the factorised projection W3 W1.
//
// Attention masks: causal (the default; language models) lets query i see keys up to its own position;
// causal: false lets every query see the whole sequence (bidirectional encoders). Both run through the
// fused causal_softmax op (ops/masked_softmax.h: the mask computed from indices, the scale folded in).
// A padding mask (mask_pad) additionally hides padded keys (through masked_softmax).
//
// Memory (Transformer-XL style, for language models): with memory_length M > 0 every attention layer
// keeps the last M of its inputs (detached) in the carried state and attends to them as extra keys and
// values, so a model sees beyond the unroll window. Training lets each query see the whole memory plus
// the segment up to itself (the reference's training mask); in evaluation with same_length each query
// sees exactly M earlier positions (the reference's evaluation mask), which also makes evaluation
// independent of how a stream is cut into chunks. The carried state in training is a SruppState: c
// (layers, B, out) and the memory (M', B, n_in) of each attention layer in order (M' <= M; none when
// M = 0); null means zeros and no memory. In evaluation with a memory it is a SruppCacheState instead:
// c and the key/value cache (nn/attention.h KeyValueCache: K and V (B*H, M + 1, d'/H), rings whose
// start and length move together) of each attention layer: a generated token then costs one projected
// row and attention over M cached rows, not a projection of all M + 1 inputs. A training state given to
// an evaluating encoder is projected into a cache on the way in.
// With the layer's pre-norm the memory rows are normalised as the current ones (normalize_memory, the
// default: a segmented stream computes what the whole stream does); normalize_memory false is the
// reference's convention (only the current segment is normalised), so its checkpoints evaluate as there.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "nn/attention.h"
#include "nn/encoder.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace sru::nn {

struct SRUppOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;                 // d, per direction
  int64_t num_layers = 2;
  double dropout = 0.0;                    // on h (all layers but the last); and before U's last projection
  double proj_dropout = -1.0;              // before U's last projection instead (-1 = dropout, the reference)
  bool bidirectional = false;
  int64_t proj_size = 0;                   // d'; 0 = hidden_size / 4 (the reference's base ratio)
  int64_t num_heads = 1;
  double attn_dropout = 0.0;               // on the attention weights
  double rezero_init_alpha = 0.0;          // alpha's initial value (the reference's rezero_init_alpha)
  int64_t attention_every_n_layers = 1;    // attention in layers i with (i + 1) % n == 0
  int64_t attention_last_n_layers = -1;    // >= 0: attention only in the last n layers instead
  bool attn_layer_norm = true;             // LN(Q + alpha A) (LN(W1 x) in layers without attention)
  bool layer_norm = false;                 // the layer's own layer norm
  bool normalize_after = false;            // ... on h instead of on the layer's input
  double highway_bias = -2.0;
  bool rescale = false;
  bool proj_input_to_hidden_first = false;
  double weight_c_init = 1.0;
  int64_t memory_length = 0;               // M: earlier inputs each attention layer keeps (0 = none)
  bool same_length = true;                 // evaluation: each query sees exactly M earlier positions
  bool normalize_memory = true;            // pre-norm (layer_norm) also on the memory rows (false: the reference's)
  bool causal = true;
  DType dtype = DType::F32;
};

// What an attention transform needs besides its input: the memory of earlier inputs (M, B, n_in) or
// undefined, a key padding mask (B, 1, 1, M + L) or undefined, and the causal pattern.
// In evaluation with a memory the layer decodes incrementally instead: `cache` holds the projected keys
// and values of the last M positions (nn/attention.h), so a new token costs one projected row plus
// attention over the cache; `cache_input` (the reference's convention, normalize_memory false) are the
// raw inputs whose projections the cache keeps when the attention itself reads normalised ones.
struct AttentionContext {
  Tensor memory;
  Tensor key_padding;
  bool causal = true;
  int64_t window = -1;  // earlier positions a query sees (-1 = all)
  KeyValueCache* cache = nullptr;
  Tensor cache_input;
};

// Computes U (L, B, out*k) from a layer's input.
class SRUppTransform : public Module {
 public:
  virtual Tensor forward(const Tensor& x, const AttentionContext& context) const = 0;
  virtual bool attends() const = 0;
};

class SRUppAttention : public SRUppTransform {
 public:
  SRUppAttention(int64_t in_features, int64_t out_features, int64_t proj_features, const SRUppOptions& options,
                 Generator& gen);
  Tensor forward(const Tensor& x, const AttentionContext& context) const override;
  bool attends() const override { return true; }
  void reset_parameters(Generator& gen);
  // Fills `cache` with the keys and values of `memory` (M, B, n_in), the inputs this transform reads.
  void prime_cache(const Tensor& memory, KeyValueCache& cache) const;

  int64_t num_heads;
  double dropout, attn_dropout, init_alpha;
  Tensor alpha;
  // Q = W1 x and [K | V] = W2 Q: the shared multi-head attention module, its projections named linear1
  // and linear2 as the reference (registered without a prefix of its own, so the names stay
  // transform_module.linear1.weight, ...); linear1 and linear2 alias its projections.
  std::shared_ptr<MultiHeadAttention> attention;
  std::shared_ptr<Linear> linear1, linear2, linear3;
  std::shared_ptr<LayerNorm> layer_norm;

 private:
  Generator* gen_;
};

class SRUppProjectedLinear : public SRUppTransform {
 public:
  SRUppProjectedLinear(int64_t in_features, int64_t out_features, int64_t proj_features, const SRUppOptions& options,
                       Generator& gen);
  Tensor forward(const Tensor& x, const AttentionContext& context) const override;
  bool attends() const override { return false; }
  void reset_parameters(Generator& gen);

  double dropout;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<LayerNorm> layer_norm;

 private:
  Generator* gen_;
};

class SRUppLayer : public Module {
 public:
  SRUppLayer(int64_t input_size, const SRUppOptions& options, bool attention, double dropout, Generator& gen);
  // x (L, B, n_in), c0 (B, out) or undefined, mask_pad (L, B) or undefined -> (h (L, B, out), c (B, out)).
  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& c0, const Tensor& mask_pad,
                                    const AttentionContext& context) const;
  void reset_parameters();
  // Decoding from a training state: the cache of this (attention) layer's raw memory inputs (M, B, n_in).
  void prime_cache(const Tensor& memory, KeyValueCache& cache) const;

  int64_t input_size, output_size, k;
  double dropout;  // on h inside the recurrence
  SRUppOptions options;
  Tensor weight_c, bias, scale_x;
  std::shared_ptr<SRUppTransform> transform_module;
  std::shared_ptr<LayerNorm> layer_norm;

 private:
  Generator* gen_;
};

// SRU++'s carried state in training (and in evaluation without a memory): c (layers, B, out) and the raw
// memory (M', B, n_in) of each attention layer (none without a memory).
struct SruppState : BatchAtDim1State<SruppState> {
  Tensor c;
  std::vector<Tensor> memories;
  template <typename F>
  void each(F&& f) {
    f(c);
    for (Tensor& m : memories) f(m);
  }
};

// In evaluation with a memory: c and each attention layer's key/value cache (heads: the attention's,
// for reordering the caches' (B*H, ...) rows). The next step writes its rows into the caches' buffers
// in place (a ring); reordered() copies them.
struct SruppCacheState : EncoderState {
  Tensor c;
  std::vector<KeyValueCache> caches;
  int64_t heads = 1;
  EncoderStatePtr reordered(const Tensor& rows) const override;
  EncoderStatePtr on(Device device) const override;
  EncoderStatePtr detached() const override;
  std::vector<Tensor> tensors() const override;  // refused: a decoding cache is not checkpointed
};

class SRUpp : public SequenceEncoder {
 public:
  explicit SRUpp(const SRUppOptions& options, Generator& gen = default_generator());
  // The encoder interface; state as in the header comment.
  Tensor forward_sequence(const EncoderInput& input, EncoderStatePtr& state) const override;
  EncoderStatePtr state_from(const std::vector<Tensor>& tensors) const override;
  int64_t output_size() const override { return layers.back()->output_size; }
  int64_t directions() const override { return options.bidirectional ? 2 : 1; }
  // Chunks equal the whole stream in evaluation only with a memory and same_length (each query then sees
  // exactly M earlier positions); without a memory attention sees the current chunk alone, and with the
  // reference's memory convention (pre-norm, normalize_memory false) a key is normalised or not depending
  // on whether it came in the current chunk.
  bool streams() const override {
    const bool reference_memory = options.layer_norm && !options.normalize_after && !options.normalize_memory;
    return options.memory_length > 0 && options.same_length && !options.bidirectional && !reference_memory;
  }
  bool accepts_padding() const override { return options.memory_length == 0; }
  int64_t attention_layers() const;

  SRUppOptions options;
  std::vector<std::shared_ptr<SRUppLayer>> layers;
  std::shared_ptr<Linear> input_to_hidden;
};

// The dropout before U's last projection: proj_dropout, or dropout when proj_dropout is -1.
double srupp_proj_dropout(const SRUppOptions& options);

// Whether layer i (0-based) of a stack of `options.num_layers` has attention.
bool srupp_layer_attends(const SRUppOptions& options, int64_t i);

// The registry entry "srupp": its keys are the SRUppOptions above other than the sizes, dropout and
// bidirectional, which every encoder takes from the model section.
EncoderSpec srupp_encoder();

}  // namespace sru::nn
