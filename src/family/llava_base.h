#pragma once
// What the LLaVA families share: LLaVA's conversation template and tokenizer_image_token, CLIP
// normalisation, and a LLaMA decoder with positions 0..L-1. LLaVA-1.5 and LLaVA-NeXT differ in
// their images and visual tokens only.
#include "family/model_family.h"
#include "image/clip_preprocess.h"

#include <initializer_list>

namespace era {

// The CLIP preprocessing settings a manifest's "image" section asks for.
ClipImageConfig clip_config(const ImageSpec& image);

class LlavaFamilyBase : public ModelFamily {
 public:
  explicit LlavaFamilyBase(const ModelBundle& bundle);

  std::string format_prompt(const std::vector<Turn>& history, const std::string& question, int num_images, int num_videos,
                            const std::optional<std::string>& system) const override;
  std::vector<int64_t> tokenize(const Tokenizer& tokenizer, const std::string& prompt) const override;
  const std::string& image_placeholder() const override { return manifest_.prompt.image_placeholder; }
  const std::string& video_placeholder() const override { return manifest_.prompt.video_placeholder; }
  torch::Tensor normalize(const cv::Mat& crop) const override;
  torch::Tensor position_ids(const PromptSequence& sequence) const override;

 protected:
  // Vision tokens of one crop (576 for CLIP ViT-L/14 at 336 px).
  int64_t tokens_per_crop() const { return manifest_.vision.tokens_per_crop; }
  // Refuses a manifest whose image layout is none of `allowed` (kBundle, naming the field).
  void require_layout(std::initializer_list<ImageLayout> allowed) const;

  const Manifest& manifest_;
  const std::string bundle_dir_;
  ClipImageConfig clip_;
};

}  // namespace era
