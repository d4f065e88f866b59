#pragma once
// LLaVA-1.5: one 336 px crop per image (manifest image.aspect_ratio "pad": expand to a square in
// the mean colour first, LLaVA's evaluation; "crop": HF's CLIPImageProcessor; then the shortest
// edge resized with the manifest's Pillow filter and centre-cropped), 576 visual tokens, the budget applies to them directly.
#include "family/llava_base.h"

namespace era {

class Llava15Family final : public LlavaFamilyBase {
 public:
  explicit Llava15Family(const ModelBundle& bundle);

  std::string arch() const override { return "llava-1.5"; }
  std::vector<cv::Mat> crops(const cv::Mat& rgb) const override;
  int64_t max_visual_tokens() const override { return tokens_per_crop(); }
  ReducedTokens reduce_image(const ImageTokens& image, const MethodSpec& method, const Reducer& reducer,
                             const ReductionRequest& request) const override;
};

}  // namespace era
