#include "text/tokenizer.h"

#include <sentencepiece_processor.h>

#include <fstream>

#include "era/error.h"

namespace era {

Tokenizer::Tokenizer(const std::string& model_path) : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  if (!std::ifstream(model_path).good()) {
    throw Error(ErrorCode::kBundle, "tokenizer model not found: " + model_path);
  }
  const auto status = sp_->Load(model_path);
  if (!status.ok()) {
    throw Error(ErrorCode::kBundle, "cannot load tokenizer model " + model_path + ": " + status.ToString());
  }
}

Tokenizer::~Tokenizer() = default;

std::vector<int64_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) throw Error(ErrorCode::kPrompt, "cannot tokenize prompt: " + status.ToString());
  return {ids.begin(), ids.end()};
}

bool Tokenizer::is_special(int64_t id) const {
  if (id < 0 || id >= size()) return true;  // added tokens (<image>, <pad>) and out-of-range ids
  const int i = static_cast<int>(id);
  return sp_->IsControl(i) || sp_->IsUnknown(i);
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> kept;
  kept.reserve(ids.size());
  for (const int64_t id : ids) {
    if (!is_special(id)) kept.push_back(static_cast<int>(id));
  }
  std::string text;
  const auto status = sp_->Decode(kept, &text);
  if (!status.ok()) throw Error(ErrorCode::kRuntime, "cannot decode tokens: " + status.ToString());
  return text;
}

int64_t Tokenizer::bos_id() const { return sp_->bos_id(); }
int64_t Tokenizer::eos_id() const { return sp_->eos_id(); }
int64_t Tokenizer::size() const { return sp_->GetPieceSize(); }
std::string Tokenizer::piece(int64_t id) const {
  return (id >= 0 && id < size()) ? sp_->IdToPiece(static_cast<int>(id)) : std::string("<added:" + std::to_string(id) + ">");
}

}  // namespace era
