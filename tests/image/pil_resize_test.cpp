// Pillow-exact resize (every convolution filter): C++ on the exact pixels Pillow resized vs Pillow's output.
// The torch uint8 arithmetic: C++ vs goldens of torch 2.11's uint8 antialiased interpolate.
#include "image/pil_resize.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <set>
#include <string>

#include <opencv2/imgproc.hpp>

#include "era/error.h"
#include "image/image_test_util.h"

namespace era {
namespace {

using test::describe_mismatch;
using test::hwc_from_mat;
using test::image_manifest;
using test::image_path;
using test::mat_from_hwc;

TEST(PilResizeTest, BitExactWithPillow) {
  ERA_REQUIRE_IMAGE_FIXTURE();
  const auto& cases = image_manifest()["resize"];
  ASSERT_GE(cases.size(), 20u);
  int exact = 0;
  std::set<std::string> filters;
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const cv::Mat src = mat_from_hwc(read_npy(image_path(c["src"])));
    const torch::Tensor want = read_npy(image_path(c["ref"]));
    const int ow = c["out_w"], oh = c["out_h"];
    const auto filter = pil_filter_from_name(c["filter"]);
    ASSERT_TRUE(filter.has_value()) << c["filter"];
    filters.insert(pil_filter_name(*filter));
    const cv::Mat got = src.channels() == 3 ? pil_resize(src, ow, oh, *filter) : pil_resize_u8(src, ow, oh, *filter);
    ASSERT_EQ(got.cols, ow);
    ASSERT_EQ(got.rows, oh);
    ASSERT_TRUE(got.isContinuous());
    const std::string mismatch = describe_mismatch(hwc_from_mat(got), want);
    EXPECT_EQ(mismatch, "");
    exact += mismatch.empty();
  }
  std::cout << "[ resize   ] " << exact << "/" << cases.size() << " cases bit-exact with Pillow\n";
  EXPECT_EQ(filters.size(), kPilFilters.size());  // every filter a manifest can name was checked
}

TEST(PilResizeTest, FilterNamesRoundTripAndOthersAreRefused) {
  for (const PilFilter f : kPilFilters) EXPECT_EQ(pil_filter_from_name(pil_filter_name(f)), f);
  EXPECT_FALSE(pil_filter_from_name("nearest").has_value());
  EXPECT_FALSE(pil_filter_from_name("Bicubic").has_value());
  EXPECT_FALSE(pil_filter_from_name("").has_value());
}

// The filters differ: the same downscale gives different bytes per filter (so a filter that is
// recorded but not used would show).
TEST(PilResizeTest, FiltersGiveDifferentPixels) {
  ERA_REQUIRE_IMAGE_FIXTURE();
  const cv::Mat src = mat_from_hwc(read_npy(image_path(image_manifest()["resize"][0]["src"])));
  std::vector<cv::Mat> outs;
  for (const PilFilter f : kPilFilters) outs.push_back(pil_resize(src, 211, 157, f));
  for (size_t a = 0; a < outs.size(); ++a)
    for (size_t b = a + 1; b < outs.size(); ++b)
      EXPECT_GT(cv::norm(outs[a], outs[b], cv::NORM_INF), 0.0)
          << pil_filter_name(kPilFilters[a]) << " vs " << pil_filter_name(kPilFilters[b]);
}

TEST(PilResizeTest, GenericChannelPathMatchesRgbPath) {
  ERA_REQUIRE_IMAGE_FIXTURE();
  // Each channel is filtered independently: resizing the planes one at a time gives the same bytes.
  const auto& c = image_manifest()["resize"][0];
  const cv::Mat src = mat_from_hwc(read_npy(image_path(c["src"])));
  const cv::Mat rgb = pil_resize_bicubic(src, 300, 123);
  std::vector<cv::Mat> planes;
  cv::split(src, planes);
  for (int ch = 0; ch < 3; ++ch) {
    cv::Mat one = pil_resize_bicubic_u8(planes[ch], 300, 123);
    cv::Mat want;
    cv::extractChannel(rgb, want, ch);
    EXPECT_EQ(cv::norm(one, want, cv::NORM_INF), 0.0) << "channel " << ch;
  }
  // Four channels (no alpha premultiplication) behave the same way.
  cv::Mat rgbx;
  cv::Mat fourth = planes[0].clone();
  cv::merge(std::vector<cv::Mat>{planes[0], planes[1], planes[2], fourth}, rgbx);
  const cv::Mat out4 = pil_resize_bicubic_u8(rgbx, 300, 123);
  cv::Mat first3;
  cv::cvtColor(out4, first3, cv::COLOR_RGBA2RGB);
  EXPECT_EQ(cv::norm(first3, rgb, cv::NORM_INF), 0.0);
}

TEST(PilResizeTest, StridedInputAndSameSizeCopy) {
  ERA_REQUIRE_IMAGE_FIXTURE();
  const auto& c = image_manifest()["resize"][0];
  const cv::Mat src = mat_from_hwc(read_npy(image_path(c["src"])));
  // A region of interest (non-contiguous rows) must give the same result as its compact copy.
  const cv::Mat roi = src(cv::Rect(13, 7, 301, 222));
  ASSERT_FALSE(roi.isContinuous());
  EXPECT_EQ(cv::norm(pil_resize_bicubic(roi, 150, 400), pil_resize_bicubic(roi.clone(), 150, 400), cv::NORM_INF), 0.0);
  // Same size: a deep copy.
  const cv::Mat same = pil_resize_bicubic(roi, roi.cols, roi.rows);
  EXPECT_TRUE(same.isContinuous());
  EXPECT_NE(same.data, roi.data);
  EXPECT_EQ(cv::norm(same, roi, cv::NORM_INF), 0.0);
}

TEST(PilResizeTest, RejectsBadArguments) {
  const cv::Mat rgb(4, 4, CV_8UC3, cv::Scalar(1, 2, 3));
  EXPECT_THROW(pil_resize_bicubic(rgb, 0, 5), Error);
  EXPECT_THROW(pil_resize_bicubic(rgb, 5, -1), Error);
  EXPECT_THROW(pil_resize_bicubic(cv::Mat(), 5, 5), Error);
  EXPECT_THROW(pil_resize_bicubic(cv::Mat(4, 4, CV_8UC1), 5, 5), Error);
  EXPECT_THROW(pil_resize_bicubic_u8(cv::Mat(4, 4, CV_32FC3), 5, 5), Error);
  EXPECT_NO_THROW(pil_resize_bicubic_u8(cv::Mat(4, 4, CV_8UC1, cv::Scalar(9)), 5, 5));
}

TEST(PilResizeTest, ConstantImageStaysConstant) {
  // Normalised weights sum to 1 in fixed point (to within rounding): a flat image stays flat.
  for (int v : {0, 1, 127, 254, 255}) {
    const cv::Mat flat(37, 53, CV_8UC3, cv::Scalar(v, v, v));
    for (auto [w, h] : {std::pair{336, 336}, std::pair{5, 3}, std::pair{53, 100}}) {
      const cv::Mat out = pil_resize_bicubic(flat, w, h);
      double lo, hi;
      cv::minMaxLoc(out.reshape(1), &lo, &hi);
      EXPECT_EQ(lo, v);
      EXPECT_EQ(hi, v);
    }
  }
}

// The synthetic source of tests/data/torch_resize (make_torch_resize_refs.py's source_image, the
// same uint32 arithmetic): noise blocks beside ramps that wrap around from 255 to 0.
cv::Mat torch_golden_source(int width, int height) {
  cv::Mat m(height, width, CV_8UC3);
  for (uint32_t y = 0; y < static_cast<uint32_t>(height); ++y)
    for (uint32_t x = 0; x < static_cast<uint32_t>(width); ++x)
      for (uint32_t c = 0; c < 3; ++c) {
        uint32_t h = (x * 73856093u) ^ (y * 19349663u) ^ (c * 83492791u);
        h ^= h >> 13;
        h *= 0x5bd1e995u;
        h ^= h >> 15;
        const uint32_t v = (x / 16 + y / 16) % 3 == 0 ? (h & 255u) : ((3 * x + 2 * y + 85 * c + (h & 15u)) & 255u);
        m.ptr<uint8_t>(static_cast<int>(y))[x * 3 + c] = static_cast<uint8_t>(v);
      }
  return m;
}

// torch.nn.functional.interpolate(uint8, antialias=True) bytes, made by torch 2.11 (the Debian
// route's torch 1.13 has no uint8 antialias, so they are committed). Pillow's arithmetic must give
// other bytes on every case: a kTorchUint8 that fell back to Pillow's fixed point would fail here.
TEST(PilResizeTest, TorchUint8BitExactWithTorchGoldens) {
  const std::string dir = test::source_dir() + "/tests/data/torch_resize";
  std::ifstream in(dir + "/index.json");
  ASSERT_TRUE(in) << "missing " << dir << "/index.json (tests/python/make_torch_resize_refs.py writes it)";
  const auto index = nlohmann::json::parse(in);
  const cv::Mat src = torch_golden_source(index["source"]["width"], index["source"]["height"]);
  ASSERT_EQ(describe_mismatch(hwc_from_mat(src), read_npy(dir + "/" + index["source"]["file"].get<std::string>())), "")
      << "the C++ formula no longer matches the generator's source image";
  const auto& cases = index["cases"];
  ASSERT_GE(cases.size(), 8u);
  std::set<std::string> filters;
  bool width_only = false, height_only = false;
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const int ow = c["out_w"], oh = c["out_h"];
    const auto filter = pil_filter_from_name(c["filter"]);
    ASSERT_TRUE(filter.has_value()) << c["filter"];
    filters.insert(pil_filter_name(*filter));
    width_only |= oh == src.rows && ow != src.cols;
    height_only |= ow == src.cols && oh != src.rows;
    const torch::Tensor want = read_npy(dir + "/" + c["file"].get<std::string>());
    const cv::Mat got = resize_u8(src, ow, oh, *filter, ResampleArithmetic::kTorchUint8);
    ASSERT_EQ(got.cols, ow);
    ASSERT_EQ(got.rows, oh);
    EXPECT_EQ(describe_mismatch(hwc_from_mat(got), want), "");
    const cv::Mat pillow = resize_u8(src, ow, oh, *filter, ResampleArithmetic::kPillow);
    EXPECT_NE(describe_mismatch(hwc_from_mat(pillow), want), "") << "this case cannot tell Pillow from torch";
  }
  EXPECT_EQ(filters, (std::set<std::string>{"bilinear", "bicubic"}));
  EXPECT_TRUE(width_only && height_only);  // the one-pass paths, as well as both passes
}

TEST(PilResizeTest, ResizeU8ArithmeticsAndFilters) {
  cv::Mat src(45, 67, CV_8UC3);
  cv::randu(src, 0, 256);
  // kPillow through resize_u8 is the Pillow entry point, for every filter.
  for (const PilFilter f : kPilFilters)
    EXPECT_EQ(cv::norm(resize_u8(src, 30, 80, f, ResampleArithmetic::kPillow), pil_resize(src, 30, 80, f), cv::NORM_INF), 0.0)
        << pil_filter_name(f);
  // Torch's uint8 path has bilinear and bicubic only; the others are refused by name.
  for (const PilFilter f : {PilFilter::kBox, PilFilter::kHamming, PilFilter::kLanczos})
    test::expect_invalid_argument([&] { resize_u8(src, 30, 80, f, ResampleArithmetic::kTorchUint8); }, pil_filter_name(f));
  test::expect_invalid_argument([&] { resize_u8(src, 0, 80, PilFilter::kBicubic, ResampleArithmetic::kTorchUint8); },
                                "bad output size");
  // Channels are independent in the torch arithmetic too (torch packs 1-4 channels the same way).
  const cv::Mat rgb = resize_u8(src, 30, 80, PilFilter::kBicubic, ResampleArithmetic::kTorchUint8);
  std::vector<cv::Mat> planes;
  cv::split(src, planes);
  for (int ch = 0; ch < 3; ++ch) {
    cv::Mat want;
    cv::extractChannel(rgb, want, ch);
    EXPECT_EQ(cv::norm(resize_u8(planes[ch], 30, 80, PilFilter::kBicubic, ResampleArithmetic::kTorchUint8), want, cv::NORM_INF),
              0.0)
        << "channel " << ch;
  }
  // Same size: a copy, as torch's.
  const cv::Mat same = resize_u8(src, src.cols, src.rows, PilFilter::kBilinear, ResampleArithmetic::kTorchUint8);
  EXPECT_NE(same.data, src.data);
  EXPECT_EQ(cv::norm(same, src, cv::NORM_INF), 0.0);
}

TEST(PilResizeTest, SpeedReport640x480To336) {
  cv::Mat src(480, 640, CV_8UC3);
  cv::randu(src, 0, 256);
  pil_resize_bicubic(src, 336, 336);  // warm-up
  const int reps = 20;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) pil_resize_bicubic(src, 336, 336);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
  std::cout << "[ resize   ] 640x480 -> 336x336 RGB: " << ms << " ms per call (cv threads " << cv::getNumThreads() << ")\n";
  EXPECT_LT(ms, 1000.0);
}

}  // namespace
}  // namespace era
