#pragma once
// SentencePiece tokenizer of a bundle (LLaMA-style: BPE, byte fallback, dummy prefix).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace era {

class SentencePieceBackend;

class Tokenizer {
 public:
  // Loads a tokenizer.model file; throws era::Error(kBundle) naming the file on failure.
  // `vocab_size` is the model's vocabulary (it may be larger than the SentencePiece model: ids
  // beyond it are added tokens such as <image> and <pad>, which decoding skips).
  explicit Tokenizer(const std::string& model_path);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Plain SentencePiece encoding of `text` (dummy prefix applied, no BOS/EOS).
  std::vector<int64_t> encode(const std::string& text) const;

  // Text of `ids` with special tokens (BOS/EOS/UNK/control and added tokens) skipped, as HF's
  // `decode(skip_special_tokens=True)` of the slow LLaMA tokenizer.
  std::string decode(const std::vector<int64_t>& ids) const;

  int64_t bos_id() const;
  int64_t eos_id() const;
  int64_t size() const;  // pieces in the SentencePiece model
  std::string piece(int64_t id) const;

 private:
  bool is_special(int64_t id) const;
  std::unique_ptr<SentencePieceBackend> sp_;
};

}  // namespace era
