#include "family/vision_input.h"

namespace era {

ReductionInput crop_input(const VisionOutput& vision, int64_t i, int64_t budget) {
  ReductionInput in;
  in.embeddings = vision.embeddings[i];
  in.features = vision.features[i];
  in.cls_logits = vision.cls_logits[i];
  in.cls_probs = vision.cls_probs[i];
  in.mean_logits = vision.mean_logits[i];
  in.mean_probs = vision.mean_probs[i];
  in.budget = budget;
  if (vision.cls_features.defined()) in.cls_feature = vision.cls_features[i];
  if (vision.mean_keys.defined()) in.mean_keys = vision.mean_keys[i];
  in.project = vision.project;
  return in;
}

ReductionInput joint_input(const VisionOutput& vision, int64_t first, int64_t count, int64_t budget) {
  auto rows = [&](const torch::Tensor& t) { return t.slice(0, first, first + count).flatten(0, 1); };  // [count*N, .]
  auto cols = [&](const torch::Tensor& t) {  // [count, H, N] -> [H, count*N]
    return t.slice(0, first, first + count).permute({1, 0, 2}).flatten(1, 2);
  };
  ReductionInput in;
  in.embeddings = rows(vision.embeddings);
  in.features = rows(vision.features);
  in.cls_logits = cols(vision.cls_logits);
  in.cls_probs = cols(vision.cls_probs);
  in.mean_logits = cols(vision.mean_logits);
  in.mean_probs = cols(vision.mean_probs);
  in.budget = budget;
  in.project = vision.project;
  return in;
}

}  // namespace era
