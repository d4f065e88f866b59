#include "text/tokenizer.h"

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "era/error.h"
#include "text/sentencepiece_backend.h"
#include "text/shim_paths.h"

namespace era {
namespace {

namespace fs = std::filesystem;

constexpr const char* kShimName = "libera_sentencepiece.so";

// Where the shim may be: $ERA_SENTENCEPIECE_SHIM, next to (or one or two levels around) the
// binary holding this code, then the build and install locations known at configure time.
std::vector<fs::path> shim_candidates() {
  std::vector<fs::path> out;
  if (const char* env = std::getenv("ERA_SENTENCEPIECE_SHIM")) out.emplace_back(env);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&shim_candidates), &info) && info.dli_fname) {
    const fs::path here = fs::absolute(info.dli_fname).parent_path();
    for (const auto& dir : {here, here.parent_path(), here.parent_path() / "lib", here / "era", here.parent_path() / "lib" / "era"}) {
      out.push_back(dir / kShimName);
    }
  }
  out.push_back(fs::path(ERA_SHIM_BUILD_DIR) / kShimName);
  out.push_back(fs::path(ERA_SHIM_INSTALL_DIR) / kShimName);
  return out;
}

CreateSentencePieceBackendFn load_shim() {
  static std::once_flag once;
  static CreateSentencePieceBackendFn create = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    std::string tried;
    for (const auto& path : shim_candidates()) {
      if (!fs::exists(path)) {
        tried += " " + path.string();
        continue;
      }
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (!handle) {
        failure = std::string("cannot load ") + path.string() + ": " + dlerror();
        return;
      }
      create = reinterpret_cast<CreateSentencePieceBackendFn>(dlsym(handle, kCreateSentencePieceBackendSymbol));
      if (!create) failure = path.string() + " does not export " + kCreateSentencePieceBackendSymbol;
      return;
    }
    failure = std::string(kShimName) + " not found (set ERA_SENTENCEPIECE_SHIM); looked at" + tried;
  });
  if (!create) throw Error(ErrorCode::kBundle, "SentencePiece is unavailable: " + failure);
  return create;
}

}  // namespace

Tokenizer::Tokenizer(const std::string& model_path) {
  if (!std::ifstream(model_path).good()) {
    throw Error(ErrorCode::kBundle, "tokenizer model not found: " + model_path);
  }
  std::string error;
  sp_.reset(load_shim()(model_path.c_str(), &error));
  if (!sp_) throw Error(ErrorCode::kBundle, "cannot load tokenizer model " + model_path + ": " + error);
}

Tokenizer::~Tokenizer() = default;

std::vector<int64_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  std::string error;
  if (!sp_->encode(text, &ids, &error)) throw Error(ErrorCode::kPrompt, "cannot tokenize prompt: " + error);
  return {ids.begin(), ids.end()};
}

bool Tokenizer::is_special(int64_t id) const {
  if (id < 0 || id >= size()) return true;  // added tokens (<image>, <pad>) and out-of-range ids
  const int i = static_cast<int>(id);
  return sp_->is_control(i) || sp_->is_unknown(i);
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> kept;
  kept.reserve(ids.size());
  for (const int64_t id : ids) {
    if (!is_special(id)) kept.push_back(static_cast<int>(id));
  }
  std::string text, error;
  if (!sp_->decode(kept, &text, &error)) throw Error(ErrorCode::kRuntime, "cannot decode tokens: " + error);
  return text;
}

int64_t Tokenizer::bos_id() const { return sp_->bos_id(); }
int64_t Tokenizer::eos_id() const { return sp_->eos_id(); }
int64_t Tokenizer::size() const { return sp_->piece_size(); }
std::string Tokenizer::piece(int64_t id) const {
  return (id >= 0 && id < size()) ? sp_->id_to_piece(static_cast<int>(id)) : "<added:" + std::to_string(id) + ">";
}

}  // namespace era
