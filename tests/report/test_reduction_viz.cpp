#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>

#include "report/reduction_viz.h"
#include "test_support.h"

namespace era {
namespace {

TEST(ReductionViz, ColoursClustersMarksAnchorsDarkensDropped) {
  // A mid-grey 8x8 image with a 2x2 patch grid: patches 0,1 -> cluster of anchor 0; 2 dropped;
  // 3 is an anchor of its own.
  const auto image = torch::full({8, 8, 3}, 128, torch::kUInt8);
  ImageReduction r;
  r.kept = {0, 3};
  r.assignment = {0, 0, -1, 1};
  const cv::Mat pic = draw_reduction(image, 2, r, /*scale=*/8);  // 64x64, 32 px patches
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
  save_reduction_png(path, image, 2, r);
  const cv::Mat back = cv::imread(path);
  ASSERT_FALSE(back.empty());
  EXPECT_EQ(cv::norm(back, draw_reduction(image, 2, r), cv::NORM_INF), 0.0);
}

TEST(ReductionViz, RejectsAWrongGrid) {
  ImageReduction r;
  r.assignment = {0, 0, 0};
  EXPECT_ANY_THROW(draw_reduction(torch::zeros({8, 8, 3}, torch::kUInt8), 2, r));
}

}  // namespace
}  // namespace era
