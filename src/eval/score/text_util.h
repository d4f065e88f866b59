#pragma once
// Python `str` semantics the official scorers rely on, over UTF-8 bytes: lower(), strip(), split()
// with no arguments, len() in code points, and `\d` of Python's `re` for str patterns.
//
// Coverage (documented limits): lower() maps ASCII, Latin-1, Latin Extended-A, Latin Extended
// Additional, Greek, Cyrillic, Armenian and fullwidth Latin letters (and U+0130 to "i̇" as Python
// does); Greek final-sigma context rules and other scripts' case pairs are not applied. Unicode
// whitespace and decimal digits follow Python for every range that occurs in practice (see .cpp).
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

}  // namespace era::score
