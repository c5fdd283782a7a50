// The encoder-decoder model (see nn/encoder_decoder.h): tied embeddings, encoding, teacher-forced
// decoding and step-by-step decoding through the decoder's typed state.
#include "nn/encoder_decoder.h"

#include <cmath>

#include "autograd/node.h"
#include "nn/transformer.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/shape_ops.h"

namespace sru::nn {

EncoderDecoder::EncoderDecoder(const EncoderDecoderOptions& o,
                               const std::function<std::shared_ptr<SequenceEncoder>(Generator&)>& make_encoder,
                               const DecoderSpec& decoder, const DecoderArgs& decoder_args, Generator& gen)
    : dropout_(o.dropout), gen_(&gen) {
  const int64_t V = o.vocab_size, w = o.width;
  SRU_CHECK(V > 0 && w > 0, "encoder-decoder: vocabulary and width must be positive, got ", V, " and ", w);
  embedding_ = register_module("embedding", std::make_shared<Embedding>(V, w, o.padding_id, DType::F32, gen));
  // fairseq's initialisation of tied Transformer embeddings: N(0, 1/w), the padding row 0.
  {
    autograd::NoGradGuard no_grad;
    embedding_->weight.copy_(Tensor::randn({V, w}, DType::F32, gen) * (1.0 / std::sqrt(static_cast<double>(w))));
    embedding_->weight.narrow0(o.padding_id, 1).zero_();
  }
  encoder_ = register_module("encoder", make_encoder(gen));
  decoder_ = register_module("decoder", decoder.build(decoder_args, gen));
  output_ = register_module("output", std::make_shared<Linear>(w, V, true, DType::F32, gen));
  output_->bias.zero_();
  output_->tie_weight(embedding_->weight);
}

Tensor EncoderDecoder::encode(const Tensor& source, const Tensor& source_pad) const {
  const Tensor ids = source.to(device());
  EncoderStatePtr no_state;
  return encoder_->forward_sequence({embedding_->forward(ids), source_pad, ids}, no_state);
}

Tensor EncoderDecoder::embed_target(const Tensor& ids, int64_t start) const {
  return dropout(scaled_with_positions(embedding_->forward(ids), start), dropout_, is_training(), *gen_, 1);
}

Tensor EncoderDecoder::project(const Tensor& h) const { return output_->forward(reshape(h, {-1, h.size(2)})); }

Tensor EncoderDecoder::decode(const Tensor& target_in, const Tensor& target_pad, const Tensor& memory,
                              const Tensor& source_pad) const {
  const Device device = this->device();
  const Tensor h = embed_target(target_in.to(device), 0);
  const Tensor self_pad = transpose(target_pad.to(device), 0, 1), memory_pad = transpose(source_pad.to(device), 0, 1);
  return project(decoder_->forward(h, self_pad, memory, memory_pad));
}

EncoderDecoder::DecoderState EncoderDecoder::start_decoding(const Tensor& memory, const Tensor& source_pad) const {
  DecoderState state;
  state.decoder = decoder_->start_decoding(memory, transpose(source_pad.to(memory.device()), 0, 1));
  return state;
}

Tensor EncoderDecoder::decode_step(const std::vector<int64_t>& tokens, DecoderState& state) const {
  const int64_t N = static_cast<int64_t>(tokens.size());
  const Tensor x = embed_target(Tensor::from_vector(tokens, {1, N}).to(device()), state.position);
  ++state.position;
  return project(decoder_->forward_step(x, *state.decoder));
}

void EncoderDecoder::reorder(DecoderState& state, const std::vector<int64_t>& rows) const {
  state.decoder->reorder(Tensor::from_vector(rows, {static_cast<int64_t>(rows.size())}));
}

}  // namespace sru::nn
