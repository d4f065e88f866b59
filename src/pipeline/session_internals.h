#pragma once
// Internal header: the Session's insides (not installed, not part of the public API).
#include <memory>
#include <mutex>

#include "era/era.h"
#include "family/model_family.h"
#include "image/image_io.h"
#include "model/bundle.h"
#include "model/decoder.h"
#include "model/vision_encoder.h"

namespace era {

// Everything a Session holds; the pipeline's stages take it (Session::Impl is this, by name).
struct SessionState {
  ModelBundle bundle;
  SessionOptions options;
  ImageLimits image_limits;
  std::unique_ptr<ModelFamily> family;
  std::unique_ptr<VisionEncoder> vision;
  std::unique_ptr<Decoder> decoder;
  // Set at open: util/cpu_threads.h's advice on this process's BLAS threads ("" if none).
  std::string blas_threads_note;
  // Serialises the Session's public calls (era.h: "Threads"); recursive because generate_batch
  // calls generate and both call prepare.
  mutable std::recursive_mutex mutex;

  int64_t max_context() const { return bundle.manifest.text.context_limit(); }
};

struct Session::Impl : SessionState {};

// The library's own way into a Session (era.h befriends it).
struct SessionAccess {
  // Locks the Session for one public call; throws kInvalidArgument on a moved-from Session.
  static std::unique_lock<std::recursive_mutex> lock(const Session& session);
  static SessionState& state(const Session& session) { return *session.impl_; }
};

}  // namespace era
