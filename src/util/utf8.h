#pragma once
// UTF-8 as Unicode defines it (Table 3-7, well-formed byte sequences), in one place: the checks of
// question files and prompts, and the byte-level tokenizer's lossy decoding.
#include <cstddef>
#include <string>
#include <string_view>

namespace era::utf8 {

// What a lead byte starts: the sequence length (0 for a byte that starts none: a continuation
// byte, C0, C1, F5..FF) and the range its second byte must lie in.
struct Lead {
  size_t length = 0;
  unsigned char second_lo = 0x80, second_hi = 0xBF;
};
Lead lead(unsigned char byte);

// Length of the well-formed sequence at s[i] (1..4), or 0 when none starts there.
size_t sequence_length(std::string_view s, size_t i);

// Rust's String::from_utf8_lossy (and so Hugging Face tokenizers' decode): each maximal prefix of
// a sequence that breaks off, and each byte that starts none, becomes one U+FFFD.
std::string lossy(std::string_view bytes);

// Where a trailing sequence that is well-formed so far but not complete starts, or s.size().
size_t incomplete_tail(std::string_view s);

}  // namespace era::utf8
