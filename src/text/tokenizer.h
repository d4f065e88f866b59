#pragma once
// The tokenizer of a bundle, by its file: tokenizer.model is SentencePiece (the LLaMA family:
// BPE, byte fallback, dummy prefix); tokenizer.json is Hugging Face's byte-level BPE (the Qwen2
// family, text/byte_level_bpe.h).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace era {

class SentencePieceBackend;
class ByteLevelBpe;

class Tokenizer {
 public:
  // Loads a tokenizer.model (SentencePiece) or a *.json (byte-level BPE) file; throws
  // era::Error(kBundle) naming the file (and for JSON the field) on failure.
  // `vocab_size` is the model's vocabulary (it may be larger than the SentencePiece model: ids
  // beyond it are added tokens such as <image> and <pad>, which decoding skips).
  explicit Tokenizer(const std::string& model_path);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Plain encoding of `text`, no BOS/EOS added: SentencePiece with its dummy prefix; byte-level
  // BPE with its added tokens (<image>, <|im_start|>...) recognised in the text.
  std::vector<int64_t> encode(const std::string& text) const;

  // Text of `ids` with special tokens skipped, as HF's `decode(skip_special_tokens=True)`: BOS /
  // EOS / UNK / control and added tokens for SentencePiece, special added tokens for BPE.
  std::string decode(const std::vector<int64_t>& ids) const;
  // As decode, but for text streamed as it grows: a byte-level token sequence that ends inside a
  // character keeps that character's first bytes raw (decode would give U+FFFD), so the streamer
  // can hold them back until the character is complete (ByteLevelBpe::decode_growing).
  std::string decode_growing(const std::vector<int64_t>& ids) const;

  int64_t bos_id() const;  // -1 where the tokenizer has none (byte-level BPE)
  int64_t eos_id() const;  // -1 likewise: the manifest's stop ids say when a BPE model stops
  int64_t size() const;    // pieces in the SentencePiece model; 1 + the largest BPE id
  std::string piece(int64_t id) const;
  // The id of a token spelled `token`: BPE's added token or vocabulary entry, SentencePiece's piece
  // (a scan of the pieces: for loading, not for every request).
  std::optional<int64_t> token_id(const std::string& token) const;
  bool byte_level() const { return bpe_ != nullptr; }

 private:
  bool is_special(int64_t id) const;
  std::unique_ptr<SentencePieceBackend> sp_;
  std::unique_ptr<ByteLevelBpe> bpe_;
};

}  // namespace era
