// A small synthetic translation corpus (a word-for-word "translation" of generated sentences) and the
// config of a tiny Transformer translating it, for the translate task's tests.
#pragma once

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "testing.h"

namespace sru::testing {

// n sentences of 2-7 words and their word-by-word mapping.
inline std::pair<std::string, std::string> corpus(int n, uint32_t seed) {
  const std::vector<std::string> words = {"the", "a", "man", "dog", "runs", "sits", "on", "red", "big", "park"};
  std::mt19937 rng(seed);
  std::string en, de;
  for (int i = 0; i < n; ++i) {
    const int len = 2 + static_cast<int>(rng() % 6);
    for (int w = 0; w < len; ++w) {
      const std::string& word = words[rng() % words.size()];
      if (w) {
        en += ' ';
        de += ' ';
      }
      en += word;
      de += "x" + word + "n";
    }
    en += "\n";
    de += "\n";
  }
  return {en, de};
}

inline config::Config tiny_translate(const std::string& tag, const std::vector<std::string>& overrides = {}) {
  const auto [en, de] = corpus(300, 1);
  const auto [ven, vde] = corpus(20, 2);
  const std::string yaml = "task: translate\ndata:\n  path: " + temp_file(tag + ".train.en", en) +
                           "\n  target_path: " + temp_file(tag + ".train.de", de) +
                           "\n  valid_source: " + temp_file(tag + ".valid.en", ven) +
                           "\n  valid_target: " + temp_file(tag + ".valid.de", vde) +
                           "\n  vocab_size: 40\n  max_tokens: 120\n  eval_batch_size: 7\n"
                           "model:\n  type: transformer\n  embedding_size: 16\n  hidden_size: 16\n  num_layers: 2\n"
                           "  num_heads: 2\n  dropout: 0.1\ntrain:\n  seed: 3\n";
  return config::parse_config(yaml, tag + ".yaml", overrides);
}

}  // namespace sru::testing
