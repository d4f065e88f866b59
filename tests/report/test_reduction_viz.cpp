#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>

#include "era/era.h"
#include "era/reduction_picture.h"
#include "report/reduction_viz.h"
#include "test_support.h"

namespace era {
namespace {

TEST(ReductionViz, TintsClustersRingsAnchorsDimsDropped) {
  // A mid-grey 8x8 image with a 2x2 patch grid: patches 0,1 -> cluster of anchor 0; 2 dropped;
  // 3 is an anchor of its own.
  const cv::Mat image(8, 8, CV_8UC3, cv::Scalar(128, 128, 128));
  ImageReduction r;
  r.kept = {0, 3};
  r.assignment = {0, 0, -1, 1};
  const cv::Mat pic = draw_reduction_bgr(image, 2, r, /*scale=*/8);  // 64x64, 32 px patches
  ASSERT_EQ(pic.rows, 64);
  const auto at = [&](int x, int y) { return pic.at<cv::Vec3b>(y, x); };
  EXPECT_EQ(at(3, 29), at(35, 29));  // same cluster, same tint (away from the anchor ring)
  EXPECT_NE(at(3, 29), at(35, 35));  // another cluster
  for (int c = 0; c < 3; ++c) {      // a light tint: the grey stays within 0.3 of a colour
    EXPECT_LE(std::abs(at(35, 29)[c] - 128), 0.3 * 255 + 1) << c;
  }
  const auto dropped = at(8, 40);  // dimmed grey, still visible: 0.45 * 128
  EXPECT_EQ(dropped[0], dropped[1]);
  EXPECT_EQ(dropped[1], dropped[2]);
  EXPECT_NEAR(dropped[0], 58, 2);
  EXPECT_EQ(at(16 + 12, 16), cv::Vec3b(255, 255, 255));  // the anchor's ring (radius 2/5 of a patch)
  EXPECT_NE(at(16, 16), cv::Vec3b(255, 255, 255));       // ...leaves the patch itself visible
  EXPECT_NE(at(48 + 12, 16), cv::Vec3b(255, 255, 255));  // no ring on a non-anchor patch

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

// The request's picture on the real pipeline: a LLaVA-1.5 image at twice its size under the light
// overlay (kept patches within the tint of the real pixels, dropped ones dimmed, not black), a
// legend strip with text, two images side by side, and one stitched picture for a NeXT image.
Result run(Session& session, const Request& r, PreparedInput* in) {
  *in = session.prepare(r);
  return session.generate(r);
}

Request request_with(const std::vector<std::string>& images, const std::string& method, int64_t tokens) {
  Request r;
  r.images = images;
  r.prompt = "What is it?";
  r.max_new_tokens = 1;
  r.reduction.method = method;
  r.reduction.tokens = tokens;
  return r;
}

TEST(ReductionViz, RequestPictureShowsTheImageUnderALightOverlay) {
  Session session = Session::open(test::bundle_dir());
  const std::string png = test::source_dir() + "/tests/data/sample.png";
  PreparedInput in;
  const Result result = run(session, request_with({png}, "era", 64), &in);
  const Image picture = draw_request_reduction(in, result, session.info());
  ASSERT_EQ(picture.width(), 12 + 672 + 12);
  ASSERT_EQ(picture.height(), 12 + 672 + 12 + 2 * 22 + 12);
  const cv::Mat pic(picture.height(), picture.width(), CV_8UC3, const_cast<uint8_t*>(picture.data()));  // RGB
  const cv::Mat crop(336, 336, CV_8UC3, const_cast<uint8_t*>(in.crops[0].data()));
  const ImageReduction& red = result.reductions[0];
  int tinted = 0, dimmed = 0;
  for (int64_t i = 0; i < 576; ++i) {
    const bool anchor = std::find(red.kept.begin(), red.kept.end(), i) != red.kept.end();
    const int px = static_cast<int>(i % 24) * 28, py = static_cast<int>(i / 24) * 28;  // 14 px patches at scale 2
    for (int y = py + 2; y < py + 26; y += 3) {
      for (int x = px + 2; x < px + 26; x += 3) {
        const cv::Vec3b got = pic.at<cv::Vec3b>(12 + y, 12 + x), real = crop.at<cv::Vec3b>(y / 2, x / 2);
        for (int c = 0; c < 3; ++c) {
          if (red.assignment[static_cast<size_t>(i)] < 0) {
            EXPECT_NEAR(got[c], 0.45 * real[c], 3.0) << "dropped patch " << i;
            ++dimmed;
          } else if (!anchor) {
            ASSERT_LE(std::abs(got[c] - real[c]), 0.3 * 255 + 3) << "patch " << i << " hides the image";
            ++tinted;
          }
        }
      }
    }
  }
  EXPECT_GT(tinted, 1000);
  // The legend: dark text pixels in the strip under the picture.
  const cv::Mat legend = pic(cv::Rect(0, 12 + 672 + 12, pic.cols, 2 * 22));
  cv::Mat grey;
  cv::cvtColor(legend, grey, cv::COLOR_RGB2GRAY);
  EXPECT_GT(cv::countNonZero(grey < 100), 200);

  // Two images: side by side in one picture.
  const Result two = run(session, request_with({png, test::source_dir() + "/tests/data/sample.jpg"}, "era", 64), &in);
  const Image both = draw_request_reduction(in, two, session.info());
  EXPECT_EQ(both.width(), 12 + 672 + 24 + 672 + 12);
  EXPECT_EQ(both.height(), 12 + 672 + 12 + 3 * 22 + 12);
  // A result of another request does not fit.
  EXPECT_THROW(draw_request_reduction(in, result, session.info()), Error);
}

TEST(ReductionViz, NextImageIsOneStitchedPicture) {
  Session session = Session::open(test::next_bundle_dir());
  PreparedInput in;
  const Result result = run(session, request_with({test::source_dir() + "/tests/data/sample.png"}, "era", 160), &in);
  ASSERT_EQ(in.crops_per_image.size(), 1u);
  const int64_t tiles = in.crops_per_image[0] - 1;
  ASSERT_GE(tiles, 2);
  const Image picture = draw_request_reduction(in, result, session.info());
  // base crop (as tall as the grid) + 12 px + the grid of 336 px tiles, in a 12 px margin
  const int64_t h = in.image_sizes[0][0], w = in.image_sizes[0][1];
  const int64_t rows = (tiles == 4) ? 2 : (w >= h ? 1 : tiles), cols = tiles / rows;
  EXPECT_EQ(picture.width(), std::max<int64_t>(12 + rows * 336 + 12 + cols * 336 + 12, 560)) << h << "x" << w;
  EXPECT_EQ(picture.height(), 12 + rows * 336 + 12 + 2 * 22 + 12);
}

TEST(ReductionViz, UnwritablePathIsNamed) {
  const cv::Mat image(8, 8, CV_8UC3, cv::Scalar(1, 2, 3));
  const Image pixels = Image::from_pixels(image.data, 8, 8, static_cast<int>(image.step), PixelFormat::kRGB8);
  try {
    save_png(pixels, "/no/such/folder/viz.png");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/folder/viz.png"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace era
