#include "family/llava_base.h"

#include "era/error.h"
#include "text/prompt.h"

namespace era {

LlavaFamilyBase::LlavaFamilyBase(const ModelBundle& bundle) : manifest_(bundle.manifest), bundle_dir_(bundle.dir) {
  const auto& m = manifest_;
  clip_.size = static_cast<int>(m.image.size);
  clip_.mean = m.image.mean;
  clip_.std = m.image.std;
  clip_.pad_color = m.image.pad_color;
}

void LlavaFamilyBase::require_layout(ImageLayout expected) const {
  if (manifest_.image.layout == expected) return;
  throw Error(ErrorCode::kBundle, bundle_dir_ + "/manifest.json: image.aspect_ratio '" + manifest_.image.aspect_ratio +
                                      "' does not fit architecture " + manifest_.arch);
}

std::string LlavaFamilyBase::format_prompt(const std::string& question, int num_images) const {
  return era::format_prompt(manifest_.prompt, question, num_images);
}

std::vector<int64_t> LlavaFamilyBase::tokenize(const Tokenizer& tokenizer, const std::string& prompt) const {
  return tokenize_with_images(tokenizer, prompt, manifest_.prompt.image_placeholder, manifest_.tokens.image_token_id,
                              manifest_.tokens.added_tokens);
}

torch::Tensor LlavaFamilyBase::normalize(const cv::Mat& crop) const { return normalize_to_chw(crop, clip_); }

torch::Tensor LlavaFamilyBase::position_ids(const PromptSequence& sequence) const {
  return torch::arange(sequence.length(), torch::kLong).unsqueeze(0);  // LLaMA RoPE: 0..L-1
}

}  // namespace era
