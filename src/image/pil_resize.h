#pragma once
// Pillow-exact bicubic resampling (Image.resize(..., resample=Image.BICUBIC) on 8-bit images).
//
// Independent implementation of the algorithm described in reference/llava.md A.4: a = -0.5 Keys
// cubic, kernel support widened by the scale when downscaling (antialiasing), per-axis coefficient
// tables computed in double, quantised to 22-bit fixed point, a horizontal pass stored as uint8,
// then a vertical pass. The output is bit-identical to Pillow's for "L" and "RGB" images.
#include <opencv2/core.hpp>

namespace era {

// src must be CV_8UC3 (RGB, any row stride). Returns a new contiguous CV_8UC3 of out_w x out_h.
// Same size returns a copy. Throws era::Error(kInvalidArgument) on bad arguments.
cv::Mat pil_resize_bicubic(const cv::Mat& src_u8c3, int out_w, int out_h);

// The same algorithm for any 8-bit channel count (1..4), each channel filtered independently.
// Matches Pillow for modes "L" and "RGB" (and "RGBX"/"CMYK"); Pillow pre-multiplies alpha for
// "RGBA"/"LA", which this does not do.
cv::Mat pil_resize_bicubic_u8(const cv::Mat& src_u8, int out_w, int out_h);

}  // namespace era
