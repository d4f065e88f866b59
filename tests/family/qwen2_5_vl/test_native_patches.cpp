// Native-resolution preprocessing (Qwen2.5-VL): smart_resize against transformers' own outputs,
// and the patch layout against the formula of the processor's reshape / permute. Pixel values
// equal to transformers' processor bit for bit: tests/model/test_hf_parity.cpp (qwen cases).
#include <gtest/gtest.h>

#include <opencv2/core.hpp>

#include "era/error.h"
#include "family/frame_preprocess.h"
#include "family/qwen2_5_vl/native_patches.h"

namespace era {
namespace {

// (height, width, min_pixels, max_pixels) -> transformers 5.17
// transformers.models.qwen2_vl.image_processing_qwen2_vl.smart_resize(h, w, 28, min, max)
struct ResizeCase {
  int64_t h, w, min_pixels, max_pixels, want_h, want_w;
};
const ResizeCase kResizeCases[] = {
    {480, 640, 3136, 12845056, 476, 644}, {900, 300, 3136, 12845056, 896, 308},   {330, 1000, 3136, 12845056, 336, 1008},
    {56, 56, 3136, 12845056, 56, 56},     {10, 20, 3136, 12845056, 56, 84},       {42, 70, 3136, 12845056, 56, 56},
    {1530, 1150, 3136, 200704, 504, 364}, {4000, 3000, 3136, 1003520, 1148, 840}, {224, 224, 50176, 50176, 224, 224},
    {14, 2800, 3136, 12845056, 28, 812},  {1080, 1920, 3136, 602112, 560, 1008},  {98, 98, 3136, 12845056, 112, 112},
};

TEST(NativePatches, SmartResizeMatchesTransformers) {
  for (const auto& c : kResizeCases) {
    SCOPED_TRACE(std::to_string(c.w) + "x" + std::to_string(c.h));
    const auto got = smart_resize(c.h, c.w, 28, c.min_pixels, c.max_pixels, "image");
    EXPECT_EQ(got[0], c.want_h);
    EXPECT_EQ(got[1], c.want_w);
  }
}

TEST(NativePatches, SmartResizeRefusesExtremeAspectNamingTheImage) {
  try {
    smart_resize(10, 2010, 28, 3136, 12845056, "image strip.png");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kImage);
    EXPECT_NE(std::string(e.what()).find("strip.png"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("aspect ratio"), std::string::npos) << e.what();
  }
}

cv::Mat gradient(int rows, int cols, int seed) {
  cv::Mat m(rows, cols, CV_8UC3);
  for (int y = 0; y < rows; ++y)
    for (int x = 0; x < cols; ++x)
      m.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uint8_t>((x * 7 + seed) % 256), static_cast<uint8_t>((y * 5 + seed) % 256),
                                        static_cast<uint8_t>((x * y + seed) % 256));
  return m;
}

// Row (block_y, block_x, my, mx), column (channel, frame, py, px) holds the normalised pixel
// (frame, channel, (2 block_y + my) 14 + py, (2 block_x + mx) 14 + px): Qwen2VLImageProcessor's
// patchify, written out.
void expect_layout(const NativeItem& item, const std::vector<torch::Tensor>& frames, int64_t tp) {
  const int64_t p = 14, m = 2, gh = item.grid.h, gw = item.grid.w;
  ASSERT_EQ(item.patches.size(0), item.grid.patches());
  ASSERT_EQ(item.patches.size(1), 3 * tp * p * p);
  for (int64_t t = 0; t < item.grid.t; ++t)
    for (int64_t by = 0; by < gh / m; ++by)
      for (int64_t bx = 0; bx < gw / m; ++bx)
        for (int64_t my = 0; my < m; ++my)
          for (int64_t mx = 0; mx < m; ++mx) {
            const int64_t row = t * gh * gw + ((by * (gw / m) + bx) * m + my) * m + mx;
            for (int64_t c = 0; c < 3; ++c)
              for (int64_t f = 0; f < tp; ++f) {
                const int64_t frame = std::min<int64_t>(t * tp + f, static_cast<int64_t>(frames.size()) - 1);
                const auto want = frames[frame][c]
                                      .slice(0, (by * m + my) * p, (by * m + my + 1) * p)
                                      .slice(1, (bx * m + mx) * p, (bx * m + mx + 1) * p);
                const auto got = item.patches[row].slice(0, (c * tp + f) * p * p, (c * tp + f + 1) * p * p).view({p, p});
                ASSERT_TRUE(torch::equal(got, want)) << "row " << row << " channel " << c << " frame " << f;
              }
          }
}

TEST(NativePatches, ImageIsTwoIdenticalFramesInProcessorOrder) {
  NativeResolution spec;  // 56 x 84 is already a multiple of 28 and above min_pixels: no resize
  const std::array<float, 3> mean{0.5f, 0.4f, 0.3f}, std{0.2f, 0.25f, 0.3f};
  const cv::Mat image = gradient(56, 84, 3);
  const NativeItem item = native_patches({image}, spec, PilFilter::kBicubic, mean, std, "image");
  EXPECT_EQ(item.grid.t, 1);
  EXPECT_EQ(item.grid.h, 4);
  EXPECT_EQ(item.grid.w, 6);
  expect_layout(item, {normalize_fused(image, mean, std)}, 2);
}

TEST(NativePatches, OddFrameCountRepeatsTheLastFrame) {
  NativeResolution spec;
  const std::array<float, 3> mean{0.5f, 0.5f, 0.5f}, std{0.5f, 0.5f, 0.5f};
  std::vector<cv::Mat> frames;
  std::vector<torch::Tensor> normalized;
  for (int k = 0; k < 3; ++k) {
    frames.push_back(gradient(56, 84, 40 * k));  // at least min_pixels: not resized
    normalized.push_back(normalize_fused(frames.back(), mean, std));
  }
  const NativeItem item = native_patches(frames, spec, PilFilter::kBicubic, mean, std, "video");
  EXPECT_EQ(item.grid.t, 2);  // 3 frames -> 4 (the third repeated) -> 2 temporal patches
  EXPECT_EQ(item.grid.h, 4);
  EXPECT_EQ(item.grid.w, 6);
  expect_layout(item, normalized, 2);
}

TEST(NativePatches, FramesOfDifferentSizesAreAnErrorNamingTheVideo) {
  NativeResolution spec;
  try {
    native_patches({gradient(28, 56, 0), gradient(56, 56, 0)}, spec, PilFilter::kBicubic, {0, 0, 0}, {1, 1, 1}, "video clip.mp4");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kImage);
    EXPECT_NE(std::string(e.what()).find("clip.mp4"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace era
