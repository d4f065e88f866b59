#pragma once
// What a family's VisualProcessor (family/model_family.h) makes of one image or video of a
// prompt: the vision tower's input for it, whichever kind of tower the family has.
#include <torch/script.h>
#include <opencv2/core.hpp>

#include <optional>
#include <string>
#include <vector>

#include "model/vision_encoder.h"

namespace era {

// (temporal, height, width) of an item in patches (HF image_grid_thw / video_grid_thw).
struct GridThw {
  int64_t t = 1, h = 0, w = 0;
  int64_t patches() const { return t * h * w; }
};

// What a processor needs to know of the request and the prompt around one item.
struct ItemContext {
  int images_in_prompt = 1;
  // The request's pixel range for native-resolution families (0: the bundle's min / max pixels).
  int64_t min_pixels = 0, max_pixels = 0;
  std::string name;  // names the item in errors ("image cat.jpg")
};

struct VisualItem {
  // The tower's input for this item: fixed-size crops float32 [views, 3, S, S], or
  // native-resolution patches [patches, patch_dim] (then `grid` is set).
  torch::Tensor pixels;
  std::vector<cv::Mat> views;   // the uint8 RGB crops or resized frames the tower sees, in order
  std::optional<GridThw> grid;  // native-resolution items: their (t, h, w) grid
  int64_t time_step = 1;        // the M-RoPE time step between temporal patches (a video's)
};

}  // namespace era
