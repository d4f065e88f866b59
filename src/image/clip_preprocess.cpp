#include "image/clip_preprocess.h"

#include <algorithm>
#include <string>

#include "era/error.h"
#include "image/pil_resize.h"

namespace era {
namespace {

void require_rgb(const cv::Mat& rgb, const char* who) {
  if (rgb.empty() || rgb.type() != CV_8UC3 || rgb.dims != 2)
    throw Error(ErrorCode::kInvalidArgument, std::string(who) + ": expected a non-empty CV_8UC3 RGB image");
}

}  // namespace

cv::Mat expand_to_square(const cv::Mat& rgb, std::array<uint8_t, 3> color) {
  require_rgb(rgb, "expand_to_square");
  const int w = rgb.cols, h = rgb.rows;
  if (w == h) return rgb.clone();
  const int s = std::max(w, h);
  cv::Mat canvas(s, s, CV_8UC3, cv::Scalar(color[0], color[1], color[2]));
  rgb.copyTo(canvas(cv::Rect((s - w) / 2, (s - h) / 2, w, h)));
  return canvas;
}

torch::Tensor normalize_to_chw(const cv::Mat& rgb, const ClipImageConfig& config) {
  require_rgb(rgb, "normalize_to_chw");
  for (float s : config.std)
    if (!(s != 0.0f)) throw Error(ErrorCode::kInvalidArgument, "normalize_to_chw: std must be non-zero");
  const int h = rgb.rows, w = rgb.cols;
  auto out = torch::empty({3, h, w}, torch::TensorOptions().dtype(torch::kFloat32));
  float* dst = out.data_ptr<float>();
  const size_t plane = static_cast<size_t>(h) * w;

  // One lookup table per channel: 256 possible inputs, each computed exactly as numpy does it
  // (float64 multiply, cast to float32, then float32 subtract and divide).
  float lut[3][256];
  for (int c = 0; c < 3; ++c) {
    const float mean = config.mean[c];
    const float stdv = config.std[c];
    for (int v = 0; v < 256; ++v) {
      volatile float x = static_cast<float>(static_cast<double>(v) * (1.0 / 255.0));
      volatile float centred = x - mean;
      lut[c][v] = centred / stdv;
    }
  }
  for (int y = 0; y < h; ++y) {
    const uint8_t* row = rgb.ptr<uint8_t>(y);
    float* r = dst + static_cast<size_t>(y) * w;
    float* g = r + plane;
    float* b = g + plane;
    for (int x = 0; x < w; ++x) {
      r[x] = lut[0][row[3 * x + 0]];
      g[x] = lut[1][row[3 * x + 1]];
      b[x] = lut[2][row[3 * x + 2]];
    }
  }
  return out;
}

cv::Mat square_llava_pad(const cv::Mat& rgb, const ClipImageConfig& config) {
  require_rgb(rgb, "preprocess_llava_pad");
  if (config.size <= 0)
    throw Error(ErrorCode::kInvalidArgument, "preprocess_llava_pad: bad target size " + std::to_string(config.size));
  cv::Mat square = rgb.cols == rgb.rows ? rgb : expand_to_square(rgb, config.pad_color);
  return (square.cols == config.size) ? square : pil_resize_bicubic(square, config.size, config.size);
}

torch::Tensor preprocess_llava_pad(const cv::Mat& rgb, const ClipImageConfig& config) {
  return normalize_to_chw(square_llava_pad(rgb, config), config);
}

}  // namespace era
