#include "image/pil_resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core/utility.hpp>

#include "era/error.h"

namespace era {
namespace {

// Fixed-point layout of the integer weights: 32 bits minus 8 for the pixel value minus 2 guard bits.
constexpr int kPrecisionBits = 32 - 8 - 2;
constexpr double kPi = 3.14159265358979323846;  // M_PI, as Pillow's C code uses it

// Pillow's convolution filters (the ones Image.resize runs through its separable resampler), each
// written operation by operation as Pillow's C code does it. Every operation is rounded separately
// (the volatile temporaries stop a compiler from fusing them into FMAs under -mfma), as in a plain
// C build; sin/cos come from the same C library Pillow calls.
double box_filter(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }

double bilinear_filter(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

double hamming_filter(double x) {
  if (x < 0.0) x = -x;
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  volatile double px = x * kPi;
  // Pillow writes the window as 0.54f + 0.46f * cos(x): float constants widened to double.
  volatile double window = static_cast<double>(0.46f) * std::cos(px);
  window = static_cast<double>(0.54f) + window;
  volatile double sinc = std::sin(px) / px;
  return sinc * window;
}

// Keys cubic convolution kernel with a = -0.5.
double bicubic_filter(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  volatile double t;
  if (x < 1.0) {
    t = (a + 2.0) * x;
    t = t - (a + 3.0);
    t = t * x;
    t = t * x;
    return t + 1.0;
  }
  if (x < 2.0) {
    t = (x - 5.0) * x;
    t = t + 8.0;
    t = t * x;
    t = t - 4.0;
    return t * a;
  }
  return 0.0;
}

double sinc_filter(double x) {
  if (x == 0.0) return 1.0;
  volatile double px = x * kPi;
  return std::sin(px) / px;
}

double lanczos_filter(double x) {
  // Truncated sinc, a = 3.
  if (-3.0 <= x && x < 3.0) {
    volatile double a = sinc_filter(x);
    volatile double b = sinc_filter(x / 3.0);
    return a * b;
  }
  return 0.0;
}

// PyTorch's bicubic kernel (HelperInterpCubic::aa_filter, A = -0.5, via cubic_convolution1/2 in
// ATen/native/UpSample.h). Written in Torch's operation order, and fused the way the shipped x86
// wheels compute it: the kernel is compiled once per CPU capability, the AVX2/AVX-512 builds with
// FMA enabled and GCC's default -ffp-contract=fast, so
//   ((A + 2) * x - (A + 3)) * x * x + 1            -> fma(fma(A + 2, x, -(A + 3)) * x, x, 1)
//   ((A * x - 5 * A) * x + 8 * A) * x - 4 * A      -> fma(fma(fma(A, x, -5A), x, 8A), x, -4A)
// Checked tap for tap against torch 2.11's float64 antialias weights on an AVX2 CPU (the same
// function computes them). An ATEN_CPU_CAPABILITY=default build rounds every step instead, which
// gives Pillow's doubles (with A = -0.5 Torch's and Pillow's cubic are the same function: a factor
// of -0.5 is exact); the two differ in the last bits only, and after quantisation to int16 gave
// the same weights on all 22,781 axis size pairs tried. std::fma is correctly rounded on every
// platform, so this is the same bits with or without a hardware FMA.
double torch_bicubic_filter(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return std::fma(std::fma(a + 2.0, x, -(a + 3.0)) * x, x, 1.0);
  if (x < 2.0) return std::fma(std::fma(std::fma(a, x, -5.0 * a), x, 8.0 * a), x, -4.0 * a);
  return 0.0;
}

struct FilterKernel {
  double (*fn)(double);
  double support;  // before antialias widening
};

FilterKernel kernel_of(PilFilter filter, ResampleArithmetic arithmetic) {
  if (arithmetic == ResampleArithmetic::kTorchUint8) {
    // Torch's uint8 kernels exist for bilinear (triangle, the same function as Pillow's) and
    // bicubic only; interp_size / 2 is the support.
    if (filter == PilFilter::kBilinear) return {bilinear_filter, 1.0};
    if (filter == PilFilter::kBicubic) return {torch_bicubic_filter, 2.0};
    throw Error(ErrorCode::kInvalidArgument, std::string("resize_u8: filter '") + pil_filter_name(filter) +
                                                 "' has no torch uint8 arithmetic (bilinear and bicubic only)");
  }
  switch (filter) {
    case PilFilter::kBox: return {box_filter, 0.5};
    case PilFilter::kBilinear: return {bilinear_filter, 1.0};
    case PilFilter::kHamming: return {hamming_filter, 1.0};
    case PilFilter::kBicubic: return {bicubic_filter, 2.0};
    case PilFilter::kLanczos: return {lanczos_filter, 3.0};
  }
  throw Error(ErrorCode::kInvalidArgument, "pil_resize: unknown filter");
}

// Integer filter taps for one axis: output index o reads `count[o]` input samples starting at
// `first[o]`, weighted by weights[o * ksize + i] / 2^precision.
struct AxisTaps {
  int ksize = 0;
  int precision = 0;  // fixed-point bits of the weights (and the accumulator's rounding offset)
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> weights;
};

// Pillow's precompute_coeffs and Torch's _compute_indices_min_size_weights_aa compute the same
// double taps (center = (o + 0.5) * scale, support widened by the scale when downscaling, bounds
// truncated toward zero then clamped, weights normalised by their sum); they differ only in how
// the doubles become integers:
//   Pillow: always 22 bits, int32 weights.
//   Torch:  int16 weights with the most bits that keep the axis's largest normalised weight below
//           2^15 (_compute_index_ranges_int16_weights); Torch also clamps a tap count that
//           rounding pushed one past ksize (Pillow never meets one in practice).
AxisTaps compute_taps(int in_size, int out_size, const FilterKernel& kernel, ResampleArithmetic arithmetic) {
  const bool torch = arithmetic == ResampleArithmetic::kTorchUint8;
  AxisTaps taps;
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = kernel.support * filterscale;
  const double inv_filterscale = 1.0 / filterscale;
  taps.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  taps.first.resize(out_size);
  taps.count.resize(out_size);
  taps.weights.assign(static_cast<size_t>(out_size) * taps.ksize, 0);

  // Normalised double weights for the whole axis first: Torch's precision depends on their maximum.
  std::vector<double> w(static_cast<size_t>(out_size) * taps.ksize, 0.0);
  double w_max = 0.0;  // over normalised weights only, as Torch's wt_max
  for (int o = 0; o < out_size; ++o) {
    const double center = (o + 0.5) * scale;
    // C truncation toward zero, then clamp to the image.
    int lo = static_cast<int>(center - support + 0.5);
    if (lo < 0) lo = 0;
    int hi = static_cast<int>(center + support + 0.5);
    if (hi > in_size) hi = in_size;
    int n = hi - lo;
    if (torch) n = std::clamp(n, 0, taps.ksize);

    double* k = &w[static_cast<size_t>(o) * taps.ksize];
    double sum = 0.0;
    for (int i = 0; i < n; ++i) {
      const double d = static_cast<double>(i + lo) - center + 0.5;
      k[i] = kernel.fn(d * inv_filterscale);
      sum += k[i];
    }
    if (sum != 0.0) {
      for (int i = 0; i < n; ++i) {
        k[i] /= sum;
        w_max = std::max(w_max, k[i]);
      }
    }
    taps.first[o] = lo;
    taps.count[o] = n;
  }

  if (torch) {
    // The first precision whose doubled value would round to 2^15 or more stops the search.
    for (taps.precision = 0; taps.precision < 22; ++taps.precision)
      if (static_cast<int>(0.5 + w_max * (1 << (taps.precision + 1))) >= (1 << 15)) break;
  } else {
    taps.precision = kPrecisionBits;
  }
  const double one = static_cast<double>(1 << taps.precision);
  for (size_t j = 0; j < w.size(); ++j) {
    // Round half away from zero into fixed point (Torch then stores it as int16_t).
    const double scaled = w[j] * one;
    const int32_t q = static_cast<int32_t>(scaled < 0 ? scaled - 0.5 : scaled + 0.5);
    taps.weights[j] = torch ? static_cast<int16_t>(q) : q;
  }
  return taps;
}

// Both arithmetics start the accumulator at half a unit (round to nearest), shift the fixed point
// away and saturate to [0, 255] (Torch: std::clamp in the scalar loops, packs/packus in AVX2).
inline uint8_t clip_fixed(int32_t acc, int precision) {
  const int32_t v = acc >> precision;  // arithmetic shift (C++20-defined, universal in practice)
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// Horizontal pass over source rows [row0, row0 + dst.rows): dst row r <- src row row0 + r.
template <int C>
void horizontal_pass(const cv::Mat& src, cv::Mat& dst, int row0, const AxisTaps& taps) {
  const int out_w = dst.cols;
  cv::parallel_for_(cv::Range(0, dst.rows), [&](const cv::Range& range) {
    for (int r = range.start; r < range.end; ++r) {
      const uint8_t* in = src.ptr<uint8_t>(row0 + r);
      uint8_t* out = dst.ptr<uint8_t>(r);
      for (int x = 0; x < out_w; ++x) {
        const int32_t* k = &taps.weights[static_cast<size_t>(x) * taps.ksize];
        const uint8_t* p = in + static_cast<size_t>(taps.first[x]) * C;
        const int n = taps.count[x];
        int32_t acc[C];
        for (int c = 0; c < C; ++c) acc[c] = 1 << (taps.precision - 1);
        for (int i = 0; i < n; ++i) {
          const int32_t kw = k[i];
          for (int c = 0; c < C; ++c) acc[c] += static_cast<int32_t>(p[i * C + c]) * kw;
        }
        for (int c = 0; c < C; ++c) out[x * C + c] = clip_fixed(acc[c], taps.precision);
      }
    }
  });
}

// Vertical pass: dst row y <- sum over src rows first[y] - row0 .. (+count[y]).
void vertical_pass(const cv::Mat& src, cv::Mat& dst, int row0, const AxisTaps& taps) {
  const int width = dst.cols * dst.channels();
  cv::parallel_for_(cv::Range(0, dst.rows), [&](const cv::Range& range) {
    std::vector<int32_t> acc(width);
    for (int y = range.start; y < range.end; ++y) {
      const int32_t* k = &taps.weights[static_cast<size_t>(y) * taps.ksize];
      const int first = taps.first[y] - row0;
      const int n = taps.count[y];
      std::fill(acc.begin(), acc.end(), 1 << (taps.precision - 1));
      int32_t* a = acc.data();
      for (int i = 0; i < n; ++i) {
        const uint8_t* in = src.ptr<uint8_t>(first + i);
        const int32_t kw = k[i];
        for (int j = 0; j < width; ++j) a[j] += static_cast<int32_t>(in[j]) * kw;
      }
      uint8_t* out = dst.ptr<uint8_t>(y);
      for (int j = 0; j < width; ++j) out[j] = clip_fixed(a[j], taps.precision);
    }
  });
}

void run_horizontal(int channels, const cv::Mat& src, cv::Mat& dst, int row0, const AxisTaps& taps) {
  switch (channels) {
    case 1: return horizontal_pass<1>(src, dst, row0, taps);
    case 2: return horizontal_pass<2>(src, dst, row0, taps);
    case 3: return horizontal_pass<3>(src, dst, row0, taps);
    case 4: return horizontal_pass<4>(src, dst, row0, taps);
  }
}

}  // namespace

cv::Mat resize_u8(const cv::Mat& src, int out_w, int out_h, PilFilter filter, ResampleArithmetic arithmetic) {
  // Messages keep the name the Pillow entry points have always used.
  const std::string who = arithmetic == ResampleArithmetic::kPillow ? "pil_resize" : "resize_u8";
  if (src.empty() || src.depth() != CV_8U || src.channels() < 1 || src.channels() > 4 || src.dims != 2)
    throw Error(ErrorCode::kInvalidArgument, who + ": expected a non-empty 8-bit image with 1-4 channels");
  if (out_w <= 0 || out_h <= 0)
    throw Error(ErrorCode::kInvalidArgument, who + ": bad output size " + std::to_string(out_w) + "x" + std::to_string(out_h));
  const FilterKernel kernel = kernel_of(filter, arithmetic);
  const int channels = src.channels();
  const int in_w = src.cols, in_h = src.rows;
  // Both libraries copy when nothing changes and skip the pass of an axis whose size is kept.
  if (in_w == out_w && in_h == out_h) {
    cv::Mat copy;
    src.copyTo(copy);
    return copy;
  }
  const bool need_h = in_w != out_w;
  const bool need_v = in_h != out_h;

  cv::Mat out(out_h, out_w, CV_MAKETYPE(CV_8U, channels));
  if (need_h && !need_v) {
    run_horizontal(channels, src, out, 0, compute_taps(in_w, out_w, kernel, arithmetic));
    return out;
  }
  const AxisTaps vtaps = compute_taps(in_h, out_h, kernel, arithmetic);
  if (!need_h) {
    vertical_pass(src, out, 0, vtaps);
    return out;
  }
  // Both axes: horizontal pass first (stored as uint8), over only the rows the vertical pass reads
  // (Torch filters every row; the rows it reads are the same bytes).
  const int row_first = vtaps.first.front();
  const int row_last = vtaps.first.back() + vtaps.count.back();
  cv::Mat tmp(row_last - row_first, out_w, CV_MAKETYPE(CV_8U, channels));
  run_horizontal(channels, src, tmp, row_first, compute_taps(in_w, out_w, kernel, arithmetic));
  vertical_pass(tmp, out, row_first, vtaps);
  return out;
}

cv::Mat pil_resize_u8(const cv::Mat& src, int out_w, int out_h, PilFilter filter) {
  return resize_u8(src, out_w, out_h, filter, ResampleArithmetic::kPillow);
}

cv::Mat pil_resize(const cv::Mat& src_u8c3, int out_w, int out_h, PilFilter filter) {
  if (src_u8c3.type() != CV_8UC3) throw Error(ErrorCode::kInvalidArgument, "pil_resize: expected a CV_8UC3 RGB image");
  return pil_resize_u8(src_u8c3, out_w, out_h, filter);
}

cv::Mat pil_resize_bicubic(const cv::Mat& src_u8c3, int out_w, int out_h) {
  return pil_resize(src_u8c3, out_w, out_h, PilFilter::kBicubic);
}

cv::Mat pil_resize_bicubic_u8(const cv::Mat& src_u8, int out_w, int out_h) {
  return pil_resize_u8(src_u8, out_w, out_h, PilFilter::kBicubic);
}

std::optional<PilFilter> pil_filter_from_name(const std::string& name) {
  for (const PilFilter f : kPilFilters)
    if (name == pil_filter_name(f)) return f;
  return std::nullopt;
}

const char* pil_filter_name(PilFilter filter) {
  switch (filter) {
    case PilFilter::kBox: return "box";
    case PilFilter::kBilinear: return "bilinear";
    case PilFilter::kHamming: return "hamming";
    case PilFilter::kBicubic: return "bicubic";
    case PilFilter::kLanczos: return "lanczos";
  }
  return "?";
}

}  // namespace era
