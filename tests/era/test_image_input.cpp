// era::Image: pixels and encoded bytes from memory go through exactly the preprocessing of a file.
#include <gtest/gtest.h>

#include <cstring>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "bundle_session.h"
#include "era/debug.h"
#include "era/era.h"
#include "test_support.h"

namespace era {
namespace {

std::string sample_png() { return test::source_dir() + "/tests/data/sample.png"; }

Request request_with(std::vector<Image> buffers, std::vector<std::string> files = {}) {
  Request r;
  r.images = std::move(files);
  r.image_buffers = std::move(buffers);
  r.prompt = "What is shown in this image?";
  r.max_new_tokens = 12;
  r.stop_at_eos = false;
  r.reduction.method = "era";
  r.reduction.tokens = 32;
  return r;
}

// Byte-identical crops (the uint8 RGB images before normalisation).
bool same_crops(const PreparedInput& a, const PreparedInput& b) {
  if (a.crops.size() != b.crops.size()) return false;
  for (size_t i = 0; i < a.crops.size(); ++i) {
    const Image &x = a.crops[i], &y = b.crops[i];
    if (x.width() != y.width() || x.height() != y.height() || x.size_bytes() != y.size_bytes()) return false;
    if (std::memcmp(x.data(), y.data(), x.size_bytes()) != 0) return false;
  }
  return true;
}

void expect_same_input(const debug::PreparedTensors& a, const debug::PreparedTensors& b) {
  EXPECT_EQ(a.token_ids, b.token_ids);
  EXPECT_EQ(a.image_sizes, b.image_sizes);
  ASSERT_EQ(a.pixel_values.sizes(), b.pixel_values.sizes());
  EXPECT_TRUE(torch::equal(a.pixel_values, b.pixel_values));  // bit-identical, not merely close
  EXPECT_TRUE(same_crops(a, b));
}

// The pixels OpenCV decodes from sample.png, handed over in every layout, give the file's inputs
// and the file's answer.
TEST(ImageInput, PixelsInEveryLayoutEqualTheFile) {
  const auto from_file = request_with({}, {sample_png()});
  const debug::PreparedTensors want = debug::prepare(test::bundle_session(), from_file);
  const Result want_answer = test::bundle_session().generate(from_file);

  const cv::Mat bgr = cv::imread(sample_png(), cv::IMREAD_COLOR);
  ASSERT_FALSE(bgr.empty());
  cv::Mat rgb, rgba, bgra;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  cv::cvtColor(bgr, rgba, cv::COLOR_BGR2RGBA);
  cv::cvtColor(bgr, bgra, cv::COLOR_BGR2BGRA);
  // A padded stride: rows of a bigger buffer, as a GUI toolkit's image often has.
  cv::Mat padded(bgr.rows, bgr.cols + 7, CV_8UC3, cv::Scalar(1, 2, 3));
  bgr.copyTo(padded(cv::Rect(0, 0, bgr.cols, bgr.rows)));
  const cv::Mat padded_view = padded(cv::Rect(0, 0, bgr.cols, bgr.rows));

  const std::vector<std::pair<std::string, Image>> images{
      {"bgr", Image::from_pixels(bgr.data, bgr.cols, bgr.rows, static_cast<int>(bgr.step), PixelFormat::kBGR8)},
      {"rgb", Image::from_pixels(rgb.data, rgb.cols, rgb.rows, static_cast<int>(rgb.step), PixelFormat::kRGB8)},
      {"rgba", Image::from_pixels(rgba.data, rgba.cols, rgba.rows, static_cast<int>(rgba.step), PixelFormat::kRGBA8)},
      {"bgra", Image::from_pixels(bgra.data, bgra.cols, bgra.rows, static_cast<int>(bgra.step), PixelFormat::kBGRA8)},
      {"padded", Image::from_pixels(padded_view.data, padded_view.cols, padded_view.rows, static_cast<int>(padded_view.step),
                                    PixelFormat::kBGR8)},
      {"file", Image::from_file(sample_png())},
  };
  for (const auto& [name, image] : images) {
    SCOPED_TRACE(name);
    const auto request = request_with({image});
    expect_same_input(debug::prepare(test::bundle_session(), request), want);
    const Result answer = test::bundle_session().generate(request);
    EXPECT_EQ(answer.tokens, want_answer.tokens);
    EXPECT_EQ(answer.text, want_answer.text);
    ASSERT_EQ(answer.reductions.size(), 1u);
    EXPECT_EQ(answer.reductions[0].kept, want_answer.reductions[0].kept);
  }
}

TEST(ImageInput, EncodedBytesEqualTheFile) {
  const std::string bytes = test::read_file(sample_png());
  const auto image = Image::from_encoded(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "upload.png");
  expect_same_input(debug::prepare(test::bundle_session(), request_with({image})),
                    debug::prepare(test::bundle_session(), request_with({}, {sample_png()})));
}

// Grey is replicated into three equal channels, as PIL's convert("RGB").
TEST(ImageInput, GreyIsReplicated) {
  const cv::Mat grey = cv::imread(sample_png(), cv::IMREAD_GRAYSCALE);
  cv::Mat rgb;
  cv::cvtColor(grey, rgb, cv::COLOR_GRAY2RGB);
  const auto a = debug::prepare(
      test::bundle_session(),
      request_with({Image::from_pixels(grey.data, grey.cols, grey.rows, static_cast<int>(grey.step), PixelFormat::kGray8)}));
  const auto b = debug::prepare(
      test::bundle_session(),
      request_with({Image::from_pixels(rgb.data, rgb.cols, rgb.rows, static_cast<int>(rgb.step), PixelFormat::kRGB8)}));
  expect_same_input(a, b);
}

// from_pixels copies: the caller's buffer may change or go away right after.
TEST(ImageInput, PixelsAreCopied) {
  cv::Mat bgr = cv::imread(sample_png(), cv::IMREAD_COLOR);
  const Image image = Image::from_pixels(bgr.data, bgr.cols, bgr.rows, static_cast<int>(bgr.step), PixelFormat::kBGR8);
  const auto before = debug::prepare(test::bundle_session(), request_with({image}));
  bgr.setTo(cv::Scalar(0, 0, 0));
  bgr.release();
  expect_same_input(debug::prepare(test::bundle_session(), request_with({image})), before);
  EXPECT_EQ(image.source(), Image::Source::kPixels);
  EXPECT_EQ(image.size_bytes(), static_cast<size_t>(image.width()) * image.height() * 3);
}

// Files come first, then buffers: each fills its own placeholder, in that order.
TEST(ImageInput, FilesThenBuffersFillThePlaceholdersInOrder) {
  const cv::Mat black(20, 30, CV_8UC3, cv::Scalar(0, 0, 0));
  const auto buffer = Image::from_pixels(black.data, black.cols, black.rows, static_cast<int>(black.step), PixelFormat::kRGB8);
  auto r = request_with({buffer}, {sample_png()});
  r.use_template = false;
  r.prompt = "USER: <image> and <image> ASSISTANT:";
  const auto in = debug::prepare(test::bundle_session(), r);
  ASSERT_EQ(in.image_sizes.size(), 2u);
  const auto png = debug::prepare(test::bundle_session(), request_with({}, {sample_png()}));
  EXPECT_EQ(in.image_sizes[0], png.image_sizes[0]);
  EXPECT_EQ(in.image_sizes[1], (std::array<int64_t, 2>{20, 30}));
  EXPECT_TRUE(torch::equal(in.pixel_values[0], png.pixel_values[0]));
  r.image_buffers.push_back(buffer);  // three images, two placeholders
  try {
    debug::prepare(test::bundle_session(), r);
    FAIL() << "a placeholder mismatch must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kPrompt);
  }
}

void expect_image_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    FAIL() << "expected era::Error(kImage) mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kImage) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ImageInput, BadBuffersAreRefused) {
  const std::vector<uint8_t> pixels(10 * 10 * 3, 128);
  expect_image_error([] { Image::from_pixels(nullptr, 10, 10, 30, PixelFormat::kRGB8); }, "null");
  expect_image_error([&] { Image::from_pixels(pixels.data(), 0, 10, 30, PixelFormat::kRGB8); }, "bad size");
  expect_image_error([&] { Image::from_pixels(pixels.data(), 10, 10, 29, PixelFormat::kRGB8); }, "stride");
  expect_image_error([&] { Image::from_pixels(pixels.data(), 10, 10, 30, PixelFormat::kRGBA8); }, "stride");
  expect_image_error([] { Image::from_encoded(nullptr, 0, "upload.png"); }, "upload.png");
  const std::string junk = "not an image at all";
  const auto bad = Image::from_encoded(reinterpret_cast<const uint8_t*>(junk.data()), junk.size(), "upload.png");
  expect_image_error([&] { debug::prepare(test::bundle_session(), request_with({bad})); }, "upload.png");
  expect_image_error([&] { test::bundle_session().generate(request_with({Image::from_file("/no/such.png")})); }, "/no/such.png");

  // The Session's own pixel limit applies to buffers as it does to files.
  SessionOptions small;
  small.max_image_pixels = 99;
  Session limited = Session::open(test::bundle_dir(), small);
  const auto ok = Image::from_pixels(pixels.data(), 10, 10, 30, PixelFormat::kRGB8);
  expect_image_error([&] { debug::prepare(limited, request_with({ok})); }, "100");
}

}  // namespace
}  // namespace era
