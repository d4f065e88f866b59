#include "model/vision_encoder.h"

#include "era/error.h"
#include "model/graph_optimizer.h"

namespace era {

VisionOutput VisionEncoder::encode(const torch::Tensor& pixels) {
  const auto& v = bundle_.manifest.vision;
  if (pixels.dim() != 4 || pixels.size(1) != 3 || pixels.size(2) != v.image_size || pixels.size(3) != v.image_size) {
    throw Error(ErrorCode::kInvalidArgument,
                "vision input must be [B,3," + std::to_string(v.image_size) + "," + std::to_string(v.image_size) + "]");
  }
  GraphOptimizerScope scope(bundle_);
  return outputs(bundle_.vision.forward({pixels.to(bundle_.device, torch::kFloat)}));
}

VisionOutput VisionEncoder::encode_native(const torch::Tensor& patches, const torch::Tensor& grid_thw) {
  if (patches.dim() != 2 || grid_thw.dim() != 2 || grid_thw.size(1) != 3) {
    throw Error(ErrorCode::kInvalidArgument, "native vision input must be patches [P, D] and grid_thw [items, 3]");
  }
  GraphOptimizerScope scope(bundle_);
  return outputs(bundle_.vision.forward({patches.to(bundle_.device, torch::kFloat), grid_thw.to(bundle_.device, torch::kLong)}));
}

VisionOutput VisionEncoder::outputs(const c10::IValue& value) {
  const auto out = value.toTuple();
  VisionOutput r;
  const std::vector<c10::IValue> e = out->elements().vec();
  // 5 outputs: exported before VisionZip support (fine for every other method); 7: + CLS feature
  // and head-mean keys.
  if (e.size() != 5 && e.size() != 7) {
    throw Error(ErrorCode::kBundle, "bundle " + bundle_.dir + ": vision module returns " + std::to_string(e.size()) +
                                        " outputs, expected 7 (re-export it with this version of tools/export_llava.py)");
  }
  r.features = e[0].toTensor();
  r.cls_logits = e[1].toTensor();
  r.cls_probs = e[2].toTensor();
  r.mean_logits = e[3].toTensor();
  r.mean_probs = e[4].toTensor();
  if (e.size() == 7) {
    r.cls_features = e[5].toTensor();
    r.mean_keys = e[6].toTensor();
  }
  GraphOptimizerScope scope(bundle_);
  r.embeddings = bundle_.projector.forward({r.features}).toTensor();
  // A copy of the module handle (shares the weights): the callable outlives nothing it needs.
  r.project = [projector = bundle_.projector, optimize = bundle_.optimize_graphs](const torch::Tensor& features) mutable {
    GraphOptimizerScope scope(optimize);
    return projector.forward({features.unsqueeze(0)}).toTensor().squeeze(0);
  };
  return r;
}

}  // namespace era
