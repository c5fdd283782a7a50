// UTF-8 decoding and the Python 3 Unicode behaviour the SQuAD metric and tokenizer depend on,
// looked up in the tables of unicode_tables.inc (generated from Python's Unicode database).
#include "data/unicode.h"

#include <algorithm>
#include <iterator>
#include <vector>

namespace sru::data::unicode {

namespace {

struct PropertyRun {
  char32_t first;  // the flags hold from here to the next run's first code point
  uint8_t flags;
};
struct LowerRun {
  char32_t first, last;  // code points first, first + stride, ... <= last map to code point + delta
  int32_t stride, delta;
};
struct LowerExpansion {
  char32_t code_point;
  char32_t lower[3];  // zero-terminated when shorter
};

#include "data/unicode_tables.inc"

enum : uint8_t { kWord = 1, kSpace = 2, kCased = 4, kCaseIgnorable = 8, kLetterOrMark = 16 };

uint8_t flags_of(char32_t c) {
  if (c == kInvalid) return 0;
  const auto it = std::upper_bound(std::begin(kPropertyRuns), std::end(kPropertyRuns), c,
                                   [](char32_t v, const PropertyRun& r) { return v < r.first; });
  return std::prev(it)->flags;  // kPropertyRuns starts at code point 0
}

// Appends the lower-case form of c on its own (the final-sigma context is the caller's).
void append_lower(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c));
    return;
  }
  const auto it = std::upper_bound(std::begin(kLowerRuns), std::end(kLowerRuns), c,
                                   [](char32_t v, const LowerRun& r) { return v < r.first; });
  if (it != std::begin(kLowerRuns)) {
    const LowerRun& run = *std::prev(it);
    if (c <= run.last && (c - run.first) % static_cast<char32_t>(run.stride) == 0) {
      append_utf8(out, static_cast<char32_t>(static_cast<int64_t>(c) + run.delta));
      return;
    }
  }
  for (const LowerExpansion& e : kLowerExpansions)
    if (e.code_point == c) {
      for (char32_t l : e.lower)
        if (l != 0) append_utf8(out, l);
      return;
    }
  append_utf8(out, c);
}

}  // namespace

Decoded decode_utf8(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char b0 = byte(pos);
  if (b0 < 0x80) return {b0, 1};
  int length;
  char32_t c, min;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2, c = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3, c = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4, c = b0 & 0x07, min = 0x10000;
  } else {
    return {kInvalid, 1};
  }
  if (pos + length > text.size()) return {kInvalid, 1};
  for (int i = 1; i < length; ++i) {
    const unsigned char b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return {kInvalid, 1};
    c = (c << 6) | (b & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return {kInvalid, 1};  // overlong, too big, surrogate
  return {c, length};
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

bool is_python_word(char32_t c) { return flags_of(c) & kWord; }
bool is_python_space(char32_t c) { return flags_of(c) & kSpace; }
bool is_letter_or_mark(char32_t c) { return flags_of(c) & kLetterOrMark; }
const char* unicode_version() { return kUnicodeVersion; }

std::string python_lower(std::string_view text) {
  struct Unit {
    char32_t c;
    size_t pos;
    int length;
  };
  std::vector<Unit> units;
  for (size_t pos = 0; pos < text.size();) {
    const Decoded d = decode_utf8(text, pos);
    units.push_back({d.code_point, pos, d.length});
    pos += d.length;
  }
  // Python's Final_Sigma: a cased letter, then case-ignorables, then the sigma, and no case-ignorables
  // followed by a cased letter after it.
  const auto cased_neighbour = [&](size_t i, int step) {
    for (int64_t j = static_cast<int64_t>(i) + step; j >= 0 && j < static_cast<int64_t>(units.size()); j += step) {
      const uint8_t f = flags_of(units[j].c);
      if (!(f & kCaseIgnorable)) return (f & kCased) != 0;
    }
    return false;
  };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < units.size(); ++i) {
    const Unit& u = units[i];
    if (u.c == kInvalid)
      out.append(text.substr(u.pos, u.length));
    else if (u.c == 0x3A3 && cased_neighbour(i, -1) && !cased_neighbour(i, +1))
      append_utf8(out, 0x3C2);
    else
      append_lower(out, u.c);
  }
  return out;
}

int64_t byte_offset_of_code_point(std::string_view text, int64_t index) {
  size_t pos = 0;
  for (int64_t k = 0; k < index; ++k) {
    if (pos >= text.size()) return -1;
    pos += decode_utf8(text, pos).length;
  }
  return static_cast<int64_t>(pos);
}

}  // namespace sru::data::unicode
