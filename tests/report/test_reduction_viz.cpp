#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>

#include "era/reduction_picture.h"
#include "report/reduction_viz.h"
#include "test_support.h"

namespace era {
namespace {

TEST(ReductionViz, ColoursClustersMarksAnchorsDarkensDropped) {
  // A mid-grey 8x8 image with a 2x2 patch grid: patches 0,1 -> cluster of anchor 0; 2 dropped;
  // 3 is an anchor of its own.
  const cv::Mat image(8, 8, CV_8UC3, cv::Scalar(128, 128, 128));
  ImageReduction r;
  r.kept = {0, 3};
  r.assignment = {0, 0, -1, 1};
  const cv::Mat pic = draw_reduction_bgr(image, 2, r, /*scale=*/8);  // 64x64, 32 px patches
  ASSERT_EQ(pic.rows, 64);
  const auto at = [&](int x, int y) { return pic.at<cv::Vec3b>(y, x); };
  EXPECT_EQ(at(8, 8), at(40, 8));         // same cluster, same tint (away from the anchor mark)
  EXPECT_NE(at(8, 8), at(40, 40));        // another cluster
  const auto dropped = at(8, 40);          // darkened grey: 0.45 * 128 + 0.55 * 32
  EXPECT_EQ(dropped[0], dropped[1]);
  EXPECT_EQ(dropped[1], dropped[2]);
  EXPECT_LT(dropped[0], 80);
  EXPECT_EQ(at(16, 16), cv::Vec3b(255, 255, 255));  // anchor mark at the patch centre
  EXPECT_NE(at(48, 16), cv::Vec3b(255, 255, 255));  // no mark on a non-anchor patch

  const auto path = test::scratch_dir("viz") + "/r.png";
  // The public API: the same picture as RGB pixels, written as a PNG.
  const Image crop = Image::from_pixels(image.data, 8, 8, static_cast<int>(image.step), PixelFormat::kRGB8);
  save_png(draw_reduction(crop, 2, r), path);
  const cv::Mat back = cv::imread(path);
  ASSERT_FALSE(back.empty());
  EXPECT_EQ(cv::norm(back, draw_reduction_bgr(image, 2, r), cv::NORM_INF), 0.0);
}

TEST(ReductionViz, RejectsAWrongGrid) {
  ImageReduction r;
  r.assignment = {0, 0, 0};
  EXPECT_ANY_THROW(draw_reduction_bgr(cv::Mat(8, 8, CV_8UC3, cv::Scalar(0, 0, 0)), 2, r));
}

}  // namespace
}  // namespace era
