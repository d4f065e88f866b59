// LLaVA-NeXT anyres preprocessing: HF's select_best_resolution (including the 2-tile tie), and
// the crops bit for bit against an independent Pillow implementation of HF's processor
// (tests/python/make_anyres_refs.py, fixture "fixture.anyres").
#include "family/anyres.h"

#include <gtest/gtest.h>

#include "test_support.h"

#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "era/error.h"
#include "family/anyres_packing.h"
#include "image/image_io.h"
#include "image/image_test_util.h"
#include "util/npy.h"

namespace era {
namespace {

using test::describe_mismatch;
using test::hwc_from_mat;

// The released LLaVA-v1.6 pinpoints, read as (height, width) as HF does.
std::vector<Resolution> next_pinpoints() { return {{336, 672}, {672, 336}, {672, 672}, {1008, 336}, {336, 1008}}; }

std::string anyres_dir() { return test::testdata_dir() + "/anyres"; }

const nlohmann::json& anyres_manifest() {
  static const nlohmann::json manifest = [] {
    std::ifstream in(anyres_dir() + "/manifest.json");
    if (!in) return nlohmann::json();
    return nlohmann::json::parse(in);
  }();
  return manifest;
}

#define ERA_REQUIRE_ANYRES_FIXTURE()                                                                  \
  do {                                                                                                \
    if (anyres_manifest().is_null())                                                                  \
      FAIL() << "missing " << anyres_dir() << "/manifest.json; run: /usr/bin/python3 " ERA_SOURCE_DIR \
             << "/tests/python/make_anyres_refs.py --out " << anyres_dir();                           \
  } while (0)

void expect_invalid(const std::function<void()>& f, const std::string& needle) { test::expect_invalid_argument(f, needle); }

TEST(AnyresTest, SelectBestResolutionTable) {
  struct Case {
    Resolution image, best;
  };
  // (height, width) throughout. The first block is llava.md A.6's table.
  const std::vector<Case> cases = {
      {{336, 336}, {336, 672}},  // the tie: HF takes the first 2-tile layout, 1 row x 2 columns
      {{300, 400}, {336, 672}},   {{480, 640}, {672, 672}},   {{899, 1024}, {672, 672}},  {{427, 640}, {672, 672}},
      {{1080, 1920}, {672, 672}}, {{300, 1200}, {336, 1008}}, {{672, 672}, {672, 672}},   {{2000, 2000}, {672, 672}},
      {{1, 1}, {336, 672}},       {{250, 200}, {336, 672}},   {{200, 250}, {336, 672}},  // all small: the tie
      {{336, 335}, {336, 672}},   {{337, 336}, {672, 336}},  // just over 336 px tall: 2 rows x 1 column
      {{640, 480}, {672, 672}},   {{1200, 300}, {1008, 336}}, {{1000, 333}, {1008, 336}}, {{333, 1000}, {336, 1008}},
      {{500, 300}, {672, 336}},   {{20, 900}, {336, 1008}},   {{900, 20}, {1008, 336}},   {{8, 2000}, {336, 1008}},
      {{8192, 1}, {336, 672}},  // every effective area truncates to 0: the first candidate stays
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::to_string(c.image.height) + "x" + std::to_string(c.image.width));
    const Resolution got = select_best_resolution(c.image, next_pinpoints());
    EXPECT_EQ(got.height, c.best.height);
    EXPECT_EQ(got.width, c.best.width);
  }
}

TEST(AnyresTest, SelectBestResolutionTieAndWasteRules) {
  // Equal effective area and equal waste: the earlier candidate wins, so the original LLaVA's
  // (width, height) reading of the same list (672x336 first, as HxW) flips the 336x336 choice.
  EXPECT_EQ(select_best_resolution({336, 336}, {{672, 336}, {336, 672}}), (Resolution{672, 336}));
  EXPECT_EQ(select_best_resolution({336, 336}, {{336, 672}, {672, 336}}), (Resolution{336, 672}));
  // Equal effective area, less waste later: the later candidate wins.
  EXPECT_EQ(select_best_resolution({300, 300}, {{672, 672}, {336, 672}}), (Resolution{336, 672}));
  // More effective area beats less waste.
  EXPECT_EQ(select_best_resolution({600, 600}, {{336, 672}, {672, 672}}), (Resolution{672, 672}));
  // int() truncation of the downscaled sides: 1000x999 (HxW) in 672x672 keeps int(999*0.672) =
  // 671 columns, in 1008x1008 everything: the larger wins.
  EXPECT_EQ(select_best_resolution({1000, 999}, {{672, 672}, {1008, 1008}}), (Resolution{1008, 1008}));
  expect_invalid([] { select_best_resolution({10, 10}, {}); }, "no candidate");
  expect_invalid([] { select_best_resolution({0, 10}, next_pinpoints()); }, "empty image");
}

TEST(AnyresTest, CropsGeometryAndPadding) {
  // 55x176 (HxW) -> 336x672, fitted to 210x672 (ceil(55 * 672/176) = 210), pasted at y = 63.
  cv::Mat img(55, 176, CV_8UC3, cv::Scalar(200, 100, 50));
  const AnyresCrops a = make_anyres_crops(img, next_pinpoints(), 336);
  EXPECT_EQ(a.original, (Resolution{55, 176}));
  EXPECT_EQ(a.best, (Resolution{336, 672}));
  EXPECT_EQ(a.rows, 1);
  EXPECT_EQ(a.cols, 2);
  ASSERT_EQ(a.crops.size(), 3u);
  for (const cv::Mat& c : a.crops) {
    EXPECT_EQ(c.rows, 336);
    EXPECT_EQ(c.cols, 336);
    EXPECT_EQ(c.type(), CV_8UC3);
  }
  // The base is squashed (a flat colour stays flat), the tiles are black above row 63 and from
  // row 63 + 210 = 273 down, the colour in between.
  EXPECT_EQ(a.crops[0].at<cv::Vec3b>(0, 0), cv::Vec3b(200, 100, 50));
  for (int t = 1; t <= 2; ++t) {
    EXPECT_EQ(a.crops[t].at<cv::Vec3b>(62, 100), cv::Vec3b(0, 0, 0));
    EXPECT_EQ(a.crops[t].at<cv::Vec3b>(63, 100), cv::Vec3b(200, 100, 50));
    EXPECT_EQ(a.crops[t].at<cv::Vec3b>(272, 100), cv::Vec3b(200, 100, 50));
    EXPECT_EQ(a.crops[t].at<cv::Vec3b>(273, 100), cv::Vec3b(0, 0, 0));
  }
  // A 336x336 image: the base is an exact copy.
  cv::Mat sq(336, 336, CV_8UC3);
  cv::randu(sq, 0, 256);
  const AnyresCrops b = make_anyres_crops(sq, next_pinpoints(), 336);
  EXPECT_EQ(describe_mismatch(hwc_from_mat(b.crops[0]), hwc_from_mat(sq)), "");
  // ...and its tiles are the image (no resize: 336 fits 336x672 unscaled) centred with 168 px of
  // black on each side.
  EXPECT_EQ(describe_mismatch(hwc_from_mat(b.crops[1].colRange(168, 336)), hwc_from_mat(sq.colRange(0, 168))), "");
  EXPECT_EQ(describe_mismatch(hwc_from_mat(b.crops[2].colRange(0, 168)), hwc_from_mat(sq.colRange(168, 336))), "");
  EXPECT_EQ(cv::countNonZero(b.crops[1].colRange(0, 168).reshape(1)), 0);
}

TEST(AnyresTest, RefusesBadArguments) {
  cv::Mat img(10, 10, CV_8UC3, cv::Scalar(1, 2, 3));
  expect_invalid([&] { make_anyres_crops(img, {}, 336); }, "pinpoints");
  expect_invalid([&] { make_anyres_crops(img, {{336, 600}}, 336); }, "multiple");
  expect_invalid([&] { make_anyres_crops(img, next_pinpoints(), 0); }, "tile");
  expect_invalid([&] { make_anyres_crops(cv::Mat(), next_pinpoints(), 336); }, "CV_8UC3");
  expect_invalid([&] { make_anyres_crops(cv::Mat(10, 10, CV_8UC1), next_pinpoints(), 336); }, "CV_8UC3");
}

TEST(AnyresTest, CropsBitExactWithPillow) {
  ERA_REQUIRE_ANYRES_FIXTURE();
  const auto& m = anyres_manifest();
  const int tile = m["tile"].get<int>();
  std::vector<Resolution> pinpoints;
  for (const auto& p : m["pinpoints"]) pinpoints.push_back({p[0].get<int64_t>(), p[1].get<int64_t>()});
  ASSERT_EQ(pinpoints, next_pinpoints());
  ASSERT_GE(m["cases"].size(), 8u);
  size_t crops_checked = 0;
  for (const auto& c : m["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const cv::Mat rgb = load_rgb_image(anyres_dir() + "/" + c["file"].get<std::string>());
    ASSERT_EQ(rgb.rows, c["height"].get<int>());
    ASSERT_EQ(rgb.cols, c["width"].get<int>());
    const AnyresCrops a = make_anyres_crops(rgb, pinpoints, tile);
    EXPECT_EQ(a.original, (Resolution{c["height"].get<int64_t>(), c["width"].get<int64_t>()}));
    EXPECT_EQ(a.best, (Resolution{c["best"][0].get<int64_t>(), c["best"][1].get<int64_t>()}));
    EXPECT_EQ(a.rows, c["rows"].get<int64_t>());
    EXPECT_EQ(a.cols, c["cols"].get<int64_t>());
    const auto& crops = c["crops"];
    ASSERT_EQ(a.crops.size(), crops.size());
    for (size_t i = 0; i < crops.size(); ++i) {
      SCOPED_TRACE("crop " + std::to_string(i));
      const torch::Tensor want = read_npy(anyres_dir() + "/" + crops[i].get<std::string>());
      const torch::Tensor got = hwc_from_mat(a.crops[i]);
      ASSERT_EQ(got.sizes(), want.sizes());
      EXPECT_TRUE(torch::equal(got, want)) << describe_mismatch(got, want);
      ++crops_checked;
    }
    AnyresGeometry g;
    g.original = a.original;
    g.rows = a.rows;
    g.cols = a.cols;
    g.patches_per_side = m["patches_per_side"].get<int64_t>();
    EXPECT_EQ(anyres_token_count(g), c["tokens"].get<int64_t>());
    const UnpadBox box = unpad_box(g);
    EXPECT_EQ(box.top, c["unpad"]["top"].get<int64_t>());
    EXPECT_EQ(box.bottom, c["unpad"]["bottom"].get<int64_t>());
    EXPECT_EQ(box.left, c["unpad"]["left"].get<int64_t>());
    EXPECT_EQ(box.right, c["unpad"]["right"].get<int64_t>());
  }
  std::cout << "[ anyres   ] " << m["cases"].size() << " images, " << crops_checked << " crops compared with Pillow\n";
}

}  // namespace
}  // namespace era
