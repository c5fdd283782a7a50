// Reading and writing the safetensors format (https://github.com/huggingface/safetensors):
//   8 bytes: N, the header size, unsigned little-endian
//   N bytes: JSON {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//                  "__metadata__": {"key": "string value", ...}}, padded with spaces
//   the data: each tensor's raw little-endian bytes at [begin, end) relative to the end of the header.
// Writes are atomic: a temporary file in the same directory, fsync, then rename over the target,
// so a crash leaves either the old file or the new one, never a torn one.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace sru::safetensors {

using Metadata = std::map<std::string, std::string>;

struct File {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order of their data
  Metadata metadata;
  const Tensor* find(const std::string& name) const;
};

// Throws sru::Error naming `path` when it cannot write; the previous file, if any, is left intact.
void save(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
          const Metadata& metadata = {});
// Checks the size, header and every entry (dtype, shape vs byte range, ranges inside the file, no
// overlaps or gaps) and throws sru::Error naming the file and what is wrong.
File load(const std::string& path);
// The same checks on a file's bytes held in memory (e.g. sent by another process); `name` in errors.
File parse(const std::string& bytes, const std::string& name);

std::string dtype_tag(DType dtype);  // "F32", "F64", "BF16", "F16", "I32", "I64" (PyTorch's tags)

}  // namespace sru::safetensors
