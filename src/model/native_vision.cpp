#include "model/native_vision.h"

namespace era {
namespace {

VisionOutput as_output(layers::VisionTowerOutputs o) {
  VisionOutput r;
  r.features = std::move(o.features);
  r.cls_logits = std::move(o.cls_logits);
  r.cls_probs = std::move(o.cls_probs);
  r.mean_logits = std::move(o.mean_logits);
  r.mean_probs = std::move(o.mean_probs);
  r.cls_features = std::move(o.cls_feature);
  r.mean_keys = std::move(o.mean_keys);
  return r;
}

}  // namespace

VisionOutput NativeVision::encode(const torch::Tensor& pixels) { return as_output(tower_->encode_crops(pixels)); }

VisionOutput NativeVision::encode_native(const torch::Tensor& patches, const torch::Tensor& grid_thw) {
  return as_output(tower_->encode_patches(patches, grid_thw));
}

torch::Tensor NativeVision::parameter(const std::string& name) const {
  const auto it = parameters_.find(name);
  return it == parameters_.end() ? torch::Tensor() : it->second;
}

int64_t NativeVision::weight_bytes() const {
  int64_t bytes = tower_->weight_bytes();
  const auto count = [&](const torch::Tensor& t) {
    if (t.defined()) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  };
  for (const auto* t : {&projector_.w1, &projector_.b1, &projector_.w2, &projector_.b2}) count(*t);
  for (const auto& [name, t] : parameters_) count(t);
  return bytes;
}

}  // namespace era
