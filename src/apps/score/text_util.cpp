#include "apps/score/text_util.h"

namespace era::score {
namespace {

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool in(char32_t c, char32_t lo, char32_t hi) { return c >= lo && c <= hi; }

// The lowercase of one code point (0 = "not a simple mapping", handled by the caller).
char32_t lower_cp(char32_t c) {
  if (in(c, 'A', 'Z')) return c + 32;
  if (c < 0x80) return c;
  if (in(c, 0xC0, 0xDE) && c != 0xD7) return c + 32;                      // Latin-1
  if (in(c, 0x100, 0x12F) || in(c, 0x132, 0x137) || in(c, 0x14A, 0x177))  // Latin Ext-A pairs
    return (c % 2 == 0) ? c + 1 : c;
  if (in(c, 0x139, 0x148) || in(c, 0x179, 0x17E)) return (c % 2 == 1) ? c + 1 : c;
  if (c == 0x178) return 0xFF;
  if (c == 0x386) return 0x3AC;  // Greek
  if (in(c, 0x388, 0x38A)) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (in(c, 0x38E, 0x38F)) return c + 63;
  if (in(c, 0x391, 0x3A1) || in(c, 0x3A3, 0x3AB)) return c + 32;
  if (in(c, 0x400, 0x40F)) return c + 80;  // Cyrillic
  if (in(c, 0x410, 0x42F)) return c + 32;
  if (in(c, 0x460, 0x481) || in(c, 0x48A, 0x4BF) || in(c, 0x4D0, 0x52F)) return (c % 2 == 0) ? c + 1 : c;
  if (in(c, 0x531, 0x556)) return c + 48;                                               // Armenian
  if (in(c, 0x1E00, 0x1E95) || in(c, 0x1EA0, 0x1EFF)) return (c % 2 == 0) ? c + 1 : c;  // Latin Ext Additional
  if (in(c, 0xFF21, 0xFF3A)) return c + 32;                                             // fullwidth A-Z
  return c;
}

}  // namespace

CodePoint decode_utf8(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  auto cont = [&](size_t k) { return i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80; };
  auto bits = [&](size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(s[i + k]) & 0x3F); };
  if (b < 0x80) return {b, 1};
  if ((b & 0xE0) == 0xC0 && b >= 0xC2 && cont(1)) return {(static_cast<char32_t>(b & 0x1F) << 6) | bits(1), 2};
  if ((b & 0xF0) == 0xE0 && cont(1) && cont(2)) {
    const char32_t c = (static_cast<char32_t>(b & 0x0F) << 12) | (bits(1) << 6) | bits(2);
    if (c >= 0x800) return {c, 3};
  }
  if ((b & 0xF8) == 0xF0 && cont(1) && cont(2) && cont(3)) {
    const char32_t c = (static_cast<char32_t>(b & 0x07) << 18) | (bits(1) << 12) | (bits(2) << 6) | bits(3);
    if (c >= 0x10000 && c <= 0x10FFFF) return {c, 4};
  }
  return {b, 1};
}

bool py_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool py_isdigit_re(char32_t c) {
  static const char32_t zeros[] = {0x30,   0x660,  0x6F0,  0x7C0,  0x966,  0x9E6,  0xA66,  0xAE6,  0xB66,
                                   0xBE6,  0xC66,  0xCE6,  0xD66,  0xDE6,  0xE50,  0xED0,  0xF20,  0x1040,
                                   0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90, 0x1B50, 0x1BB0,
                                   0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xAA50, 0xABF0, 0xFF10};
  for (const char32_t z : zeros)
    if (c >= z && c <= z + 9) return true;
  return false;
}

bool py_isword_re(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  if (py_isspace(c)) return false;
  // Not-\w ranges of the covered blocks, from Python 3.11's re (unassigned code points merged in).
  static const char32_t not_word[][2] = {
      {0x80, 0xA9},     {0xAB, 0xB1},     {0xB4, 0xB4},       {0xB6, 0xB8},      {0xBB, 0xBB},     {0xBF, 0xBF},
      {0xD7, 0xD7},     {0xF7, 0xF7},     {0x2C2, 0x2C5},     {0x2D2, 0x2DF},    {0x2E5, 0x2EB},   {0x2ED, 0x2ED},
      {0x2EF, 0x36F},   {0x2000, 0x206F}, {0x207A, 0x207E},   {0x208A, 0x208E},  {0x20A0, 0x2101}, {0x2103, 0x2106},
      {0x2108, 0x2109}, {0x2114, 0x2114}, {0x2116, 0x2118},   {0x211E, 0x2123},  {0x2125, 0x2125}, {0x2127, 0x2127},
      {0x2129, 0x2129}, {0x212E, 0x212E}, {0x213A, 0x213B},   {0x2140, 0x2144},  {0x214A, 0x214D}, {0x214F, 0x214F},
      {0x218A, 0x244A}, {0x249C, 0x24E9}, {0x2500, 0x2775},   {0x2794, 0x2BFF},  {0x2E00, 0x2E2E}, {0x2E30, 0x2E7F},
      {0x3000, 0x3004}, {0x3008, 0x3020}, {0x302A, 0x3030},   {0x3036, 0x3037},  {0x303D, 0x303F}, {0x3099, 0x309C},
      {0x30A0, 0x30A0}, {0x30FB, 0x30FB}, {0xFE00, 0xFE6F},   {0xFEFF, 0xFF0F},  {0xFF1A, 0xFF20}, {0xFF3B, 0xFF40},
      {0xFF5B, 0xFF65}, {0xFFE0, 0xFFFF}, {0x1F000, 0x1F0FF}, {0x1F10D, 0x1FAFF}};
  for (const auto& r : not_word)
    if (c >= r[0] && c <= r[1]) return false;
  return true;
}

std::string py_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto cp = decode_utf8(s, i);
    if (cp.length == 1 && cp.value >= 0x80) {
      out += s[i];  // an invalid byte: unchanged
    } else if (cp.value == 0x130) {
      out += "i\xCC\x87";  // 'İ'.lower() == 'i' + U+0307
    } else {
      append_utf8(out, lower_cp(cp.value));
    }
    i += cp.length;
  }
  return out;
}

std::string py_strip(std::string_view s) {
  size_t begin = 0, end = s.size();
  while (begin < end) {
    const auto cp = decode_utf8(s, begin);
    if (!py_isspace(cp.value) || (cp.length == 1 && cp.value >= 0x80)) break;
    begin += cp.length;
  }
  // Walk forward to find the last non-space code point (UTF-8 cannot be decoded backwards safely
  // when it may be invalid).
  size_t last_end = begin;
  for (size_t i = begin; i < end;) {
    const auto cp = decode_utf8(s, i);
    i += cp.length;
    if (!py_isspace(cp.value) || (cp.length == 1 && cp.value >= 0x80)) last_end = i;
  }
  return std::string(s.substr(begin, last_end - begin));
}

std::vector<std::string> py_split(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  for (size_t i = 0; i < s.size();) {
    const auto cp = decode_utf8(s, i);
    const bool space = py_isspace(cp.value) && !(cp.length == 1 && cp.value >= 0x80);
    if (space) {
      if (in_word) out.push_back(cur);
      cur.clear();
      in_word = false;
    } else {
      cur.append(s.substr(i, cp.length));
      in_word = true;
    }
    i += cp.length;
  }
  if (in_word) out.push_back(cur);
  return out;
}

std::vector<std::string> py_split(std::string_view s, std::string_view sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) break;
    out.emplace_back(s.substr(start, pos - start));
    start = pos + sep.size();
  }
  out.emplace_back(s.substr(start));
  return out;
}

std::string py_rstrip(std::string_view s, std::string_view chars) {
  size_t end = s.size();
  while (end > 0 && chars.find(s[end - 1]) != std::string_view::npos) --end;
  return std::string(s.substr(0, end));
}

size_t py_len(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += decode_utf8(s, i).length) ++n;
  return n;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(from, start);
    if (pos == std::string_view::npos) break;
    out.append(s.substr(start, pos - start));
    out.append(to);
    start = pos + from.size();
  }
  out.append(s.substr(start));
  return out;
}

bool contains(std::string_view haystack, std::string_view needle) { return haystack.find(needle) != std::string_view::npos; }

}  // namespace era::score
