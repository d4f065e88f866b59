#pragma once
// The picture of a reduction: the image as the vision tower saw it, its patch grid, every patch
// tinted by the cluster it was merged into, anchors marked, dropped patches darkened (like the
// paper's pruning visualisations).
#include <opencv2/core.hpp>
#include <torch/script.h>

#include <string>

#include "era/era.h"

namespace era {

// `image`: uint8 [S, S, 3] RGB (PreparedInput::display_images[i]); `grid`: patches per side.
// Returns a BGR image `scale` times larger.
cv::Mat draw_reduction(const torch::Tensor& image, int64_t grid, const ImageReduction& reduction, int scale = 2);

// Writes draw_reduction(...) as a PNG; throws era::Error(kInvalidArgument) if it cannot.
void save_reduction_png(const std::string& path, const torch::Tensor& image, int64_t grid, const ImageReduction& reduction);

}  // namespace era
