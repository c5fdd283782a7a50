// safetensors reader/writer (format summary in safetensors.h).
#include "core/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/file_io.h"

namespace sru::safetensors {

namespace {

// Guards against absurd header sizes in corrupted files before allocating.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

DType parse_dtype(const std::string& tag, const std::string& where) {
  if (tag == "F32") return DType::F32;
  if (tag == "F64") return DType::F64;
  if (tag == "I32") return DType::I32;
  if (tag == "I64") return DType::I64;
  if (tag == "BF16") return DType::BF16;
  if (tag == "F16") return DType::F16;
  SRU_FAIL(where, ": unsupported dtype '", tag, "' (srutrain reads F32, F64, BF16, F16, I32, I64)");
}

}  // namespace

std::string dtype_tag(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
  }
  return "?";
}

const Tensor* File::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

void save(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
          const Metadata& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  // Device tensors are written from host copies.
  std::vector<Tensor> host;
  for (const auto& [name, t] : tensors) host.push_back(t.to(Device::cpu()));
  for (const auto& [name, t] : tensors) {
    SRU_CHECK(name != "__metadata__" && !name.empty(), "safetensors: invalid tensor name '", name, "'");
    SRU_CHECK(!header.contains(name), "safetensors: tensor name '", name, "' appears twice");
    header[name] = {{"dtype", dtype_tag(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  const uint64_t n = text.size();
  unsigned char size_bytes[8];
  for (int i = 0; i < 8; ++i) size_bytes[i] = static_cast<unsigned char>(n >> (8 * i));

  std::vector<std::string_view> chunks{std::string_view(reinterpret_cast<const char*>(size_bytes), 8), text};
  for (const Tensor& t : host) chunks.emplace_back(static_cast<const char*>(t.data_ptr()), t.nbytes());
  write_file_atomically(path, chunks);
}

namespace {

// The header of a safetensors file: its 8-byte size, then that many bytes of JSON (an object); the
// header's size comes back in `header_bytes`.
nlohmann::json read_header(std::istream& in, uint64_t file_size, const std::string& path, uint64_t& header_bytes) {
  SRU_CHECK(file_size >= 8, "'", path, "' is not a safetensors file: only ", file_size, " bytes (truncated?)");
  unsigned char size_bytes[8];
  in.read(reinterpret_cast<char*>(size_bytes), 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(size_bytes[i]) << (8 * i);
  SRU_CHECK(n <= kMaxHeaderBytes && n <= file_size - 8, "'", path, "': header size ", n, " does not fit in a file of ",
            file_size, " bytes (truncated or not a safetensors file)");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  SRU_CHECK(in.good(), "'", path, "': cannot read the ", n, "-byte header");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    SRU_FAIL("'", path, "': the header is not valid JSON (corrupted file?): ", e.what());
  }
  SRU_CHECK(header.is_object(), "'", path, "': the header is not a JSON object");
  header_bytes = n;
  return header;
}

// Where a tensor's bytes lie in the data buffer.
struct Span {
  uint64_t begin, end;
  std::string name;
};

// One header entry's tensor, checked (dtype, shape, byte range inside the data_size data bytes that
// start at data_start) and read; its byte range comes back in `span`.
Tensor read_entry(std::istream& in, const std::string& name, const nlohmann::json& e, const std::string& where,
                  uint64_t data_start, uint64_t data_size, Span& span) {
  SRU_CHECK(e.is_object() && e.contains("dtype") && e.contains("shape") && e.contains("data_offsets"), where,
            ": entry needs dtype, shape and data_offsets");
  // Integers only (a float would be cast out of range), and sizes checked before any product: a
  // shape whose element count overflows must not pass as a small one.
  auto is_count = [](const nlohmann::json& v) { return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0); };
  const auto& shape_json = e.at("shape");
  const auto& offsets = e.at("data_offsets");
  SRU_CHECK(e.at("dtype").is_string(), where, ": dtype must be a string");
  SRU_CHECK(shape_json.is_array() && std::all_of(shape_json.begin(), shape_json.end(), is_count), where,
            ": shape must be a list of non-negative integers, got ", shape_json.dump());
  SRU_CHECK(offsets.is_array() && offsets.size() == 2 && is_count(offsets[0]) && is_count(offsets[1]), where,
            ": data_offsets must be two non-negative integers, got ", offsets.dump());
  const DType dtype = parse_dtype(e.at("dtype").get<std::string>(), where);
  span = Span{offsets[0].get<uint64_t>(), offsets[1].get<uint64_t>(), name};
  SRU_CHECK(span.begin <= span.end && span.end <= data_size, where, ": byte range [", span.begin, ", ", span.end,
            ") lies outside the ", data_size, " data bytes (truncated file?)");
  uint64_t expected = dtype_size(dtype);
  Shape shape;
  for (const auto& d : shape_json) {
    const uint64_t dim = d.get<uint64_t>();
    SRU_CHECK(!__builtin_mul_overflow(expected, dim, &expected) && dim <= (uint64_t{1} << 62), where, ": shape ",
              shape_json.dump(), " holds more bytes than any file");
    shape.push_back(static_cast<int64_t>(dim));
  }
  SRU_CHECK(span.end - span.begin == expected, where, ": ", span.end - span.begin, " bytes for shape ",
            shape_str(shape), " of ", dtype_name(dtype), " (expected ", expected, ")");
  Tensor t = Tensor::empty(shape, dtype);
  in.seekg(static_cast<std::streamoff>(data_start + span.begin));
  in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(expected));
  SRU_CHECK(in.good() || expected == 0, where, ": cannot read its data");
  return t;
}

// Reads and checks a whole safetensors file from `in` (file_size bytes); `path` names it in errors.
File read_file(std::istream& in, uint64_t file_size, const std::string& path) {
  uint64_t n = 0;
  const nlohmann::json header = read_header(in, file_size, path, n);
  const uint64_t data_size = file_size - 8 - n;
  File file;
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      SRU_CHECK(it.value().is_object(), "'", path, "': __metadata__ must be an object of strings");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        SRU_CHECK(m.value().is_string(), "'", path, "': metadata '", m.key(), "' is not a string");
        file.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    Span span{0, 0, {}};
    const Tensor t = read_entry(in, it.key(), it.value(), "'" + path + "', tensor '" + it.key() + "'", 8 + n, data_size, span);
    spans.push_back(span);
    file.tensors.emplace_back(it.key(), t);
  }
  // The data buffer must be covered exactly: no overlaps, no holes.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  uint64_t at = 0;
  for (const Span& s : spans) {
    SRU_CHECK(s.begin == at, "'", path, "': tensor '", s.name, "' starts at byte ", s.begin, ", expected ", at,
              " (overlapping or missing data)");
    at = s.end;
  }
  SRU_CHECK(at == data_size, "'", path, "': ", data_size - at, " trailing bytes after the last tensor");
  return file;
}

}  // namespace

File load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SRU_CHECK(in.good(), "cannot open checkpoint '", path, "'");
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  return read_file(in, file_size, path);
}

File parse(const std::string& bytes, const std::string& name) {
  std::istringstream in(bytes);
  return read_file(in, bytes.size(), name);
}

}  // namespace sru::safetensors
