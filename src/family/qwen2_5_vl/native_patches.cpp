#include "family/qwen2_5_vl/native_patches.h"

#include <algorithm>
#include <cmath>

#include "era/error.h"
#include "family/frame_preprocess.h"
#include "image/pil_resize.h"

namespace era {

std::array<int64_t, 2> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels, int64_t max_pixels,
                                    const std::string& what) {
  if (height <= 0 || width <= 0) throw Error(ErrorCode::kImage, what + ": has no pixels");
  const double ratio = static_cast<double>(std::max(height, width)) / static_cast<double>(std::min(height, width));
  if (ratio > 200) {
    throw Error(ErrorCode::kImage, what + ": aspect ratio " + std::to_string(ratio) + " is above 200 (" + std::to_string(width) +
                                       "x" + std::to_string(height) + "), which Qwen2.5-VL's processor refuses");
  }
  const double f = static_cast<double>(factor);
  // Python's round(): half to even, which std::nearbyint does in the default rounding mode
  int64_t h = static_cast<int64_t>(std::nearbyint(static_cast<double>(height) / f)) * factor;
  int64_t w = static_cast<int64_t>(std::nearbyint(static_cast<double>(width) / f)) * factor;
  const double area = static_cast<double>(height) * static_cast<double>(width);
  if (h * w > max_pixels) {
    const double beta = std::sqrt(area / static_cast<double>(max_pixels));
    h = std::max(factor, static_cast<int64_t>(std::floor(static_cast<double>(height) / beta / f)) * factor);
    w = std::max(factor, static_cast<int64_t>(std::floor(static_cast<double>(width) / beta / f)) * factor);
  } else if (h * w < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / area);
    h = static_cast<int64_t>(std::ceil(static_cast<double>(height) * beta / f)) * factor;
    w = static_cast<int64_t>(std::ceil(static_cast<double>(width) * beta / f)) * factor;
  }
  return {h, w};
}

NativeItem native_patches(const std::vector<cv::Mat>& frames, const NativeResolution& spec, PilFilter filter,
                          const std::array<float, 3>& mean, const std::array<float, 3>& std, const std::string& what) {
  if (frames.empty()) throw Error(ErrorCode::kImage, what + ": has no frames");
  const int rows = frames.front().rows, cols = frames.front().cols;
  for (const cv::Mat& f : frames) {
    if (f.type() != CV_8UC3) throw Error(ErrorCode::kRuntime, what + ": frames must be 8-bit RGB");
    if (f.rows != rows || f.cols != cols) {
      throw Error(ErrorCode::kImage, what + ": its frames differ in size (" + std::to_string(cols) + "x" + std::to_string(rows) +
                                         " and " + std::to_string(f.cols) + "x" + std::to_string(f.rows) + ")");
    }
  }
  const auto [h, w] = smart_resize(rows, cols, spec.factor(), spec.min_pixels, spec.max_pixels, what);
  const ResampleArithmetic arithmetic =
      spec.arithmetic == "pillow" ? ResampleArithmetic::kPillow : ResampleArithmetic::kTorchUint8;
  NativeItem item;
  std::vector<torch::Tensor> normalized;
  for (const cv::Mat& f : frames) {
    // torchvision's resize returns the input itself when the size already matches
    cv::Mat resized =
        (f.rows == h && f.cols == w) ? f.clone() : resize_u8(f, static_cast<int>(w), static_cast<int>(h), filter, arithmetic);
    normalized.push_back(normalize_fused(resized, mean, std));
    item.frames.push_back(std::move(resized));
  }
  const int64_t tp = spec.temporal_patch_size, p = spec.patch_size, m = spec.merge_size;
  while (static_cast<int64_t>(normalized.size()) % tp != 0) normalized.push_back(normalized.back());
  const int64_t gt = static_cast<int64_t>(normalized.size()) / tp, gh = h / p, gw = w / p;
  // [gt, tp, C, gh/m, m, p, gw/m, m, p] -> [gt, gh/m, gw/m, m, m, C, tp, p, p]
  const torch::Tensor video = torch::stack(normalized);  // [T, 3, h, w]
  item.patches = video.reshape({gt, tp, 3, gh / m, m, p, gw / m, m, p})
                     .permute({0, 3, 6, 4, 7, 2, 1, 5, 8})
                     .reshape({gt * gh * gw, 3 * tp * p * p})
                     .contiguous();
  item.grid = {gt, gh, gw};
  return item;
}

}  // namespace era
