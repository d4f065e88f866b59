#pragma once
// Pillow-exact resampling (Image.resize(..., resample=F) on 8-bit images) for every filter Pillow
// runs through its separable convolution resampler: BOX, BILINEAR, HAMMING, BICUBIC, LANCZOS.
//
// Independent implementation of the algorithm described in reference/llava.md A.4: the filter's
// kernel (bicubic: a = -0.5 Keys cubic), its support widened by the scale when downscaling
// (antialiasing), per-axis coefficient tables computed in double, quantised to 22-bit fixed point,
// a horizontal pass stored as uint8, then a vertical pass. The output is bit-identical to
// Pillow's for "L" and "RGB" images. NEAREST is not here: Pillow runs it through a different
// (affine, no-filter) path.
#include <opencv2/core.hpp>

#include <array>
#include <optional>
#include <string>

namespace era {

// Pillow's filter ids (PIL.Image.Resampling) are BOX 4, BILINEAR 2, HAMMING 5, BICUBIC 3, LANCZOS 1.
enum class PilFilter { kBox, kBilinear, kHamming, kBicubic, kLanczos };
inline constexpr std::array<PilFilter, 5> kPilFilters{PilFilter::kBox, PilFilter::kBilinear, PilFilter::kHamming,
                                                      PilFilter::kBicubic, PilFilter::kLanczos};

// The lower-case name used in bundle manifests: "box", "bilinear", "hamming", "bicubic", "lanczos".
const char* pil_filter_name(PilFilter filter);
// The filter of that name, or nullopt for any other string.
std::optional<PilFilter> pil_filter_from_name(const std::string& name);

// src must be CV_8UC3 (RGB, any row stride). Returns a new contiguous CV_8UC3 of out_w x out_h.
// Same size returns a copy (as Pillow does). Throws era::Error(kInvalidArgument) on bad arguments.
cv::Mat pil_resize(const cv::Mat& src_u8c3, int out_w, int out_h, PilFilter filter);

// The same algorithm for any 8-bit channel count (1..4), each channel filtered independently.
// Matches Pillow for modes "L" and "RGB" (and "RGBX"/"CMYK"); Pillow pre-multiplies alpha for
// "RGBA"/"LA", which this does not do.
cv::Mat pil_resize_u8(const cv::Mat& src_u8, int out_w, int out_h, PilFilter filter);

// Bicubic shorthands (LLaVA's filter).
cv::Mat pil_resize_bicubic(const cv::Mat& src_u8c3, int out_w, int out_h);
cv::Mat pil_resize_bicubic_u8(const cv::Mat& src_u8, int out_w, int out_h);

}  // namespace era
