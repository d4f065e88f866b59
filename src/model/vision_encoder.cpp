#include "model/vision_encoder.h"

#include "era/error.h"

namespace era {

VisionOutput VisionEncoder::encode(const torch::Tensor& pixels) {
  const auto& v = bundle_.manifest.vision;
  if (pixels.dim() != 4 || pixels.size(1) != 3 || pixels.size(2) != v.image_size || pixels.size(3) != v.image_size) {
    throw Error(ErrorCode::kInvalidArgument, "vision input must be [B,3," + std::to_string(v.image_size) + "," +
                                                 std::to_string(v.image_size) + "]");
  }
  const auto out = bundle_.vision.forward({pixels.to(bundle_.device, torch::kFloat)}).toTuple();
  VisionOutput r;
  r.features = out->elements()[0].toTensor();
  r.attn_logits = out->elements()[1].toTensor();
  r.attn_probs = out->elements()[2].toTensor();
  r.embeddings = bundle_.projector.forward({r.features}).toTensor();
  return r;
}

}  // namespace era
