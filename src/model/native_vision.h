#pragma once
// Internal header. A vision pass through one of era's own C++ towers (layers/vision_tower.h: the
// LLaVA families' ViT of layers/vit_tower.h on fixed-size crops, Qwen2.5-VL's of
// family/qwen2_5_vl/qwen_vision_tower.h on native-resolution patches) and its two-layer
// projector, over weights a family read from a Hugging Face folder instead of the bundle's
// vision.pt and projector.pt.
#include <map>
#include <memory>
#include <string>

#include "layers/vision_tower.h"
#include "layers/vit_tower.h"
#include "model/vision_backend.h"

namespace era {

class NativeVision final : public VisionBackend {
 public:
  // `parameters`: the projector's extra tensors by name (LLaVA-NeXT's image_newline).
  NativeVision(std::unique_ptr<layers::VisionTower> tower, layers::MlpProjector projector,
               std::map<std::string, torch::Tensor> parameters = {})
      : tower_(std::move(tower)), projector_(std::move(projector)), parameters_(std::move(parameters)) {}
  std::string name() const override { return "native"; }
  VisionOutput encode(const torch::Tensor& pixels) override;
  VisionOutput encode_native(const torch::Tensor& patches, const torch::Tensor& grid_thw) override;
  torch::Tensor project(const torch::Tensor& features) override { return projector_(features); }
  torch::Tensor parameter(const std::string& name) const override;

  layers::VisionTower& tower() { return *tower_; }
  layers::MlpProjector& projector() { return projector_; }
  // Bytes of the weights as held.
  int64_t weight_bytes() const;
  // The tower's and projector's linear products (q/k/v fused counting as one where they are).
  int linear_count() const { return tower_->linear_count() + 2; }

 private:
  std::unique_ptr<layers::VisionTower> tower_;
  layers::MlpProjector projector_;
  std::map<std::string, torch::Tensor> parameters_;
};

}  // namespace era
