#pragma once
// What the tiled ("anyres") families share when they reduce one image (LLaVA-NeXT,
// LLaVA-OneVision): the tile geometry the pinpoints give, the crops reduced one by one or jointly
// before packing, and a selection made over an already packed sequence expressed in the
// original tokens. Each family packs the result its own way.
#include <array>

#include "family/anyres_packing.h"
#include "family/llava_sections.h"
#include "family/model_family.h"

namespace era {

// The tile grid of an image of `size` (height, width) under the image section's pinpoints, with
// the tower's `patch_size`.
AnyresGeometry anyres_geometry(const LlavaImageSpec& image, int64_t patch_size, const std::array<int64_t, 2>& size);

// The image's crops reduced before packing: scope "crop" reduces each crop (tokens_per_crop
// tokens) with `per_crop_nominal` as its nominal budget (resolve_budget), "image" makes one
// selection of request.tokens over all crops (refused for per-crop-only methods). Joined as
// concat_crops does.
ReducedTokens reduce_crops(const ImageTokens& image, const MethodSpec& method, const Reducer& reducer,
                           const ReductionRequest& request, int64_t tokens_per_crop, int64_t per_crop_nominal);

// A selection over the packed sequence (methods with selects_packed_sequence, e.g. DivPrune):
// `reducer` picks request.tokens of `packed` (a packing of the identity reduction), and the
// result is expressed in the original tokens: kept anchors come from the packing (-1 where the
// packed token is no single patch), an original token keeps its slot if its packed position was
// picked, off_grid follows the picked positions (empty if the packing has none).
ReducedTokens select_over_packed(const ReducedTokens& packed, const ImageTokens& image, const Reducer& reducer,
                                 const ReductionRequest& request);

}  // namespace era
