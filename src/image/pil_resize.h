#pragma once
// Pillow-exact resampling (Image.resize(..., resample=F) on 8-bit images) for every filter Pillow
// runs through its separable convolution resampler: BOX, BILINEAR, HAMMING, BICUBIC, LANCZOS; and
// the same resampler with PyTorch's uint8 arithmetic (see ResampleArithmetic).
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

// Which integer arithmetic turns the filter taps into pixels. PyTorch's uint8 antialiased resize
// was ported from Pillow(-SIMD): same taps in double, same two passes through a uint8
// intermediate, but different fixed point, so the two disagree (by 1, rarely 2) on up to a few
// percent of the bytes.
// Preprocessors that resize uint8 tensors with torch (torchvision.transforms.v2.functional.resize
// with BICUBIC, or BILINEAR on AVX2/AVX-512 CPUs (elsewhere torchvision resizes BILINEAR in
// float32), as transformers' LlavaOnevisionVideoProcessor does for video frames) need the second
// one to be byte-exact.
enum class ResampleArithmetic {
  // Pillow's Image.resize: 22-bit int32 weights. Every PilFilter.
  kPillow,
  // torch.nn.functional.interpolate(uint8 NCHW, size, mode="bilinear"/"bicubic",
  // antialias=True, align_corners=False) on CPU, torch 2.x (checked: 2.11; ATen's
  // _compute_index_ranges_int16_weights): int16 weights with, per axis, the most fraction bits
  // (at most 22) that keep its largest weight's doubled value below 2^15; the bicubic kernel is
  // evaluated with the fused multiply-adds of the x86 AVX2/AVX-512 builds (an
  // ATEN_CPU_CAPABILITY=default build rounds each step instead: other doubles, but the same int16
  // weights on every size pair checked). PilFilter::kBilinear and kBicubic only.
  kTorchUint8,
};

// The resampler with either arithmetic, for any 8-bit channel count (1..4), each channel filtered
// independently. Returns a new contiguous out_w x out_h image of src's type (a copy at the same
// size). Throws era::Error(kInvalidArgument) on a bad image or size, or on a filter other than
// bilinear/bicubic with kTorchUint8 (the message names the filter).
// resize_u8(src, w, h, f, ResampleArithmetic::kPillow) is pil_resize_u8(src, w, h, f).
cv::Mat resize_u8(const cv::Mat& src_u8, int out_w, int out_h, PilFilter filter, ResampleArithmetic arithmetic);

// Bicubic shorthands (LLaVA's filter).
cv::Mat pil_resize_bicubic(const cv::Mat& src_u8c3, int out_w, int out_h);
cv::Mat pil_resize_bicubic_u8(const cv::Mat& src_u8, int out_w, int out_h);

}  // namespace era
