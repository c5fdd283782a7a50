// Pretrained word vectors, read for the words of a vocabulary only: the file is streamed and only
// the wanted rows are kept, so a multi-GB file (GoogleNews word2vec, GloVe 840B) costs the memory of
// the vocabulary's vectors. Formats:
//   text       one word and its D values per line, separated by spaces (GloVe: no header; fastText
//              .vec and word2vec text: a first line "count D"). Words may contain spaces (GloVe
//              840B has a few): the last D fields are the vector, the rest is the word.
//   word2vec   binary: a header line "count D", then per word: the word, a space, D little-endian
//              float32 values, and optionally a newline.
// Containers: plain, .gz, .zip (first member). "auto" picks word2vec for names ending in .bin.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace sru::data {

struct WordVectors {
  int64_t dim = 0;
  int64_t rows_read = 0;  // rows in the file (all of them, wanted or not)
  std::unordered_map<std::string, std::vector<float>> vectors;  // the wanted words found
};

// Reads the vectors of the `wanted` words (the first row wins when a word repeats). format: auto |
// text | word2vec. With unit_normalise each kept vector is scaled to L2 norm 1 (zero vectors stay 0).
// Throws sru::Error naming the file and line for malformed input.
WordVectors load_word_vectors(const std::string& path, const std::unordered_set<std::string>& wanted,
                              const std::string& format = "auto", bool unit_normalise = false);

}  // namespace sru::data
