// Fuzz target: safetensors files (header, tensors, metadata) and the srutrain checkpoint metadata read
// from them (train::read_checkpoint: format, version, stored config, progress fields).
#include "core/safetensors.h"
#include "fuzz_support.h"
#include "train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  sru::fuzz::expect_only_sru_errors([&] {
    sru::safetensors::File file = sru::safetensors::parse(bytes, "fuzz.safetensors");
    // An accepted tensor's bytes came from the input: more would mean its shape and size disagree.
    for (const auto& [name, t] : file.tensors)
      if (static_cast<size_t>(t.nbytes()) > bytes.size()) std::abort();
    (void)sru::train::read_checkpoint(std::move(file), "fuzz.safetensors");
  });
  return 0;
}
