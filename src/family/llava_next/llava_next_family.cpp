#include "family/llava_next/llava_next_family.h"

#include <algorithm>

#include "era/error.h"
#include "family/anyres.h"
#include "family/anyres_packing.h"
#include "family/anyres_reduction.h"
#include "family/vision_input.h"

namespace era {

LlavaNextFamily::LlavaNextFamily(const ModelBundle& bundle)
    : LlavaFamilyBase(bundle), image_newline_(projector_parameter(bundle, "image_newline")) {
  require_layout({ImageLayout::kAnyres});
  if (sections_.image.grid_pinpoints.empty()) {
    throw Error(ErrorCode::kBundle, bundle_dir_ + "/manifest.json: image.grid_pinpoints is empty (LLaVA-NeXT needs them)");
  }
}

std::vector<cv::Mat> LlavaNextFamily::crops(const cv::Mat& rgb) const {
  return llava_next_crops(rgb, sections_.image.grid_pinpoints, clip_);
}

int64_t LlavaNextFamily::max_crops() const {
  const int64_t s = sections_.image.size;
  int64_t most = 1;
  for (const auto& p : sections_.image.grid_pinpoints) most = std::max(most, 1 + (p.height / s) * (p.width / s));
  return most;
}

// The base crop plus the largest grid with its newlines, before unpad (2928 with the usual
// pinpoints).
int64_t LlavaNextFamily::max_visual_tokens() const {
  const LlavaImageSpec& im = sections_.image;
  const int64_t n = tokens_per_crop(), p = im.size / manifest_.vision.patch_size;
  int64_t most = 0;
  for (const auto& r : im.grid_pinpoints) most = std::max(most, n + (r.height / im.size * p) * (r.width / im.size * p + 1));
  return most;
}

// Reduce per crop or over all crops, then pack (unpad, newlines) so the reduction follows the
// same permutation as the features. Methods that select over the packed sequence (DivPrune) pack
// first and select over the real tokens, newlines included, with `tokens` as the budget of the
// whole sequence.
ReducedTokens LlavaNextFamily::reduce_image(const ImageTokens& image, const MethodSpec& method, const Reducer& reducer,
                                            const ReductionRequest& request) const {
  const AnyresGeometry geometry = anyres_geometry(sections_.image, manifest_.vision.patch_size, image.size);
  if (method.capabilities.selects_packed_sequence) {
    const VisionOutput& vision = *image.vision;
    const ReducedTokens packed =
        pack_anyres(FullReducer().reduce(joint_input(vision, image.first, image.count, 0)), geometry, image_newline_);
    return select_over_packed(packed, image, reducer, request);
  }
  const ReducedTokens joint = reduce_crops(image, method, reducer, request, tokens_per_crop(), request.tokens / max_crops());
  return pack_anyres(joint, geometry, image_newline_);
}

}  // namespace era
