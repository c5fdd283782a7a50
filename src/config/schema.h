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
  enum class Kind { Int, Real, Bool, String, StringList, IntList };
  std::string key;
  Kind kind;
  void* target;  // int64_t*, double*, bool*, std::string*, std::vector<std::string>* or std::vector<int64_t>*
  std::string help;
  double min = -std::numeric_limits<double>::infinity();  // for Int and Real, and each item of IntList
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  bool max_exclusive = false;
  std::vector<std::string> choices;  // for String, when non-empty
  bool required = false;             // String: must be non-empty
  std::string owner;                 // "" = every run; else the plug-in it belongs to, e.g. "task classify"
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
                 double max = std::numeric_limits<double>::infinity(), bool min_exclusive = false,
                 bool max_exclusive = false);
Field bool_field(const std::string& key, bool* target, const std::string& help);
Field string_field(const std::string& key, std::string* target, const std::string& help,
                   std::vector<std::string> choices = {}, bool required = false);
// A list of strings: in YAML a sequence (`[a, b]` or one item per line) or one string; with --set
// `KEY=[a, b]` or `KEY=a,b` (items trimmed, quotes optional; `KEY=` or `KEY=[]` empties it).
Field string_list_field(const std::string& key, std::vector<std::string>* target, const std::string& help);
// A list of integers, each within [min, max], written as string_list_field's lists are.
Field int_list_field(const std::string& key, std::vector<int64_t>* target, const std::string& help, double min = 0,
                     double max = std::numeric_limits<double>::infinity());

// Where each key's value came from ("FILE:LINE" or "--set KEY=VALUE"), by key path, for errors.
using Origins = std::map<std::string, std::string>;

// A key that was renamed: its old path still reads (configs written before, stored run directories),
// each old value translated to the new key's, with a warning naming the new key.
struct RenamedKey {
  std::string old_path, new_path;
  std::vector<std::pair<std::string, std::string>> values;  // old value -> new value
};

// How parse_yaml and apply_override treat a key the schema lacks.
struct KeyPolicy {
  // The plug-in that owns the key path instead ("task classify"), or "" when no plug-in does: the
  // error then says the key does not apply rather than that it is unknown.
  std::function<std::string(const std::string& path)> owner_elsewhere;
  // Skip keys another plug-in owns instead of refusing them (configs stored by older versions
  // listed every plug-in's keys). Never applies to --set.
  bool skip_foreign = false;
  std::vector<RenamedKey> renamed;
};

// Parses YAML text into the schema's targets. `source` names the text in errors (a file path).
// Throws sru::Error: "FILE:LINE: KEY.PATH: what is wrong". Records each key's origin when given.
void parse_yaml(const std::vector<Section>& schema, const std::string& text, const std::string& source,
                Origins* origins = nullptr, const KeyPolicy& policy = {});
// Applies one "section.key=value" override (value parsed as a YAML scalar).
void apply_override(const std::vector<Section>& schema, const std::string& assignment, Origins* origins = nullptr,
                    const KeyPolicy& policy = {});
// The value a key path ("task", "model.type") gets from `overrides` (the last one wins) or else from the
// YAML text, with where it came from; nullopt when neither sets it. Reads before the full schema is
// known, so that the schema can depend on it.
struct Peeked {
  std::string value, origin;
};
std::optional<Peeked> peek_key(const std::string& text, const std::string& source, const std::string& path,
                               const std::vector<std::string>& overrides);
// Refuses a value outside `choices`: "ORIGIN: PATH: 'v' is not one of: a, b (did you mean 'a'?)".
void check_choice(const std::string& where_and_path, const std::string& value, const std::vector<std::string>& choices);
[[noreturn]] void refuse_choice(const std::string& where_and_path, const std::string& value,
                                const std::vector<std::string>& choices);
// The entry of a registry-like list whose `name` is `name`, else refuse_choice with every entry's name.
template <typename Entry>
const Entry& find_named(const std::vector<Entry>& entries, const std::string& name, const std::string& where_and_path) {
  std::vector<std::string> names;
  for (const Entry& e : entries) {
    if (e.name == name) return e;
    names.push_back(e.name);
  }
  refuse_choice(where_and_path, name, names);
}
// Sections with equal names joined into one (fields in order of appearance), top-level ("") first.
std::vector<Section> merge_sections(std::vector<Section> sections);
// Sets every field's owner (for the reference and for errors).
std::vector<Section> owned_by(std::vector<Section> sections, const std::string& owner);
// Checks every field's limits, choices and required-ness; throws naming the key path, prefixed by
// where the value came from when `origins` knows it.
void validate(const std::vector<Section>& schema, const Origins* origins = nullptr);
// The resolved values as YAML (every key, in schema order).
std::string to_yaml(const std::vector<Section>& schema);
// A Markdown reference of every key: path, type, default (current value), limits, help. Keys every run
// has (owner "") come first, by section; then one table per (owner, help) of `owners`, in that order.
std::string markdown_reference(const std::vector<Section>& schema,
                               const std::vector<std::pair<std::string, std::string>>& owners = {});

// The closest of `candidates` to `word` by edit distance, if close enough to be a likely typo.
std::optional<std::string> suggest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace sru::config
