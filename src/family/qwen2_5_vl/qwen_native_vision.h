#pragma once
// Qwen2.5-VL's vision tower and merger as era's own C++ models (qwen_vision_tower.h; the
// merger MLP is the projector), their weights read from a Hugging Face folder instead of the
// bundle's vision.pt and projector.pt. The registry hands it to load_bundle
// (FamilyChecks::native_vision).
#include <memory>
#include <string>

#include "model/manifest.h"
#include "model/vision_backend.h"

namespace era {

// The tower and merger of `hf_dir` for `manifest`: every tensor checked against the manifest's
// vision and projector sections and the family's own (temporal patch, merge, window, full-attention
// blocks), config.json's vision_config read for the rotary base. Names of both layouts are read:
// transformers 5's (`model.visual.*`) and the released checkpoints' (`visual.*`). Throws
// era::Error(kBundle) naming the file and the tensor or field.
std::shared_ptr<VisionBackend> load_qwen25vl_native_vision(const std::string& hf_dir, const Manifest& manifest,
                                                           const torch::Device& device, torch::ScalarType dtype);

}  // namespace era
