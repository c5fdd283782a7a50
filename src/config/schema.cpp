// YAML parsing, overrides, validation and printing driven by the config schema.
#include "config/schema.h"

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"

namespace sru::config {

Field int_field(const std::string& key, int64_t* target, const std::string& help, double min, double max) {
  Field f{key, Field::Kind::Int, target, help};
  f.min = min;
  f.max = max;
  return f;
}

Field real_field(const std::string& key, double* target, const std::string& help, double min, double max,
                 bool min_exclusive, bool max_exclusive) {
  Field f{key, Field::Kind::Real, target, help};
  f.min = min;
  f.max = max;
  f.min_exclusive = min_exclusive;
  f.max_exclusive = max_exclusive;
  return f;
}

Field bool_field(const std::string& key, bool* target, const std::string& help) {
  return Field{key, Field::Kind::Bool, target, help};
}

Field string_field(const std::string& key, std::string* target, const std::string& help,
                   std::vector<std::string> choices, bool required) {
  Field f{key, Field::Kind::String, target, help};
  f.choices = std::move(choices);
  f.required = required;
  return f;
}

Field string_list_field(const std::string& key, std::vector<std::string>* target, const std::string& help) {
  return Field{key, Field::Kind::StringList, target, help};
}

Field int_list_field(const std::string& key, std::vector<int64_t>* target, const std::string& help, double min,
                     double max) {
  Field f{key, Field::Kind::IntList, target, help};
  f.min = min;
  f.max = max;
  return f;
}

namespace {

std::string path_of(const Section& s, const Field& f) { return s.name.empty() ? f.key : s.name + "." + f.key; }

std::string where(const std::string& source, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.line < 0) return source;
  return source + ":" + std::to_string(mark.line + 1);
}

const char* kind_name(Field::Kind k) {
  switch (k) {
    case Field::Kind::Int: return "an integer";
    case Field::Kind::Real: return "a number";
    case Field::Kind::Bool: return "true or false";
    case Field::Kind::String: return "a string";
    case Field::Kind::StringList: return "a list of strings";
    case Field::Kind::IntList: return "a list of integers";
  }
  return "?";
}

// An integer from a YAML scalar's text, or the error "AT: PATH: expected an integer, got 'TEXT'".
int64_t integer_of(const YAML::Node& value, const std::string& at, const std::string& path) {
  const std::string text = value.Scalar();
  double v = 0;
  try {
    v = value.as<double>();
  } catch (const YAML::Exception&) {
    SRU_FAIL(at, ": ", path, ": expected an integer, got '", text, "'");
  }
  SRU_CHECK(std::floor(v) == v && std::abs(v) < 9e15, at, ": ", path, ": expected an integer, got '", text, "'");
  return static_cast<int64_t>(v);
}

// Where an item of a list value is: its own line when the value came from a file (`source`), else the
// list's place (`at`: an override's text).
std::string item_at(const std::string& at, const std::string& source, const YAML::Node& item) {
  return source.empty() ? at : where(source, item);
}

// A list field's items (a YAML sequence, or one scalar as a list of one), each checked to be a scalar.
std::vector<YAML::Node> list_items(const Field& f, const YAML::Node& value, const std::string& at,
                                   const std::string& path, const std::string& source) {
  std::vector<YAML::Node> items;
  if (value.IsNull()) return items;
  if (value.IsScalar()) return {value};
  SRU_CHECK(value.IsSequence(), at, ": ", path, ": expected ", kind_name(f.kind), ", got a mapping");
  for (const YAML::Node& item : value) {
    SRU_CHECK(item.IsScalar(), item_at(at, source, item), ": ", path, ": every item must be ",
              f.kind == Field::Kind::IntList ? "an integer" : "a string", ", got a ",
              item.IsMap() ? "mapping" : item.IsSequence() ? "list" : "null value");
    items.push_back(item);
  }
  return items;
}

// Stores a YAML node into the field; `at` prefixes error messages, and a list item's errors name the
// item's own line when the node came from the file `source`.
void assign(const Field& f, const YAML::Node& value, const std::string& at, const std::string& path,
            const std::string& source = {}) {
  if (f.kind == Field::Kind::StringList) {
    auto& list = *static_cast<std::vector<std::string>*>(f.target);
    list.clear();
    for (const YAML::Node& item : list_items(f, value, at, path, source)) list.push_back(item.Scalar());
    return;
  }
  if (f.kind == Field::Kind::IntList) {
    auto& list = *static_cast<std::vector<int64_t>*>(f.target);
    list.clear();
    for (const YAML::Node& item : list_items(f, value, at, path, source))
      list.push_back(integer_of(item, item_at(at, source, item), path));
    return;
  }
  SRU_CHECK(value.IsScalar(), at, ": ", path, ": expected ", kind_name(f.kind), ", got a ",
            value.IsMap() ? "mapping" : value.IsSequence() ? "list" : "null value");
  const std::string text = value.Scalar();
  try {
    switch (f.kind) {
      case Field::Kind::Int: *static_cast<int64_t*>(f.target) = integer_of(value, at, path); return;
      case Field::Kind::Real: *static_cast<double*>(f.target) = value.as<double>(); return;
      case Field::Kind::Bool: *static_cast<bool*>(f.target) = value.as<bool>(); return;
      case Field::Kind::String: *static_cast<std::string*>(f.target) = text; return;
      case Field::Kind::StringList:
      case Field::Kind::IntList: return;  // handled above
    }
  } catch (const YAML::Exception&) {
    SRU_FAIL(at, ": ", path, ": expected ", kind_name(f.kind), ", got '", text, "'");
  }
}

std::string unknown_message(const std::string& what, const std::string& name, const std::vector<std::string>& known) {
  std::string msg = "unknown " + what + " '" + name + "'";
  if (auto s = suggest(name, known)) msg += " (did you mean '" + *s + "'?)";
  return msg;
}

std::vector<std::string> section_names(const std::vector<Section>& schema) {
  std::vector<std::string> names;
  for (const Section& s : schema)
    if (!s.name.empty()) names.push_back(s.name);
  for (const Section& s : schema)
    if (s.name.empty())
      for (const Field& f : s.fields) names.push_back(f.key);
  return names;
}

const Field* find_field(const Section& s, const std::string& key) {
  for (const Field& f : s.fields)
    if (f.key == key) return &f;
  return nullptr;
}

std::vector<std::string> keys_of(const Section& s) {
  std::vector<std::string> keys;
  for (const Field& f : s.fields) keys.push_back(f.key);
  return keys;
}

std::string format_value(const Field& f) {
  std::ostringstream os;
  switch (f.kind) {
    case Field::Kind::Int: os << *static_cast<int64_t*>(f.target); break;
    case Field::Kind::Real: {
      const double v = *static_cast<double*>(f.target);
      os.precision(17);
      os << v;
      if (os.str().find_first_of(".eEni") == std::string::npos) os << ".0";
      break;
    }
    case Field::Kind::Bool: os << (*static_cast<bool*>(f.target) ? "true" : "false"); break;
    case Field::Kind::String: {
      YAML::Emitter e;
      e << YAML::DoubleQuoted << *static_cast<std::string*>(f.target);
      os << e.c_str();
      break;
    }
    case Field::Kind::StringList: {
      YAML::Emitter e;
      e << YAML::Flow << YAML::BeginSeq;
      for (const std::string& item : *static_cast<std::vector<std::string>*>(f.target)) e << YAML::DoubleQuoted << item;
      e << YAML::EndSeq;
      os << e.c_str();
      break;
    }
    case Field::Kind::IntList: {
      os << "[";
      const auto& list = *static_cast<std::vector<int64_t>*>(f.target);
      for (size_t i = 0; i < list.size(); ++i) os << (i ? ", " : "") << list[i];
      os << "]";
      break;
    }
  }
  return os.str();
}

}  // namespace

std::optional<std::string> suggest(const std::string& word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& c : candidates) {
    std::vector<size_t> prev(c.size() + 1), cur(c.size() + 1);
    for (size_t j = 0; j <= c.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= word.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= c.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (word[i - 1] == c[j - 1] ? 0 : 1)});
      std::swap(prev, cur);
    }
    if (prev[c.size()] < best_distance) {
      best_distance = prev[c.size()];
      best = c;
    }
  }
  return best;
}

namespace {

// The error (or, for skip_foreign, nothing) for a key path the schema lacks; `candidates` are the
// schema's paths for the did-you-mean suggestion.
void refuse_unknown_key(const std::string& at, const std::string& path, const std::vector<std::string>& candidates,
                        const KeyPolicy& policy) {
  const std::string owner = policy.owner_elsewhere ? policy.owner_elsewhere(path) : "";
  SRU_CHECK(owner.empty(), at, ": ", path, " does not apply here: it is a key of ", owner,
            " (remove it, or choose that ", owner.substr(0, owner.find(' ')), ")");
  SRU_FAIL(at, ": ", unknown_message("key", path, candidates));
}

bool skipped_as_foreign(const std::string& path, const KeyPolicy& policy) {
  return policy.skip_foreign && policy.owner_elsewhere && !policy.owner_elsewhere(path).empty();
}

// A renamed key's value assigned to its new key (true), or false when `path` was not renamed. `at`
// names where the value came from; the origin recorded for the new key says which old key set it.
bool assign_renamed(const std::vector<Section>& schema, const std::string& path, const YAML::Node& value,
                    const std::string& at, Origins* origins, const KeyPolicy& policy) {
  for (const RenamedKey& r : policy.renamed) {
    if (r.old_path != path) continue;
    SRU_CHECK(value.IsScalar(), at, ": ", path, ": expected a string");
    std::vector<std::string> old_values;
    for (const auto& [from, to] : r.values) {
      old_values.push_back(from);
      if (from != value.Scalar()) continue;
      for (const Section& s : schema)
        for (const Field& f : s.fields)
          if ((s.name.empty() ? f.key : s.name + "." + f.key) == r.new_path) {
            assign(f, YAML::Node(to), at, r.new_path);
            if (origins) (*origins)[r.new_path] = at + " (as " + path + ")";
            spdlog::warn("{}: {} is now {}: '{}' reads as {}={}", at, path, r.new_path, from, r.new_path, to);
            return true;
          }
      SRU_FAIL("renamed key ", path, ": the schema has no key ", r.new_path);
    }
    refuse_choice(at + ": " + path + " (now " + r.new_path + ")", value.Scalar(), old_values);
  }
  return false;
}

// The items of a --set list value: "[a, b]", "a,b" or "a" (each trimmed of spaces and of one pair of
// quotes; YAML would read a leading '*' as an alias, so the text is split here instead).
YAML::Node list_from_override(std::string text) {
  const auto trim = [](std::string s) {
    const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    s = b == std::string::npos ? "" : s.substr(b, e - b + 1);
    if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) s = s.substr(1, s.size() - 2);
    return s;
  };
  text = trim(text);
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  YAML::Node list(YAML::NodeType::Sequence);
  if (trim(text).empty()) return list;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    list.push_back(trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return list;
}

}  // namespace

void parse_yaml(const std::vector<Section>& schema, const std::string& text, const std::string& source,
                Origins* origins, const KeyPolicy& policy) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    SRU_FAIL(source, ":", e.mark.line + 1, ":", e.mark.column + 1, ": malformed YAML: ", e.msg);
  }
  if (root.IsNull()) return;  // an empty file: all defaults
  SRU_CHECK(root.IsMap(), where(source, root), ": the config must be a mapping of sections (task, data, model, ...)");
  for (auto it = root.begin(); it != root.end(); ++it) {
    SRU_CHECK(it->first.IsScalar(), where(source, it->first), ": a key must be a plain name, not a list or mapping");
    const std::string name = it->first.as<std::string>();
    const std::string at = where(source, it->first);
    const Section* section = nullptr;
    const Field* top_field = nullptr;
    for (const Section& s : schema) {
      if (!s.name.empty() && s.name == name) section = &s;
      if (s.name.empty())
        if (const Field* f = find_field(s, name)) top_field = f;
    }
    if (top_field) {
      assign(*top_field, it->second, where(source, it->second), name, source);
      if (origins) (*origins)[name] = where(source, it->second);
      continue;
    }
    SRU_CHECK(section, at, ": ", unknown_message("section", name, section_names(schema)));
    if (it->second.IsNull()) continue;
    SRU_CHECK(it->second.IsMap(), at, ": section '", name, "' must be a mapping of keys");
    for (auto kv = it->second.begin(); kv != it->second.end(); ++kv) {
      SRU_CHECK(kv->first.IsScalar(), where(source, kv->first), ": a key of section '", name,
                "' must be a plain name, not a list or mapping");
      const std::string key = kv->first.as<std::string>(), path = name + "." + key;
      const Field* field = find_field(*section, key);
      if (!field) {
        if (skipped_as_foreign(path, policy)) continue;
        if (assign_renamed(schema, path, kv->second, where(source, kv->second), origins, policy)) continue;
        std::vector<std::string> full;
        for (const std::string& k : keys_of(*section)) full.push_back(name + "." + k);
        refuse_unknown_key(where(source, kv->first), path, full, policy);
      }
      assign(*field, kv->second, where(source, kv->second), path, source);
      if (origins) (*origins)[path] = where(source, kv->second);
    }
  }
}

void apply_override(const std::vector<Section>& schema, const std::string& assignment, Origins* origins,
                    const KeyPolicy& policy) {
  const size_t eq = assignment.find('=');
  SRU_CHECK(eq != std::string::npos && eq > 0, "--set '", assignment, "': expected KEY=VALUE, e.g. train.lr=3e-4");
  const std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  const size_t dot = path.find('.');
  const std::string section_name = dot == std::string::npos ? "" : path.substr(0, dot);
  const std::string key = dot == std::string::npos ? path : path.substr(dot + 1);
  std::vector<std::string> all_paths;
  for (const Section& s : schema)
    for (const Field& f : s.fields) {
      all_paths.push_back(path_of(s, f));
      if (s.name == section_name && f.key == key) {
        YAML::Node value;
        try {
          value = YAML::Load(text);
        } catch (const YAML::Exception&) {
          value = YAML::Node(text);
        }
        if (f.kind == Field::Kind::String) value = YAML::Node(text);  // strings verbatim
        if (f.kind == Field::Kind::StringList || f.kind == Field::Kind::IntList) value = list_from_override(text);
        assign(f, value, "--set " + assignment, path);
        if (origins) (*origins)[path] = "--set " + assignment;
        return;
      }
    }
  if (assign_renamed(schema, path, YAML::Node(text), "--set " + assignment, origins, policy)) return;
  refuse_unknown_key("--set " + assignment, path, all_paths, {policy.owner_elsewhere, false});
}

std::optional<Peeked> peek_key(const std::string& text, const std::string& source, const std::string& path,
                               const std::vector<std::string>& overrides) {
  for (auto it = overrides.rbegin(); it != overrides.rend(); ++it)
    if (it->rfind(path + "=", 0) == 0) return Peeked{it->substr(path.size() + 1), "--set " + *it};
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception&) {
    return std::nullopt;  // parse_yaml reports it with the position
  }
  size_t start = 0;
  while (node.IsMap()) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const YAML::Node child = node[part];
    if (!child) return std::nullopt;
    if (dot == std::string::npos)
      return child.IsScalar() ? std::optional<Peeked>(Peeked{child.Scalar(), where(source, child)}) : std::nullopt;
    node = child;
    start = dot + 1;
  }
  return std::nullopt;
}

void check_choice(const std::string& where_and_path, const std::string& value, const std::vector<std::string>& choices) {
  if (std::find(choices.begin(), choices.end(), value) == choices.end()) refuse_choice(where_and_path, value, choices);
}

void refuse_choice(const std::string& where_and_path, const std::string& value, const std::vector<std::string>& choices) {
  std::string list;
  for (const std::string& c : choices) list += (list.empty() ? "" : ", ") + c;
  std::string msg = where_and_path + ": '" + value + "' is not one of: " + list;
  if (auto sug = suggest(value, choices)) msg += " (did you mean '" + *sug + "'?)";
  SRU_FAIL(msg);
}

std::vector<Section> merge_sections(std::vector<Section> sections) {
  std::vector<Section> out;
  for (Section& s : sections) {
    auto it = std::find_if(out.begin(), out.end(), [&](const Section& o) { return o.name == s.name; });
    if (it == out.end()) {
      out.push_back(std::move(s));
    } else {
      for (Field& f : s.fields) it->fields.push_back(std::move(f));
      if (it->help.empty()) it->help = s.help;
    }
  }
  std::stable_partition(out.begin(), out.end(), [](const Section& s) { return s.name.empty(); });
  return out;
}

std::vector<Section> owned_by(std::vector<Section> sections, const std::string& owner) {
  for (Section& s : sections)
    for (Field& f : s.fields) f.owner = owner;
  return sections;
}

namespace {

// Refuses a value of an Int or Real field (or an item of an IntList) outside the field's limits.
void check_range(const Field& f, const std::string& path, double v) {
  SRU_CHECK(std::isfinite(v), path, ": must be finite, got ", v);
  const bool below = f.min_exclusive ? v <= f.min : v < f.min;
  const bool above = f.max_exclusive ? v >= f.max : v > f.max;
  std::ostringstream limit;
  limit << (f.min_exclusive ? "> " : ">= ") << f.min;
  if (!std::isinf(f.max)) limit << " and " << (f.max_exclusive ? "< " : "<= ") << f.max;
  SRU_CHECK(!below && !above, path, ": ", v, " is out of range: must be ", limit.str(),
            f.kind == Field::Kind::IntList ? " (each item)" : "");
}

}  // namespace

void validate(const std::vector<Section>& schema, const Origins* origins) {
  for (const Section& s : schema)
    for (const Field& f : s.fields) {
      std::string path = path_of(s, f);
      if (origins)
        if (auto it = origins->find(path); it != origins->end()) path = it->second + ": " + path;
      if (f.kind == Field::Kind::Int || f.kind == Field::Kind::Real) {
        check_range(f, path, f.kind == Field::Kind::Int ? static_cast<double>(*static_cast<int64_t*>(f.target))
                                                        : *static_cast<double*>(f.target));
      } else if (f.kind == Field::Kind::IntList) {
        for (const int64_t v : *static_cast<std::vector<int64_t>*>(f.target)) check_range(f, path, static_cast<double>(v));
      } else if (f.kind == Field::Kind::String) {
        const std::string& v = *static_cast<std::string*>(f.target);
        SRU_CHECK(!f.required || !v.empty(), path, ": is required (", f.help, ")");
        if (!f.choices.empty() && !(v.empty() && !f.required)) check_choice(path, v, f.choices);
      }
    }
}

std::string to_yaml(const std::vector<Section>& schema) {
  std::ostringstream os;
  for (const Section& s : schema)
    if (s.name.empty())
      for (const Field& f : s.fields) os << f.key << ": " << format_value(f) << "\n";
  for (const Section& s : schema) {
    if (s.name.empty()) continue;
    os << s.name << ":\n";
    for (const Field& f : s.fields) os << "  " << f.key << ": " << format_value(f) << "\n";
  }
  return os.str();
}

namespace {

void markdown_row(std::ostringstream& os, const Section& s, const Field& f) {
  std::string allowed;
  if (!f.choices.empty()) {
    for (const std::string& c : f.choices) allowed += (allowed.empty() ? "" : ", ") + c;
  } else if (f.kind == Field::Kind::Int || f.kind == Field::Kind::Real || f.kind == Field::Kind::IntList) {
    std::ostringstream r;
    r << (f.min_exclusive ? "> " : ">= ") << f.min;
    if (!std::isinf(f.max)) r << ", " << (f.max_exclusive ? "< " : "<= ") << f.max;
    allowed = std::isinf(f.min) ? "" : (f.kind == Field::Kind::IntList ? "each " : "") + r.str();
  }
  if (f.required) allowed += allowed.empty() ? "required" : "; required";
  const char* type = f.kind == Field::Kind::Int ? "int" : f.kind == Field::Kind::Real ? "real"
                     : f.kind == Field::Kind::Bool ? "bool" : f.kind == Field::Kind::String ? "string"
                     : f.kind == Field::Kind::IntList ? "int list" : "list";
  os << "| `" << path_of(s, f) << "` | " << type << " | `" << format_value(f) << "` | " << allowed << " | " << f.help
     << " |\n";
}

const char* kTableHead = "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n";

}  // namespace

std::string markdown_reference(const std::vector<Section>& schema,
                               const std::vector<std::pair<std::string, std::string>>& owners) {
  std::ostringstream os;
  for (const Section& s : schema) {
    if (std::none_of(s.fields.begin(), s.fields.end(), [](const Field& f) { return f.owner.empty(); })) continue;
    os << "## " << (s.name.empty() ? "Top level" : "`" + s.name + "`") << "\n\n" << s.help << "\n\n" << kTableHead;
    for (const Field& f : s.fields)
      if (f.owner.empty()) markdown_row(os, s, f);
    os << "\n";
  }
  for (const auto& [owner, help] : owners) {
    const size_t space = owner.find(' ');
    const std::string kind = owner.substr(0, space), name = owner.substr(space + 1);
    os << "## " << static_cast<char>(std::toupper(static_cast<unsigned char>(kind[0]))) << kind.substr(1) << " `"
       << name << "`\n\n" << help << "\n\n";
    std::ostringstream rows;
    for (const Section& s : schema)
      for (const Field& f : s.fields)
        if (f.owner == owner) markdown_row(rows, s, f);
    if (rows.str().empty()) {
      os << "No keys of its own.\n\n";
      continue;
    }
    os << "Keys that apply only when `" << (kind == "task" ? "task" : "model.type") << "` is `" << name << "`.\n\n"
       << kTableHead << rows.str() << "\n";
  }
  return os.str();
}

}  // namespace sru::config
