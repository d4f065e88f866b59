#include "family/llava15/llava15_family.h"

#include "family/vision_input.h"
#include "reduce/budget.h"

namespace era {

Llava15Family::Llava15Family(const ModelBundle& bundle) : LlavaFamilyBase(bundle) {
  require_layout({ImageLayout::kPad, ImageLayout::kCrop});
}

std::vector<cv::Mat> Llava15Family::crops(const cv::Mat& rgb) const { return {llava15_crop(rgb, clip_)}; }

ReducedTokens Llava15Family::reduce_image(const ImageTokens& image, const MethodSpec&, const Reducer& reducer,
                                          const ReductionRequest& request) const {
  const int64_t n = tokens_per_crop();
  ReductionInput input = crop_input(*image.vision, image.first, resolve_budget(request, n, request.tokens));
  input.instruction_embeddings = image.instruction;
  return reducer.reduce(input);
}

}  // namespace era
