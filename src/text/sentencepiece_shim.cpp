// libera_sentencepiece.so: SentencePieceBackend on top of libsentencepiece (see
// sentencepiece_backend.h for why this is a separate, deep-bound shared object).
#include <sentencepiece_processor.h>

#include "text/sentencepiece_backend.h"

namespace {

class Backend final : public era::SentencePieceBackend {
 public:
  bool load(const char* path, std::string* error) {
    const auto status = sp_.Load(path);
    if (!status.ok()) *error = status.ToString();
    return status.ok();
  }
  bool encode(const std::string& text, std::vector<int>* ids, std::string* error) const override {
    const auto status = sp_.Encode(text, ids);
    if (!status.ok()) *error = status.ToString();
    return status.ok();
  }
  bool decode(const std::vector<int>& ids, std::string* text, std::string* error) const override {
    const auto status = sp_.Decode(ids, text);
    if (!status.ok()) *error = status.ToString();
    return status.ok();
  }
  int piece_size() const override { return sp_.GetPieceSize(); }
  int bos_id() const override { return sp_.bos_id(); }
  int eos_id() const override { return sp_.eos_id(); }
  bool is_control(int id) const override { return sp_.IsControl(id); }
  bool is_unknown(int id) const override { return sp_.IsUnknown(id); }
  std::string id_to_piece(int id) const override { return sp_.IdToPiece(id); }

 private:
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace

extern "C" __attribute__((visibility("default"))) era::SentencePieceBackend* era_create_sentencepiece_backend(
    const char* model_path, std::string* error) {
  auto backend = new Backend();
  if (!backend->load(model_path, error)) {
    delete backend;
    return nullptr;
  }
  return backend;
}
