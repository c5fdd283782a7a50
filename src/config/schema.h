// A small typed schema for YAML configs: each config struct lists its fields (key, type, default,
// help, limits) once, and that list drives parsing (with file:line and key-path errors, unknown-key
// suggestions), `--set a.b=c` overrides, validation, printing the resolved config, and the key
// reference in docs/configs.md (`srutrain --list-keys`).
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sru::config {

struct Field {
  enum class Kind { Int, Real, Bool, String };
  std::string key;
  Kind kind;
  void* target;  // int64_t*, double*, bool* or std::string*
  std::string help;
  double min = -std::numeric_limits<double>::infinity();  // for Int and Real
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  std::vector<std::string> choices;  // for String, when non-empty
  bool required = false;             // String: must be non-empty
};

struct Section {
  std::string name;  // "" for top-level keys
  std::string help;
  std::vector<Field> fields;
};

// Builders used by the config structs' schema functions.
Field int_field(const std::string& key, int64_t* target, const std::string& help, double min = 0,
                double max = std::numeric_limits<double>::infinity());
Field real_field(const std::string& key, double* target, const std::string& help, double min,
                 double max = std::numeric_limits<double>::infinity(), bool min_exclusive = false);
Field bool_field(const std::string& key, bool* target, const std::string& help);
Field string_field(const std::string& key, std::string* target, const std::string& help,
                   std::vector<std::string> choices = {}, bool required = false);

// Where each key's value came from ("FILE:LINE" or "--set KEY=VALUE"), by key path, for errors.
using Origins = std::map<std::string, std::string>;

// Parses YAML text into the schema's targets. `source` names the text in errors (a file path).
// Throws sru::Error: "FILE:LINE: KEY.PATH: what is wrong". Records each key's origin when given.
void parse_yaml(const std::vector<Section>& schema, const std::string& text, const std::string& source,
                Origins* origins = nullptr);
// Applies one "section.key=value" override (value parsed as a YAML scalar).
void apply_override(const std::vector<Section>& schema, const std::string& assignment, Origins* origins = nullptr);
// Checks every field's limits, choices and required-ness; throws naming the key path, prefixed by
// where the value came from when `origins` knows it.
void validate(const std::vector<Section>& schema, const Origins* origins = nullptr);
// The resolved values as YAML (every key, in schema order).
std::string to_yaml(const std::vector<Section>& schema);
// A Markdown reference of every key: path, type, default (current value), limits, help.
std::string markdown_reference(const std::vector<Section>& schema);

// The closest of `candidates` to `word` by edit distance, if close enough to be a likely typo.
std::optional<std::string> suggest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace sru::config
