#include "util/utf8.h"

namespace era::utf8 {

Lead lead(unsigned char b) {
  Lead l;
  if (b < 0x80) {
    l.length = 1;
  } else if (b >= 0xC2 && b <= 0xDF) {
    l.length = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    l.length = 3;
    if (b == 0xE0) l.second_lo = 0xA0;
    if (b == 0xED) l.second_hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    l.length = 4;
    if (b == 0xF0) l.second_lo = 0x90;
    if (b == 0xF4) l.second_hi = 0x8F;
  }
  return l;
}

namespace {

// How many bytes from s[i] belong to the sequence its lead byte starts, as far as they are valid
// (the maximal subpart; the whole length when the sequence is complete).
size_t valid_prefix(std::string_view s, size_t i, const Lead& l) {
  size_t k = 1;
  while (k < l.length && i + k < s.size()) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    const bool ok = k == 1 ? (c >= l.second_lo && c <= l.second_hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) break;
    ++k;
  }
  return k;
}

}  // namespace

size_t sequence_length(std::string_view s, size_t i) {
  const Lead l = lead(static_cast<unsigned char>(s[i]));
  if (l.length == 0) return 0;
  return valid_prefix(s, i, l) == l.length ? l.length : 0;
}

std::string lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const Lead l = lead(static_cast<unsigned char>(bytes[i]));
    const size_t k = l.length ? valid_prefix(bytes, i, l) : 1;
    if (l.length && k == l.length) {
      out.append(bytes.substr(i, k));
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += k;
  }
  return out;
}

size_t incomplete_tail(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t i = n - back;
    const Lead l = lead(static_cast<unsigned char>(s[i]));
    if (l.length == 0) {
      if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;  // a continuation byte
      return n;
    }
    return back < l.length && valid_prefix(s, i, l) == back ? i : n;
  }
  return n;
}

}  // namespace era::utf8
