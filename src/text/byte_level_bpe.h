#pragma once
// Internal header. The byte-level BPE tokenizer of a Hugging Face `tokenizer.json` (Qwen2 and
// Qwen2.5, GPT-2 style): ids identical to the `tokenizers` library's
// `encode(text, add_special_tokens=False)` and texts identical to its `decode`.
//
// What it reads, and refuses otherwise with the file and the field named:
//   added_tokens   content / id / special / lstrip / rstrip / single_word / normalized, matched
//                  leftmost-longest in the raw text (normalized=false) or in the normalised text
//                  (normalized=true), as the library's AddedVocabulary does;
//   normalizer     null, NFC, NFKC, NFD, NFKD, or a Sequence of them (ICU's Normalizer2);
//   pre_tokenizer  ByteLevel (with or without GPT-2's regex), or a Sequence of Split(Regex,
//                  Isolated | Removed) and ByteLevel;
//   model          BPE over byte-level symbols (merges as "a b" strings or [a, b] pairs,
//                  ignore_merges, no dropout, no unk/byte fallback, no subword prefix/suffix);
//                  every id (model.vocab's and added_tokens') below the number of tokens the two
//                  lists hold together, and one text per id, checked before any table by id is
//                  sized (an id of 10^9 in a small file would otherwise cost gigabytes);
//   decoder        ByteLevel.
// The split pattern runs in ICU's regular expressions, which know the Unicode properties the
// patterns use (\p{L}, \p{N}) and whose \s is Unicode White_Space as Oniguruma's (the library's
// engine) is: U+000B, U+0085, U+3000 included (the reference cases have each). Each search runs
// under a budget of backtracking work that grows with the text (byte_level_bpe.cpp, RegexBudget):
// a pattern that backtracks without end on a run of one character ("(a+)+$") is refused when the
// file loads; on any other text it stops and that text is refused.
// post_processor is not applied: era builds prompts with the chat template, as transformers'
// apply_chat_template does (add_special_tokens=False).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace era {

class ByteLevelBpe {
 public:
  // Throws era::Error(kBundle) naming `path` and the field at fault.
  static ByteLevelBpe from_file(const std::string& path);
  // `json_text`: the whole tokenizer.json; `source` names it in errors.
  static ByteLevelBpe from_json_text(const std::string& json_text, const std::string& source);
  ~ByteLevelBpe();
  ByteLevelBpe(ByteLevelBpe&&) noexcept;
  ByteLevelBpe& operator=(ByteLevelBpe&&) noexcept;

  // Ids of `text` (UTF-8), added and special tokens recognised in it. Throws era::Error(kPrompt)
  // when `text` is not valid UTF-8, naming the byte offset, or when a split pattern exceeds its
  // budget on it (catastrophic backtracking), naming the file, the pattern's field and the text.
  std::vector<int64_t> encode(const std::string& text) const;

  // Text of `ids`, special added tokens left out when `skip_special`; byte sequences that are not
  // UTF-8 (a token cut inside a character) become U+FFFD, as the library's lossy decode does.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special) const;
  // As decode, for text that is still growing: a character cut at the end (a valid start of a
  // sequence, not yet complete) stays as its raw first bytes, so a streamer can hold them back
  // until the rest arrives; everything before it is exactly what decode gives.
  std::string decode_growing(const std::vector<int64_t>& ids, bool skip_special) const;
  // The token spelled by `id` as stored (byte-level symbols, or the added token's text).
  std::string piece(int64_t id) const;

  // The id of a token spelled exactly `token` (an added token or a vocabulary entry).
  std::optional<int64_t> token_id(const std::string& token) const;
  bool is_special(int64_t id) const;  // an added token marked special
  int64_t size() const;               // 1 + the largest id

 private:
  std::string decode_bytes(const std::vector<int64_t>& ids, bool skip_special) const;
  struct Impl;
  explicit ByteLevelBpe(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace era
