// The encoder registry: the one list of sequence encoders that model.type may name.
#include "nn/encoder.h"

#include "nn/embed_sru.h"
#include "nn/lstm.h"
#include "nn/sru.h"
#include "nn/srupp.h"
#include "nn/transformer_encoder.h"

namespace sru::nn {

const std::vector<EncoderSpec>& encoders() {
  static const std::vector<EncoderSpec> list = {
      sru_encoder(),
      lstm_encoder(),
      embed_sru_encoder(),
      super_embed_sru_encoder(),
      srupp_encoder(),
      transformer_encoder(),
  };
  return list;
}

const EncoderSpec& find_encoder(const std::string& name) { return config::find_named(encoders(), name, "model.type"); }

}  // namespace sru::nn
