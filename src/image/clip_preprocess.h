#pragma once
// LLaVA-1.5 "pad" image preprocessing for the CLIP vision tower, numerically identical to the
// original Python pipeline (PIL + HF CLIPImageProcessor, see reference/llava.md A.3(a), A.5):
//   expand_to_square(mean colour) -> Pillow bicubic resize to size x size -> rescale -> normalise.
#include <torch/script.h>
#include <opencv2/core.hpp>

#include <array>
#include <cstdint>

namespace era {

struct ClipImageConfig {
  int size = 336;
  std::array<float, 3> mean{0.48145466f, 0.4578275f, 0.40821073f};
  std::array<float, 3> std{0.26862954f, 0.26130258f, 0.27577711f};
  // tuple(int(m * 255) for m in mean): the padding colour used by LLaVA's expand2square.
  std::array<uint8_t, 3> pad_color{122, 116, 104};
};

// Pastes `rgb` (CV_8UC3) centred on an S x S canvas of `color`, S = max(w, h), at offset
// ((S - w) / 2, (S - h) / 2) (floor: the odd pixel goes right/bottom). Square input: a copy.
cv::Mat expand_to_square(const cv::Mat& rgb, std::array<uint8_t, 3> color);

// CV_8UC3 RGB H x W -> float32 [3, H, W]: float((double)v * (1/255)), then (x - mean) / std in float.
torch::Tensor normalize_to_chw(const cv::Mat& rgb, const ClipImageConfig& config);

// The uint8 RGB image the vision tower sees before normalisation: expand_to_square, then the
// Pillow bicubic resize to config.size (skipped when already that size).
cv::Mat square_llava_pad(const cv::Mat& rgb, const ClipImageConfig& config = {});

// The full pad path: float32 [3, size, size].
torch::Tensor preprocess_llava_pad(const cv::Mat& rgb, const ClipImageConfig& config = {});

}  // namespace era
