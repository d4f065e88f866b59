// LLaVA "pad" preprocessing: C++ vs pil_reference.preprocess_pad, bit for bit.
#include "image/clip_preprocess.h"

#include <gtest/gtest.h>

#include <iostream>

#include "era/error.h"
#include "image/image_io.h"
#include "image/image_test_util.h"

namespace era {
namespace {

using test::describe_mismatch;
using test::image_manifest;
using test::image_path;
using test::mat_from_hwc;

ClipImageConfig config_for(int size) {
  ClipImageConfig cfg;
  cfg.size = size;
  return cfg;
}

// Pillow-decoded pixels in, so only expand/resize/normalise are under test.
TEST(ClipPreprocessTest, PadPathBitExactFromPillowPixels) {
  ERA_REQUIRE_IMAGE_FIXTURE();
  int n = 0, exact = 0;
  for (const auto& c : image_manifest()["decode"]) {
    const cv::Mat rgb = mat_from_hwc(read_npy(image_path(c["rgb"])));
    for (const auto& p : c["preprocess"]) {
      SCOPED_TRACE(c["name"].get<std::string>() + " size " + std::to_string(p["size"].get<int>()));
      const torch::Tensor got = preprocess_llava_pad(rgb, config_for(p["size"]));
      const std::string mismatch = describe_mismatch(got, read_npy(image_path(p["ref"])));
      EXPECT_EQ(mismatch, "");
      ++n;
      exact += mismatch.empty();
    }
  }
  EXPECT_GE(n, 30);
  std::cout << "[ pad      ] " << exact << "/" << n << " preprocess cases bit-exact (Pillow-decoded input)\n";
}

// The whole path from the file: load_rgb_image (OpenCV decode) + preprocess_llava_pad.
TEST(ClipPreprocessTest, PadPathBitExactFromFiles) {
  ERA_REQUIRE_IMAGE_FIXTURE();
  int n = 0, exact = 0;
  for (const auto& c : image_manifest()["decode"]) {
    if (c["format"] == "GIF") continue;  // see ImageIoTest.GifIsDecodedExactlyOrRefusedClearly
    if (c["decode_tolerance"].get<int>() != 0) continue;  // known decoder difference (CMYK JPEG)
    cv::Mat rgb;
    try {
      rgb = load_rgb_image(image_path(c["file"]));
    } catch (const Error& e) {
      ADD_FAILURE() << c["name"].get<std::string>() << ": " << e.what();
      continue;
    }
    for (const auto& p : c["preprocess"]) {
      SCOPED_TRACE(c["name"].get<std::string>() + " size " + std::to_string(p["size"].get<int>()));
      const torch::Tensor got = preprocess_llava_pad(rgb, config_for(p["size"]));
      const std::string mismatch = describe_mismatch(got, read_npy(image_path(p["ref"])));
      EXPECT_EQ(mismatch, "");
      ++n;
      exact += mismatch.empty();
    }
  }
  EXPECT_GE(n, 30);
  std::cout << "[ pad      ] " << exact << "/" << n << " preprocess cases bit-exact (C++-decoded files)\n";
}

TEST(ClipPreprocessTest, NormalizeEveryByteValue) {
  ERA_REQUIRE_IMAGE_FIXTURE();
  const auto& c = image_manifest()["normalize"];
  const cv::Mat rgb = mat_from_hwc(read_npy(image_path(c["src"])));
  const torch::Tensor got = normalize_to_chw(rgb, ClipImageConfig{});
  EXPECT_EQ(describe_mismatch(got, read_npy(image_path(c["ref"]))), "");
}

TEST(ClipPreprocessTest, ExpandToSquareGeometry) {
  const std::array<uint8_t, 3> pad{122, 116, 104};
  // 5 wide, 2 high: canvas 5x5, pasted at y = (5-2)/2 = 1, the odd row goes to the bottom.
  cv::Mat img(2, 5, CV_8UC3, cv::Scalar(1, 2, 3));
  cv::Mat sq = expand_to_square(img, pad);
  ASSERT_EQ(sq.rows, 5);
  ASSERT_EQ(sq.cols, 5);
  for (int y = 0; y < 5; ++y) {
    const bool inside = y == 1 || y == 2;
    const auto px = sq.at<cv::Vec3b>(y, 0);
    EXPECT_EQ(px, inside ? cv::Vec3b(1, 2, 3) : cv::Vec3b(122, 116, 104)) << "row " << y;
  }
  // 2 wide, 5 high: pasted at x = 1.
  cv::Mat tall(5, 2, CV_8UC3, cv::Scalar(7, 8, 9));
  sq = expand_to_square(tall, pad);
  EXPECT_EQ(sq.at<cv::Vec3b>(0, 0), cv::Vec3b(122, 116, 104));
  EXPECT_EQ(sq.at<cv::Vec3b>(0, 1), cv::Vec3b(7, 8, 9));
  EXPECT_EQ(sq.at<cv::Vec3b>(4, 2), cv::Vec3b(7, 8, 9));
  EXPECT_EQ(sq.at<cv::Vec3b>(4, 3), cv::Vec3b(122, 116, 104));
  // Square input: an equal copy.
  cv::Mat square(3, 3, CV_8UC3, cv::Scalar(4, 5, 6));
  sq = expand_to_square(square, pad);
  EXPECT_NE(sq.data, square.data);
  EXPECT_EQ(cv::norm(sq, square, cv::NORM_INF), 0.0);
}

TEST(ClipPreprocessTest, OutputShapeAndPadValue) {
  const cv::Mat img(10, 40, CV_8UC3, cv::Scalar(0, 0, 0));
  const torch::Tensor t = preprocess_llava_pad(img);
  ASSERT_EQ(t.sizes(), (std::vector<int64_t>{3, 336, 336}));
  EXPECT_EQ(t.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(t.is_contiguous());
  // The top-left corner is pure pad colour: about (-0.0113, -0.0112, -0.0013) after normalising.
  EXPECT_NEAR(t[0][0][0].item<float>(), -0.0113f, 1e-3f);
  EXPECT_NEAR(t[1][0][0].item<float>(), -0.0112f, 1e-3f);
  EXPECT_NEAR(t[2][0][0].item<float>(), -0.0013f, 1e-3f);
  // Centre is black: about (-1.792, -1.752, -1.480).
  EXPECT_NEAR(t[0][168][168].item<float>(), -1.792f, 1e-3f);
  EXPECT_NEAR(t[2][168][168].item<float>(), -1.480f, 1e-3f);
}

TEST(ClipPreprocessTest, RejectsBadInput) {
  EXPECT_THROW(preprocess_llava_pad(cv::Mat()), Error);
  EXPECT_THROW(preprocess_llava_pad(cv::Mat(4, 4, CV_8UC1)), Error);
  EXPECT_THROW(normalize_to_chw(cv::Mat(4, 4, CV_8UC4), ClipImageConfig{}), Error);
  EXPECT_THROW(preprocess_llava_pad(cv::Mat(4, 4, CV_8UC3), config_for(0)), Error);
}

}  // namespace
}  // namespace era
