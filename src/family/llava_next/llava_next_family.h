#pragma once
// LLaVA-NeXT (v1.6): "anyres" images. A tile grid is chosen from the pinpoints, the image is cut
// into 336 px tiles plus one squashed base crop; the visual sequence is the base crop's tokens,
// then the grid re-assembled, unpadded and closed by an image_newline token per row
// (anyres_packing.h). A method's nominal budget is split per crop (scope "crop", the paper's
// count: 160 = 32 x 5 crops) or spent over all crops at once (scope "image"); methods that select
// over the packed sequence (DivPrune) get the whole budget there.
#include "family/llava_base.h"

namespace era {

class LlavaNextFamily final : public LlavaFamilyBase {
 public:
  explicit LlavaNextFamily(const ModelBundle& bundle);

  std::string arch() const override { return "llava-next"; }
  std::vector<cv::Mat> crops(const cv::Mat& rgb) const override;
  int64_t max_visual_tokens() const override;
  ReducedTokens reduce_image(const ImageTokens& image, const MethodSpec& method, const Reducer& reducer,
                             const ReductionRequest& request) const override;

 private:
  // Most crops any pinpoint gives (base + tiles): the nominal budget is per crop x this.
  int64_t max_crops() const;
  torch::Tensor image_newline_;
};

}  // namespace era
