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
  r.embeddings = bundle_.projector.forward({r.features}).toTensor();
  // A copy of the module handle (shares the weights): the callable outlives nothing it needs.
  r.project = [projector = bundle_.projector](const torch::Tensor& features) mutable {
    return projector.forward({features.unsqueeze(0)}).toTensor().squeeze(0);
  };
  return r;
}

}  // namespace era

namespace era {

ReductionInput VisionOutput::reduction_input(int64_t i, int64_t budget) const {
  ReductionInput in;
  in.embeddings = embeddings[i];
  in.features = features[i];
  in.cls_logits = cls_logits[i];
  in.cls_probs = cls_probs[i];
  in.mean_logits = mean_logits[i];
  in.mean_probs = mean_probs[i];
  in.budget = budget;
  if (cls_features.defined()) in.cls_feature = cls_features[i];
  if (mean_keys.defined()) in.mean_keys = mean_keys[i];
  in.project = project;
  return in;
}

ReductionInput VisionOutput::joint_input(int64_t first, int64_t count, int64_t budget) const {
  auto rows = [&](const torch::Tensor& t) { return t.slice(0, first, first + count).flatten(0, 1); };   // [count*N, .]
  auto cols = [&](const torch::Tensor& t) {  // [count, H, N] -> [H, count*N]
    return t.slice(0, first, first + count).permute({1, 0, 2}).flatten(1, 2);
  };
  ReductionInput in;
  in.embeddings = rows(embeddings);
  in.features = rows(features);
  in.cls_logits = cols(cls_logits);
  in.cls_probs = cols(cls_probs);
  in.mean_logits = cols(mean_logits);
  in.mean_probs = cols(mean_probs);
  in.budget = budget;
  in.project = project;
  return in;
}

}  // namespace era
