#pragma once
// LLaVA-OneVision's visual sequences, as transformers' LlavaOnevisionModel builds them
// (pack_image_features, get_video_features): the anyres_max_N downscale of an unpadded tile
// grid, and a newline token after a single-crop image.
#include <torch/script.h>

#include "family/anyres_packing.h"
#include "model/vision_encoder.h"
#include "reduce/reducer.h"

namespace era {

// The grid size (rows, cols) an unpadded h x w token grid is downscaled to under "anyres_max_N"
// (N = max_tiles, p = tokens per tile side): ratio = sqrt(h * w / (N * p * p)); if ratio > 1.1,
// (floor(h / ratio), floor(w / ratio)), else unchanged (HF: int(h // ratio)).
std::array<int64_t, 2> anyres_max_grid(int64_t h, int64_t w, int64_t max_tiles, int64_t p);

// The whole unreduced sequence of one tiled image: base crop tokens (`crops[0]`, [p*p, D]), then
// the tile grid (`crops[1..]` row-major, each [p*p, D]) re-assembled, unpadded, downscaled
// bilinearly (align_corners false, as torch.nn.functional.interpolate) when anyres_max_grid says
// so, and closed by one `image_newline` per row. `kept` holds the base tokens' indices and -1 for
// every grid token and newline (a downscaled token stands for no single patch; off_grid true);
// `assignment` maps base tokens to their slots and every tile token to -1. Without a downscale
// this is exactly pack_anyres of the identity reduction.
ReducedTokens pack_anyres_max(const torch::Tensor& crops, const AnyresGeometry& geometry, int64_t max_tiles,
                              const torch::Tensor& image_newline);

// `tokens` followed by one `image_newline` token (log bias 0, kept -1): a single-crop image of a
// multi-image prompt.
ReducedTokens append_newline(ReducedTokens tokens, const torch::Tensor& image_newline);

// Video frames [first, first + count) of a vision pass with each frame's side x side token grid
// pooled as transformers' apply_pooling does: bilinear interpolation (align_corners false) to
// ceil(side / stride) per side. The projector outputs are pooled (HF's order: project, then
// pool); the vision features and every saliency map are pooled the same way, so a reduction
// method sees for each pooled token the interpolation of what its patches had (docs/methods.md,
// decisions: "Video"). CLS-only outputs (cls_features, mean_keys) are left undefined.
VisionOutput pool_frames(const VisionOutput& vision, int64_t first, int64_t count, int64_t side, int64_t stride);

}  // namespace era
