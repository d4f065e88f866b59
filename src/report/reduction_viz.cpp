#include "report/reduction_viz.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "era/error.h"

namespace era {
namespace {

// A distinct colour per cluster slot: hues spaced by the golden angle.
cv::Vec3b cluster_colour(int64_t slot) {
  const double hue = std::fmod(static_cast<double>(slot) * 0.618033988749895, 1.0) * 180.0;  // OpenCV hue: 0..180
  cv::Mat hsv(1, 1, CV_8UC3, cv::Scalar(hue, 200, 255)), bgr;
  cv::cvtColor(hsv, bgr, cv::COLOR_HSV2BGR);
  return bgr.at<cv::Vec3b>(0, 0);
}

}  // namespace

cv::Mat draw_reduction(const torch::Tensor& image, int64_t grid, const ImageReduction& reduction, int scale) {
  const auto rgb = image.to(torch::kCPU, torch::kUInt8).contiguous();
  if (rgb.dim() != 3 || rgb.size(2) != 3 || rgb.size(0) != rgb.size(1) || grid <= 0 || rgb.size(0) % grid != 0) {
    throw Error(ErrorCode::kInvalidArgument, "draw_reduction: expects a square RGB image divisible into the patch grid");
  }
  if (static_cast<int64_t>(reduction.assignment.size()) != grid * grid) {
    throw Error(ErrorCode::kInvalidArgument, "draw_reduction: the reduction covers " + std::to_string(reduction.assignment.size()) +
                                                 " tokens, the grid " + std::to_string(grid * grid));
  }
  const int side = static_cast<int>(rgb.size(0));
  cv::Mat src(side, side, CV_8UC3, const_cast<uint8_t*>(rgb.data_ptr<uint8_t>())), bgr, canvas;
  cv::cvtColor(src, bgr, cv::COLOR_RGB2BGR);
  cv::resize(bgr, canvas, cv::Size(side * scale, side * scale), 0, 0, cv::INTER_NEAREST);

  const int patch = side / static_cast<int>(grid) * scale;
  cv::Mat tint = canvas.clone();
  for (int64_t i = 0; i < grid * grid; ++i) {
    const cv::Rect cell(static_cast<int>(i % grid) * patch, static_cast<int>(i / grid) * patch, patch, patch);
    const int64_t slot = reduction.assignment[static_cast<size_t>(i)];
    if (slot < 0) {
      tint(cell) *= 0.25;  // dropped
    } else {
      tint(cell).setTo(cluster_colour(slot));
    }
  }
  cv::addWeighted(canvas, 0.45, tint, 0.55, 0.0, canvas);
  for (int k = 0; k <= grid; ++k) {
    cv::line(canvas, {k * patch, 0}, {k * patch, canvas.rows}, cv::Scalar(60, 60, 60), 1);
    cv::line(canvas, {0, k * patch}, {canvas.cols, k * patch}, cv::Scalar(60, 60, 60), 1);
  }
  for (const int64_t anchor : reduction.kept) {
    const cv::Point c(static_cast<int>(anchor % grid) * patch + patch / 2, static_cast<int>(anchor / grid) * patch + patch / 2);
    cv::circle(canvas, c, std::max(2, patch / 3), cv::Scalar(0, 0, 0), -1, cv::LINE_AA);
    cv::circle(canvas, c, std::max(1, patch / 3 - 2), cv::Scalar(255, 255, 255), -1, cv::LINE_AA);
  }
  return canvas;
}

void save_reduction_png(const std::string& path, const torch::Tensor& image, int64_t grid, const ImageReduction& reduction) {
  const cv::Mat picture = draw_reduction(image, grid, reduction);
  bool ok = false;
  try {
    ok = cv::imwrite(path, picture);
  } catch (const cv::Exception&) {
  }
  if (!ok) throw Error(ErrorCode::kInvalidArgument, "cannot write the picture " + path);
}

}  // namespace era
