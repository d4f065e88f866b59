#pragma once
// Helpers for the image tests: the fixture manifest written by tests/python/make_image_refs.py
// and conversions between cv::Mat and the reference tensors.
#include <gtest/gtest.h>
#include <torch/script.h>
#include <opencv2/core.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "test_support.h"
#include "util/npy.h"

namespace era::test {

inline std::string images_dir() { return testdata_dir() + "/images"; }
inline std::string image_path(const std::string& rel) { return images_dir() + "/" + rel; }

// The manifest, or an empty object when the fixture has not been run (tests then fail with a hint).
inline const nlohmann::json& image_manifest() {
  static const nlohmann::json manifest = [] {
    std::ifstream in(images_dir() + "/manifest.json");
    if (!in) return nlohmann::json();
    return nlohmann::json::parse(in);
  }();
  return manifest;
}

#define ERA_REQUIRE_IMAGE_FIXTURE()                                                                                            \
  do {                                                                                                                         \
    if (::era::test::image_manifest().is_null())                                                                               \
      FAIL() << "missing " << ::era::test::images_dir()                                                                        \
             << "/manifest.json; run: " ERA_SOURCE_DIR "/tests/python/make_image_refs.py --out " << ::era::test::images_dir(); \
  } while (0)

// uint8 [H, W, C] tensor -> CV_8UC(C) Mat (deep copy).
inline cv::Mat mat_from_hwc(const torch::Tensor& t) {
  EXPECT_EQ(t.scalar_type(), torch::kUInt8);
  EXPECT_EQ(t.dim(), 3);
  const auto c = t.contiguous();
  cv::Mat view(static_cast<int>(c.size(0)), static_cast<int>(c.size(1)), CV_MAKETYPE(CV_8U, static_cast<int>(c.size(2))),
               c.data_ptr<uint8_t>());
  return view.clone();
}

// CV_8UC(C) Mat -> uint8 [H, W, C] tensor (deep copy).
inline torch::Tensor hwc_from_mat(const cv::Mat& m) {
  const cv::Mat c = m.isContinuous() ? m : m.clone();
  return torch::from_blob(const_cast<uint8_t*>(c.ptr<uint8_t>()), {c.rows, c.cols, c.channels()}, torch::kUInt8).clone();
}

// "" when identical (shape, dtype, bits); otherwise a description with the largest difference.
inline std::string describe_mismatch(const torch::Tensor& got, const torch::Tensor& want) {
  std::ostringstream os;
  if (got.scalar_type() != want.scalar_type()) {
    os << "dtype " << got.scalar_type() << " vs " << want.scalar_type();
    return os.str();
  }
  if (got.sizes() != want.sizes()) {
    os << "shape " << got.sizes() << " vs " << want.sizes();
    return os.str();
  }
  if (torch::equal(got, want)) return "";
  const auto diff = (got.to(torch::kFloat64) - want.to(torch::kFloat64)).abs();
  const auto flat = diff.reshape({-1});
  const int64_t at = flat.argmax().item<int64_t>();
  os << "max abs diff " << flat[at].item<double>() << " (" << (diff > 0).sum().item<int64_t>() << " of " << diff.numel()
     << " elements differ; first max at flat index " << at << ")";
  return os.str();
}

}  // namespace era::test
