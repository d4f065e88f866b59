// LLaVA-1.5 preprocessing ("pad" and "crop", any filter and shortest edge): C++ vs
// pil_reference.preprocess_pad / preprocess_llava15, bit for bit.
#include "family/clip_preprocess.h"

#include <gtest/gtest.h>

#include <iostream>
#include <set>
#include <string>

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
      const torch::Tensor got = preprocess_llava15(rgb, config_for(p["size"]));
      const std::string mismatch = describe_mismatch(got, read_npy(image_path(p["ref"])));
      EXPECT_EQ(mismatch, "");
      ++n;
      exact += mismatch.empty();
    }
  }
  EXPECT_GE(n, 30);
  std::cout << "[ pad      ] " << exact << "/" << n << " preprocess cases bit-exact (Pillow-decoded input)\n";
}

// The whole path from the file: load_rgb_image (OpenCV decode) + preprocess_llava15.
TEST(ClipPreprocessTest, PadPathBitExactFromFiles) {
  ERA_REQUIRE_IMAGE_FIXTURE();
  int n = 0, exact = 0;
  for (const auto& c : image_manifest()["decode"]) {
    if (c["format"] == "GIF") continue;                   // see ImageIoTest.GifIsDecodedExactlyOrRefusedClearly
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
      const torch::Tensor got = preprocess_llava15(rgb, config_for(p["size"]));
      const std::string mismatch = describe_mismatch(got, read_npy(image_path(p["ref"])));
      EXPECT_EQ(mismatch, "");
      ++n;
      exact += mismatch.empty();
    }
  }
  EXPECT_GE(n, 30);
  std::cout << "[ pad      ] " << exact << "/" << n << " preprocess cases bit-exact (C++-decoded files)\n";
}

// Both modes, shortest edge above / equal / below the crop, every filter, odd and tiny images.
TEST(ClipPreprocessTest, BothModesEveryFilterBitExact) {
  ERA_REQUIRE_IMAGE_FIXTURE();
  const auto& cases = image_manifest()["llava15"];
  ASSERT_GE(cases.size(), 60u);
  std::set<std::string> seen;
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    ClipImageConfig cfg;
    cfg.size = c["size"];
    cfg.shortest_edge = c["shortest_edge"];
    cfg.mode = c["mode"] == "crop" ? AspectMode::kCrop : AspectMode::kPad;
    const auto filter = pil_filter_from_name(c["filter"]);
    ASSERT_TRUE(filter.has_value());
    cfg.filter = *filter;
    const cv::Mat rgb = mat_from_hwc(read_npy(image_path(c["rgb"])));
    EXPECT_EQ(describe_mismatch(preprocess_llava15(rgb, cfg), read_npy(image_path(c["ref"]))), "");
    seen.insert(c["mode"].get<std::string>() + "/" + c["filter"].get<std::string>() +
                (cfg.shortest_edge > cfg.size   ? "/up"
                 : cfg.shortest_edge < cfg.size ? "/down"
                                                : "/same"));
  }
  for (const char* k : {"pad/bicubic/up", "pad/bicubic/down", "pad/bicubic/same", "crop/bicubic/up", "crop/bicubic/down",
                        "crop/bicubic/same", "crop/bilinear/up", "crop/lanczos/up"})
    EXPECT_TRUE(seen.count(k)) << k;
}

// The modes differ exactly where they should: the same non-square image gives other pixels,
// a square one the same.
TEST(ClipPreprocessTest, PadAndCropDifferOnlyForNonSquareImages) {
  cv::Mat img(48, 64, CV_8UC3);
  cv::randu(img, 0, 256);
  ClipImageConfig pad, crop;
  pad.size = crop.size = 32;
  crop.mode = AspectMode::kCrop;
  EXPECT_GT(cv::norm(llava15_crop(img, pad), llava15_crop(img, crop), cv::NORM_INF), 0.0);
  const cv::Mat sq = img(cv::Rect(0, 0, 48, 48)).clone();
  EXPECT_EQ(cv::norm(llava15_crop(sq, pad), llava15_crop(sq, crop), cv::NORM_INF), 0.0);
}

// HF's geometry: shortest-edge sizes truncate, the centre crop floors, a short side is padded
// black at ceil((size - dim) / 2).
TEST(ClipPreprocessTest, ShortestEdgeAndCentreCropGeometry) {
  cv::Mat img(5, 7, CV_8UC3, cv::Scalar(200, 100, 50));  // 7 wide, 5 high
  const cv::Mat r = resize_shortest_edge(img, 10, PilFilter::kBilinear);
  EXPECT_EQ(r.cols, 14);  // int(10 * 7 / 5)
  EXPECT_EQ(r.rows, 10);
  const cv::Mat t = resize_shortest_edge(cv::Mat(3, 7, CV_8UC3, cv::Scalar(1, 2, 3)), 4, PilFilter::kBicubic);
  EXPECT_EQ(t.cols, 9);  // int(4 * 7 / 3) = int(9.33)
  EXPECT_EQ(t.rows, 4);
  cv::Mat marked(4, 9, CV_8UC3, cv::Scalar(0, 0, 0));
  marked.at<cv::Vec3b>(0, 2) = cv::Vec3b(255, 255, 255);  // first column kept: (9 - 4) // 2 = 2
  const cv::Mat c = center_crop(marked, 4);
  EXPECT_EQ(c.at<cv::Vec3b>(0, 0), cv::Vec3b(255, 255, 255));
  // 4 wide crop of 3 high: padded, image at row ceil(1 / 2) = 1, row 0 black.
  const cv::Mat p = center_crop(cv::Mat(3, 4, CV_8UC3, cv::Scalar(9, 9, 9)), 4);
  EXPECT_EQ(p.at<cv::Vec3b>(0, 0), cv::Vec3b(0, 0, 0));
  EXPECT_EQ(p.at<cv::Vec3b>(1, 0), cv::Vec3b(9, 9, 9));
  EXPECT_EQ(p.at<cv::Vec3b>(3, 3), cv::Vec3b(9, 9, 9));
  EXPECT_THROW(center_crop(img, 0), Error);
  EXPECT_THROW(resize_shortest_edge(img, 0, PilFilter::kBicubic), Error);
  // A tall sliver keeps its aspect ratio: the width is the short side.
  const cv::Mat sliver = resize_shortest_edge(cv::Mat(1000, 1, CV_8UC3, cv::Scalar(5, 5, 5)), 2, PilFilter::kBox);
  EXPECT_EQ(sliver.cols, 2);
  EXPECT_EQ(sliver.rows, 2000);
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
  const torch::Tensor t = preprocess_llava15(img);
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
  EXPECT_THROW(preprocess_llava15(cv::Mat()), Error);
  EXPECT_THROW(preprocess_llava15(cv::Mat(4, 4, CV_8UC1)), Error);
  EXPECT_THROW(normalize_to_chw(cv::Mat(4, 4, CV_8UC4), ClipImageConfig{}), Error);
  EXPECT_THROW(preprocess_llava15(cv::Mat(4, 4, CV_8UC3), config_for(0)), Error);
}

}  // namespace
}  // namespace era
