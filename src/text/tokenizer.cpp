#include "text/tokenizer.h"

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "era/error.h"
#include "era/shim_location.h"
#include "text/byte_level_bpe.h"
#include "text/sentencepiece_backend.h"
#include "text/shim_paths.h"
#include "util/input_file.h"

#if defined(__SANITIZE_ADDRESS__)
#define ERA_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ERA_UNDER_ASAN 1
#endif
#endif
#ifndef ERA_UNDER_ASAN
#define ERA_UNDER_ASAN 0
#endif

namespace era {
namespace {

namespace fs = std::filesystem;

constexpr const char* kShimName = "libera_sentencepiece.so";

// Folders registered by add_sentencepiece_shim_dir (the installed package's location).
std::vector<fs::path>& registered_dirs() {
  static std::vector<fs::path> dirs;
  return dirs;
}
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

// Where the shim may be, first found wins: $ERA_SENTENCEPIECE_SHIM; next to (or one or two
// levels around) the binary holding this code; the folders an installed package registered
// (era/shim_location.h); the install folder configured at build time; the bare name, which
// dlopen looks up in LD_LIBRARY_PATH, the executable's RUNPATH (era.pc adds one) and the
// system folders; last the build folder, so a stale build tree never shadows an install.
std::vector<fs::path> shim_candidates() {
  std::vector<fs::path> out;
  if (const char* env = std::getenv("ERA_SENTENCEPIECE_SHIM"); env && *env) out.emplace_back(env);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&shim_candidates), &info) && info.dli_fname) {
    const fs::path here = fs::absolute(info.dli_fname).parent_path();
    for (const auto& dir :
         {here, here.parent_path(), here.parent_path() / "lib", here / "era", here.parent_path() / "lib" / "era"}) {
      out.push_back(dir / kShimName);
    }
  }
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    for (const auto& dir : registered_dirs()) out.push_back(dir / kShimName);
  }
  out.push_back(fs::path(ERA_SHIM_INSTALL_DIR) / kShimName);
  out.push_back(fs::path(kShimName));  // no slash: dlopen's own search
  out.push_back(fs::path(ERA_SHIM_BUILD_DIR) / kShimName);
  return out;
}

struct LoadedShim {
  CreateSentencePieceBackendFn create = nullptr;
  std::string path;     // the file that was loaded
  std::string failure;  // why none was, when create is null
};

// dlopen(RTLD_LOCAL | RTLD_DEEPBIND), the isolation sentencepiece_backend.h explains.
// AddressSanitizer's dlopen interceptor refuses RTLD_DEEPBIND outright (google/sanitizers#611:
// a deep-bound library may resolve malloc to libc's rather than the sanitizer's). Sanitizer
// builds therefore ask libc's own dlopen, found past the interceptor with RTLD_NEXT; what that
// costs (sentencepiece's raw mallocs go unchecked, ASan's alloc/dealloc-mismatch check must be
// off) is documented with the sanitizer build in tools/sanitize.sh.
#if ERA_UNDER_ASAN
// The pairing above is not a bug: inside the deep-bound sentencepiece, operator new resolves to
// libstdc++'s (malloc underneath) while era's code frees with ASan's operator delete. Built into
// the sanitized binaries themselves so every way of starting them (tests, scripts, a user's
// shell) has it; ASAN_OPTIONS can still override it.
extern "C" const char* __asan_default_options() { return "alloc_dealloc_mismatch=0"; }
#endif

void* open_deep_bound(const char* path) {
  constexpr int kFlags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#if ERA_UNDER_ASAN
  using DlopenFn = void* (*)(const char*, int);
  static const auto libc_dlopen = reinterpret_cast<DlopenFn>(dlsym(RTLD_NEXT, "dlopen"));
  if (libc_dlopen) return libc_dlopen(path, kFlags);
#endif
  return dlopen(path, kFlags);
}

const LoadedShim& load_shim() {
  static std::once_flag once;
  static LoadedShim shim;
  std::call_once(once, [] {
    std::string tried;
    for (const auto& path : shim_candidates()) {
      const bool bare = path == kShimName;
      if (!bare && !fs::exists(path)) {
        tried += " " + path.string();
        continue;
      }
      void* handle = open_deep_bound(path.c_str());
      if (!handle) {
        if (bare) {  // not on the search path: keep looking
          tried += " " + path.string() + " (dlopen search)";
          continue;
        }
        shim.failure = std::string("cannot load ") + path.string() + ": " + dlerror();
        return;
      }
      shim.create = reinterpret_cast<CreateSentencePieceBackendFn>(dlsym(handle, kCreateSentencePieceBackendSymbol));
      if (!shim.create) {
        shim.failure = path.string() + " does not export " + kCreateSentencePieceBackendSymbol;
        return;
      }
      Dl_info where{};
      shim.path = dladdr(reinterpret_cast<void*>(shim.create), &where) && where.dli_fname ? where.dli_fname : path.string();
      return;
    }
    shim.failure = std::string(kShimName) + " not found (set ERA_SENTENCEPIECE_SHIM); looked at" + tried;
  });
  if (!shim.create) throw Error(ErrorCode::kBundle, "SentencePiece is unavailable: " + shim.failure);
  return shim;
}

}  // namespace

void add_sentencepiece_shim_dir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registered_dirs().emplace_back(dir);
}

std::string sentencepiece_shim_path() { return load_shim().path; }

Tokenizer::Tokenizer(const std::string& model_path) {
  if (model_path.size() >= 5 && model_path.compare(model_path.size() - 5, 5, ".json") == 0) {
    bpe_ = std::make_unique<ByteLevelBpe>(ByteLevelBpe::from_file(model_path));
    return;
  }
  // A regular file of sane size: SentencePiece would block forever on a FIFO.
  check_input_file(model_path, "tokenizer model", uint64_t{1} << 30, ErrorCode::kBundle);
  std::string error;
  sp_.reset(load_shim().create(model_path.c_str(), &error));
  if (!sp_) throw Error(ErrorCode::kBundle, "cannot load tokenizer model " + model_path + ": " + error);
}

Tokenizer::~Tokenizer() = default;

std::vector<int64_t> Tokenizer::encode(const std::string& text) const {
  if (bpe_) return bpe_->encode(text);
  std::vector<int> ids;
  std::string error;
  if (!sp_->encode(text, &ids, &error)) throw Error(ErrorCode::kPrompt, "cannot tokenize prompt: " + error);
  return {ids.begin(), ids.end()};
}

bool Tokenizer::is_special(int64_t id) const {
  if (bpe_) return id < 0 || id >= size() || bpe_->is_special(id);
  if (id < 0 || id >= size()) return true;  // added tokens (<image>, <pad>) and out-of-range ids
  const int i = static_cast<int>(id);
  return sp_->is_control(i) || sp_->is_unknown(i);
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  if (bpe_) return bpe_->decode(ids, /*skip_special=*/true);
  std::vector<int> kept;
  kept.reserve(ids.size());
  for (const int64_t id : ids) {
    if (!is_special(id)) kept.push_back(static_cast<int>(id));
  }
  std::string text, error;
  if (!sp_->decode(kept, &text, &error)) throw Error(ErrorCode::kRuntime, "cannot decode tokens: " + error);
  return text;
}

std::string Tokenizer::decode_growing(const std::vector<int64_t>& ids) const {
  if (bpe_) return bpe_->decode_growing(ids, /*skip_special=*/true);
  return decode(ids);  // SentencePiece's byte fallback pieces already come whole
}

int64_t Tokenizer::bos_id() const { return bpe_ ? -1 : sp_->bos_id(); }
int64_t Tokenizer::eos_id() const { return bpe_ ? -1 : sp_->eos_id(); }
int64_t Tokenizer::size() const { return bpe_ ? bpe_->size() : sp_->piece_size(); }
std::string Tokenizer::piece(int64_t id) const {
  if (bpe_) return bpe_->piece(id);
  return (id >= 0 && id < size()) ? sp_->id_to_piece(static_cast<int>(id)) : "<added:" + std::to_string(id) + ">";
}
std::optional<int64_t> Tokenizer::token_id(const std::string& token) const {
  if (bpe_) return bpe_->token_id(token);
  // SentencePiece: the piece spelled `token` (a scan: asked at load, never per request)
  for (int i = 0; i < sp_->piece_size(); ++i)
    if (!sp_->is_unknown(i) && sp_->id_to_piece(i) == token) return i;
  return std::nullopt;
}

}  // namespace era
