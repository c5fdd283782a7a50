// Unicode for text that must be handled exactly as Python 3 handles it (the official SQuAD metric
// is a Python script): UTF-8 decoding, str.lower() (full mapping, including the final sigma),
// str.isspace() (what str.split() splits on), re's Unicode \w, and the letter/mark classes the
// SQuAD tokenizer uses. The tables are generated from Python's own Unicode database by
// scripts/gen_unicode_tables.py (unicode_version() says which), so no locale is involved.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sru::data::unicode {

// A code point decoded from UTF-8, or kInvalid for a byte that starts no well-formed sequence
// (such a byte is passed through unchanged by the functions below, and is no letter, digit or space).
inline constexpr char32_t kInvalid = 0xFFFFFFFF;
struct Decoded {
  char32_t code_point;
  int length;  // bytes consumed, >= 1
};
Decoded decode_utf8(std::string_view text, size_t pos);
void append_utf8(std::string& out, char32_t code_point);

bool is_python_word(char32_t c);     // re's \w on str: str.isalnum() or '_'
bool is_python_space(char32_t c);    // str.isspace(): U+0009-000D, U+001C-0020, U+0085, U+00A0, U+2000-200A, ...
bool is_letter_or_mark(char32_t c);  // general category L*, M*, Nd or Nl
const char* unicode_version();       // of the tables, e.g. "14.0.0"

// Python's str.lower(): every code point's full lower-case mapping (U+0130 becomes "i" + U+0307),
// and U+03A3 becomes final sigma U+03C2 after a cased letter and not before one (Final_Sigma).
std::string python_lower(std::string_view text);

// The byte offset of code point `index` of `text` (index == number of code points gives text.size()),
// or -1 when text has fewer code points. Python str indices count code points, as SQuAD's answer_start does.
int64_t byte_offset_of_code_point(std::string_view text, int64_t index);

}  // namespace sru::data::unicode
