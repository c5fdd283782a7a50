// The encoder-decoder model of the translation task (src/tasks/translate.h): one embedding table shared
// by the source, the target and the output layer (tied), a sequence encoder from the encoder registry
// (nn/encoder.h) and a decoder from the decoder registry (nn/decoder.h).
//
// Names: embedding.weight (V, w), encoder.* (the encoder's), decoder.* (the decoder's), output.weight
// (tied to embedding.weight), output.bias (V). Shapes time-major: source (Ls, B) and target (Lt, B) ids;
// padding masks (L, B), nonzero = padded. The target's embeddings are scaled by sqrt(w) with the
// sinusoidal positions added (nn/transformer.h scaled_with_positions), then dropout.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "nn/decoder.h"
#include "nn/encoder.h"
#include "nn/layers.h"

namespace sru::nn {

struct EncoderDecoderOptions {
  int64_t vocab_size = 0;
  int64_t width = 0;        // the embeddings', encoder's and decoder's width
  int64_t padding_id = 0;   // the embedding row kept at zero
  double dropout = 0.0;     // on the target's embeddings
};

class EncoderDecoder : public Module {
 public:
  // make_encoder is called after the embedding's initialisation, then the decoder is built: the order the
  // generator is drawn in (so a seed gives the weights it always gave).
  EncoderDecoder(const EncoderDecoderOptions& options,
                 const std::function<std::shared_ptr<SequenceEncoder>(Generator&)>& make_encoder,
                 const DecoderSpec& decoder, const DecoderArgs& decoder_args, Generator& gen);
  // source (Ls, B) ids, source_pad (Ls, B) nonzero at padding -> the encoder's output (Ls, B, w).
  Tensor encode(const Tensor& source, const Tensor& source_pad) const;
  // Teacher forcing: target_in (Lt, B) ids (bos first), target_pad (Lt, B) -> logits (Lt * B, V).
  Tensor decode(const Tensor& target_in, const Tensor& target_pad, const Tensor& memory, const Tensor& source_pad) const;

  // Decoding step by step: the decoder's own state and the position reached.
  struct DecoderState {
    std::unique_ptr<nn::DecoderState> decoder;
    int64_t position = 0;
  };
  DecoderState start_decoding(const Tensor& memory, const Tensor& source_pad) const;
  // The next tokens (N) of the N rows -> logits (N, V); advances the state by one position.
  Tensor decode_step(const std::vector<int64_t>& tokens, DecoderState& state) const;
  void reorder(DecoderState& state, const std::vector<int64_t>& rows) const;

  const Decoder& decoder() const { return *decoder_; }

 private:
  Tensor embed_target(const Tensor& ids, int64_t start) const;
  Tensor project(const Tensor& h) const;  // the tied output layer over the decoder's top states

  double dropout_;
  Generator* gen_;
  std::shared_ptr<Embedding> embedding_;
  std::shared_ptr<SequenceEncoder> encoder_;
  std::shared_ptr<Decoder> decoder_;
  std::shared_ptr<Linear> output_;
};

}  // namespace sru::nn
