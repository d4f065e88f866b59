#pragma once
// The SentencePiece calls the Tokenizer needs, behind an interface implemented in a separate
// shared object (libera_sentencepiece.so, src/text/sentencepiece_shim.cpp).
//
// Why not link libsentencepiece directly: Debian's libsentencepiece.so.0 carries and exports its
// own protobuf-lite 3.14, while LibTorch loads the system libprotobuf 3.21. In one global symbol
// scope one of the two binds to the other's copies: either libprotobuf crashes in its static
// initialisers, or sentencepiece aborts its protobuf version check when loading a model. The
// shim is loaded with dlopen(RTLD_LOCAL | RTLD_DEEPBIND), so sentencepiece resolves its protobuf
// symbols to its own copies and nothing of it enters the global scope.
#include <string>
#include <vector>

namespace era {

class SentencePieceBackend {
 public:
  virtual ~SentencePieceBackend() = default;
  virtual bool encode(const std::string& text, std::vector<int>* ids, std::string* error) const = 0;
  virtual bool decode(const std::vector<int>& ids, std::string* text, std::string* error) const = 0;
  virtual int piece_size() const = 0;
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;
  virtual bool is_control(int id) const = 0;
  virtual bool is_unknown(int id) const = 0;
  virtual std::string id_to_piece(int id) const = 0;
};

// Exported by the shim: a backend for `model_path`, or nullptr with `*error` set.
using CreateSentencePieceBackendFn = SentencePieceBackend* (*)(const char* model_path, std::string* error);
inline constexpr const char* kCreateSentencePieceBackendSymbol = "era_create_sentencepiece_backend";

}  // namespace era
