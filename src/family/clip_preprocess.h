#pragma once
// LLaVA-1.5 image preprocessing for the CLIP vision tower, numerically identical to the Python
// pipelines it reproduces (Pillow + HF's PIL-backend image processors, reference/llava.md A.3(a),
// A.5). Two modes:
//   kPad  (LLaVA's image_aspect_ratio "pad", the paper's evaluation; HF LlavaImageProcessor with
//         do_pad): expand_to_square(mean colour), then the CLIP steps below.
//   kCrop (HF CLIPImageProcessor, what llava-hf/llava-1.5-*-hf ship): the CLIP steps only.
// The CLIP steps: resize the shortest edge to `shortest_edge` (Pillow filter `filter`), centre crop
// size x size, rescale by 1/255, normalise with mean/std.
#include <torch/script.h>
#include <opencv2/core.hpp>

#include <array>
#include <cstdint>

#include "image/pil_resize.h"

namespace era {

enum class AspectMode { kPad, kCrop };

struct ClipImageConfig {
  int size = 336;         // the centre crop: the vision tower's image size
  int shortest_edge = 0;  // the resize target of the shortest edge; 0 = size
  AspectMode mode = AspectMode::kPad;
  PilFilter filter = PilFilter::kBicubic;
  std::array<float, 3> mean{0.48145466f, 0.4578275f, 0.40821073f};
  std::array<float, 3> std{0.26862954f, 0.26130258f, 0.27577711f};
  // tuple(int(m * 255) for m in mean): the padding colour used by LLaVA's expand2square.
  std::array<uint8_t, 3> pad_color{122, 116, 104};

  int resize_edge() const { return shortest_edge > 0 ? shortest_edge : size; }
};

// Pastes `rgb` (CV_8UC3) centred on an S x S canvas of `color`, S = max(w, h), at offset
// ((S - w) / 2, (S - h) / 2) (floor: the odd pixel goes right/bottom). Square input: a copy.
cv::Mat expand_to_square(const cv::Mat& rgb, std::array<uint8_t, 3> color);

// HF's shortest-edge resize (get_resize_output_image_size with default_to_square=False): the
// short side becomes `edge`, the long side int(edge * long / short) (truncated), then the Pillow
// resize with `filter` (a copy when the size does not change, as Pillow does).
cv::Mat resize_shortest_edge(const cv::Mat& rgb, int edge, PilFilter filter);

// HF's centre crop (image_transforms.center_crop) to size x size: offset (dim - size) // 2 (floor)
// on an axis longer than size; on a shorter axis the image is pasted at ceil((size - dim) / 2) on
// black (zeros), as HF pads before cropping.
cv::Mat center_crop(const cv::Mat& rgb, int size);

// CV_8UC3 RGB H x W -> float32 [3, H, W]: float((double)v * (1/255)), then (x - mean) / std in float.
torch::Tensor normalize_to_chw(const cv::Mat& rgb, const ClipImageConfig& config);

// HF CLIP's resize + crop of one image: resize_shortest_edge(resize_edge()) then center_crop(size).
cv::Mat clip_resize_crop(const cv::Mat& rgb, const ClipImageConfig& config);

// The uint8 RGB size x size image the vision tower sees before normalisation, in config.mode:
// kPad expands to a square first, kCrop does not; both then clip_resize_crop.
cv::Mat llava15_crop(const cv::Mat& rgb, const ClipImageConfig& config = {});

// The whole LLaVA-1.5 path: float32 [3, size, size].
torch::Tensor preprocess_llava15(const cv::Mat& rgb, const ClipImageConfig& config = {});

}  // namespace era
