#pragma once
// A video frame as transformers' torchvision video processors prepare it
// (LlavaOnevisionVideoProcessor): resized to size x size (aspect not kept; torch's uint8
// antialiased resize, or Pillow's for bundles that ask for it), then rescaled and normalised in
// one step, (v - mean * 255) / (std * 255) in float32, as their fused rescale + normalise does.
#include <torch/script.h>
#include <opencv2/core.hpp>

#include "family/llava_sections.h"

namespace era {

// One decoded RGB frame (CV_8UC3) -> the uint8 RGB frame (size x size) the tower sees.
cv::Mat resize_video_frame(const cv::Mat& rgb, const LlavaVideoSpec& video);

// A resized frame -> float32 [3, size, size].
torch::Tensor normalize_video_frame(const cv::Mat& frame, const LlavaVideoSpec& video);

// Any uint8 RGB image -> float32 [3, H, W] by the fused rescale + normalise above.
torch::Tensor normalize_fused(const cv::Mat& rgb, const std::array<float, 3>& mean, const std::array<float, 3>& std);

}  // namespace era
