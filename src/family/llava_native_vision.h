#pragma once
// The LLaVA families' vision tower and projector as era's own C++ models (layers/vit_tower.h: CLIP
// for LLaVA-1.5 / NeXT, SigLIP for OneVision), their weights read from a Hugging Face folder
// instead of the bundle's vision.pt and projector.pt. The registry hands it to load_bundle
// (FamilyChecks::native_vision).
#include <memory>
#include <string>

#include "model/manifest.h"
#include "model/vision_backend.h"

namespace era {

// The tower, projector and (anyres) image_newline of `hf_dir` for `manifest`: every tensor checked
// against the manifest's vision and projector sections, config.json's vision_config read for what
// the manifest does not hold (layer_norm_eps, the tower's kind). Names of both layouts are read:
// transformers >= 4.52 / 5 (`model.vision_tower.vision_model.*` or `model.vision_tower.*`,
// `model.multi_modal_projector.*`, `model.image_newline`) and llava-hf's before it (without the
// leading `model.`). Throws era::Error(kBundle) naming the file and the tensor or field.
std::shared_ptr<VisionBackend> load_llava_native_vision(const std::string& hf_dir, const Manifest& manifest,
                                                        const torch::Device& device, torch::ScalarType dtype);

}  // namespace era
