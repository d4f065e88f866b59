#pragma once
// The Session's insides, shared with the library's tests (not part of the public API).
#include <memory>
#include <mutex>

#include "era/era.h"
#include "image/image_io.h"
#include "model/bundle.h"
#include "model/decoder.h"
#include "model/vision_encoder.h"
#include "reduce/method.h"

namespace era {

struct Session::Impl {
  ModelBundle bundle;
  SessionOptions options;
  ImageLimits image_limits;
  std::unique_ptr<VisionEncoder> vision;
  std::unique_ptr<Decoder> decoder;
  // Serialises the Session's public calls (era.h: "Threads"); recursive because generate_batch
  // calls generate and both call prepare.
  mutable std::recursive_mutex mutex;

  int64_t max_context() const { return bundle.manifest.text.max_position_embeddings; }
};

}  // namespace era
