#pragma once
// The drawing behind era/reduction_picture.h, on OpenCV matrices.
#include <opencv2/core.hpp>

#include "era/era.h"

namespace era {

// `rgb`: square CV_8UC3 RGB; returns a BGR picture `scale` times larger (see era/reduction_picture.h).
cv::Mat draw_reduction_bgr(const cv::Mat& rgb, int64_t grid, const ImageReduction& reduction, int scale = 2);

}  // namespace era
