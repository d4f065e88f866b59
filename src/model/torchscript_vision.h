#pragma once
// Internal header. A vision pass through the bundle's TorchScript vision.pt and projector.pt, as
// tools/era_tools exported them (model/vision_backend.h).
#include "model/bundle.h"
#include "model/vision_backend.h"

namespace era {

class TorchScriptVision final : public VisionBackend {
 public:
  explicit TorchScriptVision(ModelBundle& bundle) : bundle_(bundle) {}
  std::string name() const override { return "torchscript"; }
  VisionOutput encode(const torch::Tensor& pixels) override;
  VisionOutput encode_native(const torch::Tensor& patches, const torch::Tensor& grid_thw) override;
  torch::Tensor project(const torch::Tensor& features) override;
  torch::Tensor parameter(const std::string& name) const override;

 private:
  VisionOutput outputs(const c10::IValue& value) const;  // the module's output tuple
  ModelBundle& bundle_;
};

}  // namespace era
