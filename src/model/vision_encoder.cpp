#include "model/vision_encoder.h"

#include "era/error.h"
#include "model/torchscript_vision.h"

namespace era {

VisionEncoder::VisionEncoder(ModelBundle& bundle) : bundle_(bundle) {
  if (bundle.native_vision) backend_ = bundle.native_vision;
  else if (bundle.scripted_vision) backend_ = std::make_shared<TorchScriptVision>(bundle);
  else throw Error(ErrorCode::kBundle, "bundle " + bundle.dir + ": no vision tower loaded");
}

VisionOutput VisionEncoder::encode(const torch::Tensor& pixels) {
  const auto& v = bundle_.manifest.vision;
  if (pixels.dim() != 4 || pixels.size(1) != 3 || pixels.size(2) != v.image_size || pixels.size(3) != v.image_size) {
    throw Error(ErrorCode::kInvalidArgument,
                "vision input must be [B,3," + std::to_string(v.image_size) + "," + std::to_string(v.image_size) + "]");
  }
  return projected(backend_->encode(pixels.to(bundle_.device, torch::kFloat)));
}

VisionOutput VisionEncoder::encode_native(const torch::Tensor& patches, const torch::Tensor& grid_thw) {
  if (patches.dim() != 2 || grid_thw.dim() != 2 || grid_thw.size(1) != 3) {
    throw Error(ErrorCode::kInvalidArgument, "native vision input must be patches [P, D] and grid_thw [items, 3]");
  }
  return projected(backend_->encode_native(patches.to(bundle_.device, torch::kFloat), grid_thw.to(bundle_.device, torch::kLong)));
}

VisionOutput VisionEncoder::projected(VisionOutput r) {
  r.embeddings = backend_->project(r.features);
  // The backend is shared: the callable outlives nothing it needs.
  r.project = [backend = backend_](const torch::Tensor& features) { return backend->project(features.unsqueeze(0)).squeeze(0); };
  return r;
}

}  // namespace era
