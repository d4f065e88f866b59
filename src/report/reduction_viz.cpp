#include "report/reduction_viz.h"

#include <cmath>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "era/error.h"
#include "era/reduction_picture.h"

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

cv::Mat draw_reduction_bgr(const cv::Mat& rgb, int64_t grid, const ImageReduction& reduction, int scale) {
  if (rgb.type() != CV_8UC3 || rgb.rows != rgb.cols || grid <= 0 || rgb.rows % grid != 0 || scale < 1) {
    throw Error(ErrorCode::kInvalidArgument, "draw_reduction: expects a square RGB image divisible into the patch grid");
  }
  if (static_cast<int64_t>(reduction.assignment.size()) != grid * grid) {
    throw Error(ErrorCode::kInvalidArgument, "draw_reduction: the reduction covers " + std::to_string(reduction.assignment.size()) +
                                                 " tokens, the grid " + std::to_string(grid * grid));
  }
  const int side = rgb.rows;
  cv::Mat bgr, canvas;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
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

namespace {

// A kPixels Image as an RGB matrix sharing its pixels (tightly packed rows).
cv::Mat rgb_view(const Image& image, const char* what) {
  if (image.source() != Image::Source::kPixels || image.data() == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, std::string(what) + ": expects a pixel image (PreparedInput::crops)");
  }
  return cv::Mat(image.height(), image.width(), CV_8UC3, const_cast<uint8_t*>(image.data()));
}

}  // namespace

Image draw_reduction(const Image& crop, int64_t grid, const ImageReduction& reduction, int scale) {
  const cv::Mat bgr = draw_reduction_bgr(rgb_view(crop, "draw_reduction"), grid, reduction, scale);
  return Image::from_pixels(bgr.data, bgr.cols, bgr.rows, static_cast<int>(bgr.step), PixelFormat::kBGR8);
}

void save_png(const Image& image, const std::string& path) {
  cv::Mat bgr;
  cv::cvtColor(rgb_view(image, "save_png"), bgr, cv::COLOR_RGB2BGR);
  bool ok = false;
  try {
    ok = cv::imwrite(path, bgr);
  } catch (const cv::Exception&) {
  }
  if (!ok) throw Error(ErrorCode::kInvalidArgument, "cannot write the picture " + path);
}

}  // namespace era
