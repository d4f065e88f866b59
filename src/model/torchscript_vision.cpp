#include "model/torchscript_vision.h"

#include "era/error.h"
#include "model/graph_optimizer.h"

namespace era {

VisionOutput TorchScriptVision::encode(const torch::Tensor& pixels) {
  GraphOptimizerScope scope(bundle_);
  return outputs(bundle_.vision.forward({pixels}));
}

VisionOutput TorchScriptVision::encode_native(const torch::Tensor& patches, const torch::Tensor& grid_thw) {
  GraphOptimizerScope scope(bundle_);
  return outputs(bundle_.vision.forward({patches, grid_thw}));
}

torch::Tensor TorchScriptVision::project(const torch::Tensor& features) {
  GraphOptimizerScope scope(bundle_);
  return bundle_.projector.forward({features}).toTensor();
}

torch::Tensor TorchScriptVision::parameter(const std::string& name) const {
  for (const auto& p : bundle_.projector.named_parameters()) {
    if (p.name == name) return p.value;
  }
  return {};
}

VisionOutput TorchScriptVision::outputs(const c10::IValue& value) const {
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
  return r;
}

}  // namespace era
