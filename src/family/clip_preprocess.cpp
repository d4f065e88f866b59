#include "family/clip_preprocess.h"

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

cv::Mat resize_shortest_edge(const cv::Mat& rgb, int edge, PilFilter filter) {
  require_rgb(rgb, "resize_shortest_edge");
  if (edge <= 0) throw Error(ErrorCode::kInvalidArgument, "resize_shortest_edge: bad size " + std::to_string(edge));
  const int64_t w = rgb.cols, h = rgb.rows;
  const int64_t short_side = std::min(w, h), long_side = std::max(w, h);
  // Python's int(edge * long / short): an exact integer product, a correctly rounded true
  // division (both operands are far below 2^53, so the double division rounds the same), then
  // truncation toward zero.
  const auto new_long = static_cast<int>(static_cast<double>(edge * long_side) / static_cast<double>(short_side));
  // HF's tie rule: width <= height counts the width as the short side.
  const int out_w = w <= h ? edge : new_long;
  const int out_h = w <= h ? new_long : edge;
  if (out_w <= 0 || out_h <= 0)
    throw Error(ErrorCode::kInvalidArgument, "resize_shortest_edge: a " + std::to_string(w) + "x" + std::to_string(h) +
                                                 " image resized to shortest edge " + std::to_string(edge) +
                                                 " has an empty side");
  return pil_resize(rgb, out_w, out_h, filter);
}

cv::Mat center_crop(const cv::Mat& rgb, int size) {
  require_rgb(rgb, "center_crop");
  if (size <= 0) throw Error(ErrorCode::kInvalidArgument, "center_crop: bad crop size " + std::to_string(size));
  if (rgb.cols == size && rgb.rows == size) return rgb;
  // Per axis: (source offset, destination offset, length).
  auto axis = [size](int dim) {
    if (dim >= size) return std::array<int, 3>{(dim - size) / 2, 0, size};
    return std::array<int, 3>{0, (size - dim + 1) / 2, dim};  // ceil((size - dim) / 2)
  };
  const auto x = axis(rgb.cols), y = axis(rgb.rows);
  cv::Mat out(size, size, CV_8UC3, cv::Scalar(0, 0, 0));
  rgb(cv::Rect(x[0], y[0], x[2], y[2])).copyTo(out(cv::Rect(x[1], y[1], x[2], y[2])));
  return out;
}

cv::Mat clip_resize_crop(const cv::Mat& rgb, const ClipImageConfig& config) {
  return center_crop(resize_shortest_edge(rgb, config.resize_edge(), config.filter), config.size);
}

cv::Mat llava15_crop(const cv::Mat& rgb, const ClipImageConfig& config) {
  require_rgb(rgb, "llava15_crop");
  if (config.size <= 0) throw Error(ErrorCode::kInvalidArgument, "llava15_crop: bad target size " + std::to_string(config.size));
  if (config.mode == AspectMode::kPad && rgb.cols != rgb.rows)
    return clip_resize_crop(expand_to_square(rgb, config.pad_color), config);
  return clip_resize_crop(rgb, config);
}

torch::Tensor preprocess_llava15(const cv::Mat& rgb, const ClipImageConfig& config) {
  return normalize_to_chw(llava15_crop(rgb, config), config);
}

}  // namespace era
