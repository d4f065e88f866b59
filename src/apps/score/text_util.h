#pragma once
// Python `str` semantics the official scorers rely on, over UTF-8 bytes: lower(), strip(), split()
// with no arguments, len() in code points, and `\d` of Python's `re` for str patterns.
//
// Coverage (documented limits): lower() maps ASCII, Latin-1, Latin Extended-A, Latin Extended
// Additional, Greek, Cyrillic, Armenian and fullwidth Latin letters (and U+0130 to "i̇" as Python
// does); Greek final-sigma context rules and other scripts' case pairs are not applied. Unicode
// whitespace and decimal digits follow Python for every range that occurs in practice (see .cpp);
// `\w` covers the blocks listed at py_isword_re.
// Bytes that are not valid UTF-8 pass through unchanged and count as one code point each.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace era::score {

std::string py_lower(std::string_view s);
// str.strip() / str.split() with no argument: Unicode whitespace.
std::string py_strip(std::string_view s);
std::vector<std::string> py_split(std::string_view s);
// str.split(sep) with an explicit, non-empty separator (empty fields kept).
std::vector<std::string> py_split(std::string_view s, std::string_view sep);
// str.rstrip(chars)
std::string py_rstrip(std::string_view s, std::string_view chars);
// len(str): number of code points.
size_t py_len(std::string_view s);
// str.replace(old, new) for a non-empty `from`.
std::string replace_all(std::string_view s, std::string_view from, std::string_view to);
bool contains(std::string_view haystack, std::string_view needle);

// One decoded code point starting at s[i]: its value and byte length (invalid bytes: value = the
// byte, length 1).
struct CodePoint {
  char32_t value;
  size_t length;
};
CodePoint decode_utf8(std::string_view s, size_t i);
bool py_isspace(char32_t c);
bool py_isdigit_re(char32_t c);  // Python re's \d (Unicode category Nd)
// Python re's \w for str patterns (str.isalnum() or '_'), which decides its \b. Exact (Python
// 3.11, Unicode 14) for ASCII, Latin-1, the spacing modifiers and combining diacritics
// (U+02B0-036F), U+2000-2BFF (punctuation, super/subscripts, currency, letterlike, arrows, math,
// box drawing, shapes, dingbats), U+2E00-2E7F, U+3000-30FF (CJK symbols and punctuation, kana),
// U+FE00-FFFF (variation selectors, vertical/small forms, fullwidth) and U+1F000-1FAFF (emoji and
// other symbols), plus every Unicode space; any other non-ASCII code point counts as a word
// character (other scripts' punctuation and combining marks, which Python does not count, too).
bool py_isword_re(char32_t c);

}  // namespace era::score
