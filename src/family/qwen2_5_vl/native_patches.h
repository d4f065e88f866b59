#pragma once
// Internal header. Native-resolution preprocessing (Qwen2.5-VL, transformers' Qwen2VLImageProcessor
// and Qwen2VLVideoProcessor): an image or a video's frames resized to multiples of
// patch_size x merge_size by smart_resize, normalised, and cut into the flat patches the vision
// tower takes, with their (t, h, w) grid.
#include <torch/script.h>
#include <opencv2/core.hpp>

#include <array>
#include <string>
#include <vector>

#include "family/qwen2_5_vl/qwen_sections.h"
#include "family/visual_item.h"

namespace era {

// transformers' smart_resize: (height, width) rounded (half to even) to multiples of `factor`,
// then scaled down (floor) or up (ceil) to keep min_pixels <= h x w <= max_pixels at about the
// same aspect ratio. Throws era::Error(kImage) naming `what` for an aspect ratio above 200.
std::array<int64_t, 2> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels, int64_t max_pixels,
                                    const std::string& what);

struct NativeItem {
  torch::Tensor patches;        // float32 [t*h*w, 3 * temporal_patch_size * patch_size^2]
  GridThw grid;                 // in patches
  std::vector<cv::Mat> frames;  // the resized uint8 RGB frames (an image: one)
};

// One item's frames (an image: one frame; all frames the same size) -> patches in the
// processor's order: merge blocks in raster order, the merge_size^2 patches of a block in raster
// order, each patch laid out (channel, frame of its temporal patch, row, column). A frame count
// that is not a multiple of temporal_patch_size repeats the last frame (an image becomes
// temporal_patch_size identical frames).
NativeItem native_patches(const std::vector<cv::Mat>& frames, const NativeResolution& spec, PilFilter filter,
                          const std::array<float, 3>& mean, const std::array<float, 3>& std, const std::string& what);

}  // namespace era
