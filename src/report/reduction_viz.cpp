#include "report/reduction_viz.h"

#include <algorithm>
#include <array>
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

// The image must stay readable under the marks: clusters are a light tint (kTint of the cluster's
// colour over the real pixels), dropped patches are dimmed, not blacked out, and anchors are
// rings, so the patch they stand on is still visible.
constexpr double kTint = 0.3;
constexpr double kDroppedKeep = 0.45;

cv::Mat draw_reduction_bgr(const cv::Mat& rgb, int64_t grid, const ImageReduction& reduction, int scale) {
  if (rgb.type() != CV_8UC3 || rgb.rows != rgb.cols || grid <= 0 || rgb.rows % grid != 0 || scale < 1) {
    throw Error(ErrorCode::kInvalidArgument, "draw_reduction: expects a square RGB image divisible into the patch grid");
  }
  if (static_cast<int64_t>(reduction.assignment.size()) != grid * grid) {
    throw Error(ErrorCode::kInvalidArgument, "draw_reduction: the reduction covers " +
                                                 std::to_string(reduction.assignment.size()) + " tokens, the grid " +
                                                 std::to_string(grid * grid));
  }
  const int side = rgb.rows;
  cv::Mat bgr, canvas;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  cv::resize(bgr, canvas, cv::Size(side * scale, side * scale), 0, 0, cv::INTER_NEAREST);

  const int patch = side / static_cast<int>(grid) * scale;
  for (int64_t i = 0; i < grid * grid; ++i) {
    const cv::Rect cell(static_cast<int>(i % grid) * patch, static_cast<int>(i / grid) * patch, patch, patch);
    const int64_t slot = reduction.assignment[static_cast<size_t>(i)];
    cv::Mat pixels = canvas(cell);
    if (slot < 0) {
      pixels *= kDroppedKeep;  // dropped
    } else {
      const cv::Mat colour(patch, patch, CV_8UC3, cv::Scalar(cluster_colour(slot)));
      cv::addWeighted(pixels, 1.0 - kTint, colour, kTint, 0.0, pixels);
    }
  }
  if (patch >= 4) {  // faint grid lines where the patches are big enough to tell apart
    cv::Mat lines = canvas.clone();
    for (int k = 0; k <= grid; ++k) {
      cv::line(lines, {k * patch, 0}, {k * patch, canvas.rows}, cv::Scalar(255, 255, 255), 1);
      cv::line(lines, {0, k * patch}, {canvas.cols, k * patch}, cv::Scalar(255, 255, 255), 1);
    }
    cv::addWeighted(canvas, 0.75, lines, 0.25, 0.0, canvas);
  }
  for (const int64_t anchor : reduction.kept) {
    if (anchor < 0 || anchor >= grid * grid) continue;  // a NeXT newline, or another crop's token
    const cv::Point c(static_cast<int>(anchor % grid) * patch + patch / 2, static_cast<int>(anchor / grid) * patch + patch / 2);
    const int radius = std::max(2, patch * 2 / 5);
    cv::circle(canvas, c, radius, cv::Scalar(0, 0, 0), std::max(1, patch / 8) + 1, cv::LINE_AA);
    cv::circle(canvas, c, radius, cv::Scalar(255, 255, 255), std::max(1, patch / 8), cv::LINE_AA);
  }
  return canvas;
}

namespace {

// The slice of an image's reduction that falls on crop `c` (n tokens per crop): its assignment,
// and its kept anchors as indices into that crop's grid.
ImageReduction crop_slice(const ImageReduction& red, int64_t c, int64_t n) {
  ImageReduction crop;
  crop.method = red.method;
  crop.assignment.assign(red.assignment.begin() + c * n, red.assignment.begin() + (c + 1) * n);
  for (const int64_t k : red.kept) {
    if (k >= c * n && k < (c + 1) * n) crop.kept.push_back(k - c * n);
  }
  return crop;
}

// LLaVA-NeXT's tiles come row by row from a grid whose shape follows the image (anyres picks the
// resolution closest to its aspect ratio): the factorisation rows x cols = tiles whose cols/rows is
// nearest to width/height.
std::pair<int, int> tile_grid(int64_t tiles, int64_t height, int64_t width) {
  int best_rows = 1;
  double best = 1e300;
  const double aspect = std::log(static_cast<double>(width) / static_cast<double>(std::max<int64_t>(height, 1)));
  for (int rows = 1; rows <= tiles; ++rows) {
    if (tiles % rows != 0) continue;
    const double d = std::abs(std::log(static_cast<double>(tiles / rows) / rows) - aspect);
    if (d < best - 1e-12) {
      best = d;
      best_rows = rows;
    }
  }
  return {best_rows, static_cast<int>(tiles / best_rows)};
}

cv::Mat rgb_view(const Image& image, const char* what);

// One image of the request: a LLaVA-1.5 crop at twice its size; a NeXT image as its base crop
// (scaled to the height of the tile grid) beside its tiles stitched into the grid.
cv::Mat draw_image_panel(const PreparedInput& in, size_t first_crop, int64_t crops, const ImageReduction& red, int64_t grid,
                         int64_t n, const std::array<int64_t, 2>& size) {
  const auto crop_picture = [&](int64_t c, int scale) {
    return draw_reduction_bgr(rgb_view(in.crops[first_crop + static_cast<size_t>(c)], "draw_request_reduction"), grid,
                              crop_slice(red, c, n), scale);
  };
  if (crops == 1) return crop_picture(0, 2);
  const auto [rows, cols] = tile_grid(crops - 1, size[0], size[1]);
  const cv::Mat first_tile = crop_picture(1, 1);
  const int t = first_tile.rows;
  cv::Mat tiles(rows * t, cols * t, CV_8UC3, cv::Scalar(255, 255, 255));
  for (int64_t k = 0; k < crops - 1; ++k) {
    const cv::Mat tile = k == 0 ? first_tile : crop_picture(k + 1, 1);
    tile.copyTo(tiles(cv::Rect(static_cast<int>(k % cols) * t, static_cast<int>(k / cols) * t, t, t)));
  }
  cv::Mat base;
  cv::resize(crop_picture(0, 1), base, cv::Size(tiles.rows, tiles.rows), 0, 0, cv::INTER_NEAREST);
  const int gap = 12;
  cv::Mat panel(tiles.rows, base.cols + gap + tiles.cols, CV_8UC3, cv::Scalar(255, 255, 255));
  base.copyTo(panel(cv::Rect(0, 0, base.cols, base.rows)));
  tiles.copyTo(panel(cv::Rect(base.cols + gap, 0, tiles.cols, tiles.rows)));
  return panel;
}

}  // namespace

Image draw_request_reduction(const PreparedInput& in, const Result& result, const ModelInfo& model) {
  const int64_t n = model.tokens_per_crop;
  const int64_t grid = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(n))));
  if (n <= 0 || grid * grid != n)
    throw Error(ErrorCode::kInvalidArgument, "draw_request_reduction: the model's tokens per crop are not a square grid");
  if (in.crops_per_image.size() != result.reductions.size() || in.image_sizes.size() != result.reductions.size()) {
    throw Error(ErrorCode::kInvalidArgument, "draw_request_reduction: the prepared input has " +
                                                 std::to_string(in.crops_per_image.size()) + " image(s), the result " +
                                                 std::to_string(result.reductions.size()));
  }
  if (result.reductions.empty()) throw Error(ErrorCode::kInvalidArgument, "draw_request_reduction: the request has no image");
  std::vector<cv::Mat> panels;
  size_t first = 0;
  for (size_t i = 0; i < result.reductions.size(); ++i) {
    const ImageReduction& red = result.reductions[i];
    const int64_t crops = in.crops_per_image[i];
    if (i < in.media.size() && in.media[i] == MediaKind::kVideo) {
      throw Error(ErrorCode::kInvalidArgument,
                  "draw_request_reduction: item " + std::to_string(i) + " is a video; pictures show images' reductions only");
    }
    if (crops < 1 || first + static_cast<size_t>(crops) > in.crops.size() ||
        static_cast<int64_t>(red.assignment.size()) != crops * n) {
      throw Error(ErrorCode::kInvalidArgument,
                  "draw_request_reduction: image " + std::to_string(i) + ": the reduction does not cover its crops");
    }
    panels.push_back(draw_image_panel(in, first, crops, red, grid, n, in.image_sizes[i]));
    first += static_cast<size_t>(crops);
  }
  // Panels side by side, then the legend strip under them.
  const int gap = 24, margin = 12, line_height = 22;
  int width = margin, height = 0;
  for (const auto& p : panels) {
    width += p.cols + gap;
    height = std::max(height, p.rows);
  }
  width = std::max(width - gap + margin, 560);
  const int legend_lines = static_cast<int>(panels.size()) + 1;
  cv::Mat canvas(margin + height + margin + legend_lines * line_height + margin, width, CV_8UC3, cv::Scalar(255, 255, 255));
  int x = margin;
  for (const auto& p : panels) {
    p.copyTo(canvas(cv::Rect(x, margin, p.cols, p.rows)));
    x += p.cols + gap;
  }
  int y = margin + height + margin + line_height - 6;
  const auto text = [&](const std::string& s, const cv::Scalar& colour) {
    cv::putText(canvas, s, {margin, y}, cv::FONT_HERSHEY_SIMPLEX, 0.5, colour, 1, cv::LINE_AA);
    y += line_height;
  };
  for (size_t i = 0; i < result.reductions.size(); ++i) {
    const ImageReduction& red = result.reductions[i];
    const auto newlines = std::count(red.kept.begin(), red.kept.end(), int64_t{-1});
    std::string line = "image " + std::to_string(i) + " (" + std::to_string(in.image_sizes[i][1]) + "x" +
                       std::to_string(in.image_sizes[i][0]) + "): " + red.method + ", kept " +
                       std::to_string(static_cast<int64_t>(red.kept.size()) - newlines) + " of " +
                       std::to_string(red.original_tokens) + " tokens";
    if (in.crops_per_image[i] > 1) line += " (base crop, then the " + std::to_string(in.crops_per_image[i] - 1) + " tiles)";
    text(line, cv::Scalar(0, 0, 0));
  }
  text("ring = kept token (anchor); tint = the anchor's cluster (tokens merged into it); dimmed = dropped",
       cv::Scalar(60, 60, 60));
  return Image::from_pixels(canvas.data, canvas.cols, canvas.rows, static_cast<int>(canvas.step), PixelFormat::kBGR8);
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
