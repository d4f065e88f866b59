#include "family/anyres.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "era/error.h"
#include "image/pil_resize.h"

namespace era {
namespace {

std::string size_str(const Resolution& r) { return std::to_string(r.height) + "x" + std::to_string(r.width) + " (HxW)"; }

// The aspect-preserving size the image is resized to inside `target` (HF `_get_patch_output_size`,
// original LLaVA `resize_and_pad_image`). Python semantics: int / int is a double, int * double
// converts the int to double first (exact for any image size), math.ceil rounds the double up.
// The ceil is applied to the float product as computed, artefacts included: a 300x400 (HxW) image
// in 336x672 gets width ceil(400 * 1.12) = ceil(448.00000000000006) = 449, as in Python (and
// Pillow-checked by the anyres fixture); the min() keeps the result inside the target.
Resolution fitted_size(const Resolution& original, const Resolution& target) {
  const double scale_w = static_cast<double>(target.width) / static_cast<double>(original.width);
  const double scale_h = static_cast<double>(target.height) / static_cast<double>(original.height);
  Resolution out;
  if (scale_w < scale_h) {
    out.width = target.width;
    out.height = std::min(static_cast<int64_t>(std::ceil(static_cast<double>(original.height) * scale_w)), target.height);
  } else {
    out.height = target.height;
    out.width = std::min(static_cast<int64_t>(std::ceil(static_cast<double>(original.width) * scale_h)), target.width);
  }
  return out;
}

}  // namespace

Resolution select_best_resolution(const Resolution& original, const std::vector<Resolution>& candidates) {
  if (original.height <= 0 || original.width <= 0)
    throw Error(ErrorCode::kInvalidArgument, "select_best_resolution: empty image " + size_str(original));
  if (candidates.empty()) throw Error(ErrorCode::kInvalidArgument, "select_best_resolution: no candidate resolutions");
  const double h0 = static_cast<double>(original.height);
  const double w0 = static_cast<double>(original.width);
  const int64_t original_pixels = original.height * original.width;

  Resolution best;
  bool found = false;
  int64_t max_effective = 0;
  int64_t min_wasted = std::numeric_limits<int64_t>::max();  // Python: float("inf")
  for (const Resolution& c : candidates) {
    if (c.height <= 0 || c.width <= 0)
      throw Error(ErrorCode::kInvalidArgument, "select_best_resolution: bad candidate " + size_str(c));
    const double scale = std::min(static_cast<double>(c.width) / w0, static_cast<double>(c.height) / h0);
    // int() truncates toward zero; the products are positive.
    const auto down_w = static_cast<int64_t>(w0 * scale);
    const auto down_h = static_cast<int64_t>(h0 * scale);
    const int64_t effective = std::min(down_w * down_h, original_pixels);
    const int64_t wasted = c.width * c.height - effective;
    // Strict comparisons: the earlier candidate wins a full tie. The first candidate is always
    // taken (effective >= 0 == max_effective, wasted < "inf"), as in HF.
    if (!found || effective > max_effective || (effective == max_effective && wasted < min_wasted)) {
      found = true;
      max_effective = effective;
      min_wasted = wasted;
      best = c;
    }
  }
  return best;
}

AnyresCrops make_anyres_crops(const cv::Mat& rgb, const std::vector<Resolution>& pinpoints, int tile, PilFilter filter,
                              int base_size) {
  if (rgb.empty() || rgb.type() != CV_8UC3)
    throw Error(ErrorCode::kInvalidArgument, "make_anyres_crops: expected a non-empty CV_8UC3 RGB image");
  if (tile <= 0) throw Error(ErrorCode::kInvalidArgument, "make_anyres_crops: tile size must be positive");
  if (base_size < 0) throw Error(ErrorCode::kInvalidArgument, "make_anyres_crops: base size must not be negative");
  if (base_size == 0) base_size = tile;
  if (pinpoints.empty()) throw Error(ErrorCode::kInvalidArgument, "make_anyres_crops: no grid pinpoints");
  for (const Resolution& p : pinpoints) {
    if (p.height <= 0 || p.width <= 0 || p.height % tile != 0 || p.width % tile != 0)
      throw Error(ErrorCode::kInvalidArgument, "make_anyres_crops: pinpoint " + size_str(p) +
                                                   " is not a positive multiple of the tile size " + std::to_string(tile));
  }

  AnyresCrops out;
  out.original = Resolution{rgb.rows, rgb.cols};
  out.best = select_best_resolution(out.original, pinpoints);
  out.rows = out.best.height / tile;
  out.cols = out.best.width / tile;

  // Resize into the chosen resolution keeping the aspect ratio, then centre on a black canvas
  // (offset floored: the odd pixel of padding goes right/bottom, as HF's np.pad(p, p + remainder)).
  const Resolution fit = fitted_size(out.original, out.best);
  const cv::Mat resized = pil_resize(rgb, static_cast<int>(fit.width), static_cast<int>(fit.height), filter);
  cv::Mat canvas(static_cast<int>(out.best.height), static_cast<int>(out.best.width), CV_8UC3, cv::Scalar(0, 0, 0));
  const int paste_x = static_cast<int>((out.best.width - fit.width) / 2);
  const int paste_y = static_cast<int>((out.best.height - fit.height) / 2);
  resized.copyTo(canvas(cv::Rect(paste_x, paste_y, resized.cols, resized.rows)));

  out.crops.reserve(static_cast<size_t>(1 + out.rows * out.cols));
  // The base crop: the original image squashed to base_size x base_size (no aspect preservation;
  // a copy if it already has that size).
  out.crops.push_back(pil_resize(rgb, base_size, base_size, filter));
  for (int64_t r = 0; r < out.rows; ++r) {
    for (int64_t c = 0; c < out.cols; ++c) {
      out.crops.push_back(canvas(cv::Rect(static_cast<int>(c * tile), static_cast<int>(r * tile), tile, tile)).clone());
    }
  }
  return out;
}

std::vector<cv::Mat> llava_next_crops(const cv::Mat& rgb, const std::vector<Resolution>& pinpoints, const ClipImageConfig& clip) {
  AnyresCrops anyres = make_anyres_crops(rgb, pinpoints, clip.size, clip.filter, clip.resize_edge());
  for (cv::Mat& crop : anyres.crops) crop = clip_resize_crop(crop, clip);
  return std::move(anyres.crops);
}

}  // namespace era
