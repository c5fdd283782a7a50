// The decoder registry: the one list of decoders that model.decoder may name.
#include "nn/decoder.h"

#include "config/schema.h"
#include "nn/transformer_decoder.h"

namespace sru::nn {

const std::vector<DecoderSpec>& decoders() {
  static const std::vector<DecoderSpec> list = {
      transformer_decoder(),
      ssru_transformer_decoder(),
  };
  return list;
}

const DecoderSpec& find_decoder(const std::string& name) {
  return config::find_named(decoders(), name, "model.decoder");
}

std::vector<std::string> decoder_names() {
  std::vector<std::string> names;
  for (const DecoderSpec& d : decoders()) names.push_back(d.name);
  return names;
}

}  // namespace sru::nn
