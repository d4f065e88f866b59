#pragma once
// The LLaVA families' manifest built from a Hugging Face folder (config.json model_type "llava":
// LLaVA-1.5, "llava_next": LLaVA-NeXT) instead of read from an exported bundle: the CLIP tower's
// section from vision_config and the feature-layer fields, the projector's, the anyres pinpoints,
// and the "image" section from the image processor (preprocessor_config.json, or
// processor_config.json's image_processor), every pixel-changing setting honoured or refused by
// name. The common sections come from model/hf_config.h. What tools/era_tools/checkpoint_base.py
// and families/llava15.py / llava_next.py write into an exported bundle, field for field.
#include <nlohmann/json.hpp>
#include <string>

namespace era {

// `dir`'s manifest document for `arch` ("llava-1.5" or "llava-next"); `config` is its config.json.
// Throws era::Error(kBundle) "FILE: field = value: rule".
nlohmann::json llava_manifest_from_hf(const std::string& dir, const nlohmann::json& config, const std::string& arch);

}  // namespace era
