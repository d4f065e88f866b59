// LLaVA-OneVision video through a Session on the random-weight OneVision bundle: token counts
// (196 pooled tokens a frame + one newline), the budget rules (per frame, global, keep ratio),
// every method running or refusing by name, images and videos taking their placeholders in prompt
// order, and the errors a video request can meet. Exact values against transformers are
// HfParity.OnevisionVideoFramesPooledWithOneNewline's job.
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>

#include "era/era.h"
#include "family/llava_onevision/onevision_packing.h"
#include "test_support.h"

namespace era {
namespace {

// `n` frames of w x h, each a different gradient.
Video synthetic_video(int n, int w = 320, int h = 240) {
  std::vector<Image> frames;
  for (int k = 0; k < n; ++k) {
    cv::Mat rgb(h, w, CV_8UC3);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        rgb.at<cv::Vec3b>(y, x) =
            cv::Vec3b(static_cast<uint8_t>(x + 40 * k), static_cast<uint8_t>(y), static_cast<uint8_t>(x ^ y));
    frames.push_back(Image::from_pixels(rgb.data, w, h, static_cast<int>(rgb.step), PixelFormat::kRGB8));
  }
  return Video::from_frames(std::move(frames), "synthetic");
}

Request video_request(int frames) {
  Request req;
  req.prompt = "What happens in the video?";
  req.videos = {synthetic_video(frames)};
  req.max_new_tokens = 2;
  req.stop_at_eos = false;
  return req;
}

Session& onevision() {
  static Session session = Session::open(test::onevision_bundle_dir());
  return session;
}

TEST(OnevisionVideo, FullVideoIs196TokensAFramePlusOneNewline) {
  const Result r = onevision().generate(video_request(3));
  EXPECT_EQ(r.stats.visual_tokens, 3 * 196 + 1);
  ASSERT_EQ(r.reductions.size(), 1u);
  const ImageReduction& red = r.reductions[0];
  EXPECT_EQ(red.media, MediaKind::kVideo);
  EXPECT_EQ(red.original_tokens, 3 * 196);
  ASSERT_EQ(red.kept.size(), 3u * 196 + 1);
  EXPECT_EQ(red.kept.back(), -1);  // the newline closes the video
  EXPECT_EQ(red.kept[196], 196);   // frame 1 starts where frame 0 ended
  const auto in = onevision().prepare(video_request(3));
  EXPECT_EQ(in.media, (std::vector<MediaKind>{MediaKind::kVideo}));
  EXPECT_EQ(in.crops_per_image, (std::vector<int64_t>{3}));
  ASSERT_EQ(in.crops.size(), 3u);
  EXPECT_EQ(in.crops[0].width(), 384);  // frames are resized to the tower's square
  EXPECT_EQ(std::count(in.token_ids.begin(), in.token_ids.end(), in.video_token_id), 1);
}

TEST(OnevisionVideo, BudgetsPerFrameGlobalAndRatio) {
  Request req = video_request(4);
  req.reduction.method = "era";
  req.reduction.tokens = 100;  // the video's budget, spread: 25 a frame
  Result r = onevision().generate(req);
  EXPECT_EQ(r.stats.visual_tokens, 4 * 25 + 1);
  for (int f = 0; f < 4; ++f) {  // each frame keeps its own 25
    const auto& kept = r.reductions[0].kept;
    EXPECT_EQ(std::count_if(kept.begin(), kept.end(), [&](int64_t k) { return k >= f * 196 && k < (f + 1) * 196; }), 25);
  }
  bool rectified = false;  // LAR: recycled tokens carry b_k > 1
  for (const float b : r.reductions[0].bias) rectified = rectified || b > 1.0f;
  EXPECT_TRUE(rectified);
  req.reduction.scope = "image";  // one global selection over the whole video
  r = onevision().generate(req);
  EXPECT_EQ(r.stats.visual_tokens, 100 + 1);
  req.reduction.scope = "crop";
  req.reduction.tokens = 0;
  req.reduction.keep_ratio = 0.25f;  // of every frame: 49 of 196
  r = onevision().generate(req);
  EXPECT_EQ(r.stats.visual_tokens, 4 * 49 + 1);
}

TEST(OnevisionVideo, EveryMethodRunsOrRefusesByName) {
  Request req = video_request(2);
  req.reduction.tokens = 64;
  req.reduction.baselines.fastv_layer = 1;  // the tiny decoder has 2 layers
  req.reduction.baselines.dart_layer = 1;
  for (const auto& method : available_methods()) {
    SCOPED_TRACE(method.name);
    req.reduction.method = method.name;
    try {
      const Result r = onevision().generate(req);
      EXPECT_EQ(r.tokens.size(), 2u);
      if (method.name != "full") {
        EXPECT_LT(r.stats.visual_tokens, 2 * 196 + 1);
      }
    } catch (const Error& e) {
      EXPECT_EQ(method.name, "visionzip") << e.what();
      EXPECT_NE(std::string(e.what()).find("CLS"), std::string::npos) << e.what();
    }
  }
}

TEST(OnevisionVideo, ImagesAndVideosTakeTheirPlaceholdersInPromptOrder) {
  Request req = video_request(2);
  const std::string png = test::scratch_dir("onevision_video_mixed") + "/image.png";
  cv::imwrite(png, cv::Mat(200, 300, CV_8UC3, cv::Scalar(10, 200, 30)));
  req.images = {png};
  req.use_template = false;
  req.prompt = "<|im_start|>user\n<video>\nand <image>\nCompare.<|im_end|>\n<|im_start|>assistant\n";
  const auto in = onevision().prepare(req);
  EXPECT_EQ(in.media, (std::vector<MediaKind>{MediaKind::kVideo, MediaKind::kImage}));
  EXPECT_EQ(in.crops_per_image.at(0), 2);  // the video's frames first
  const Result r = onevision().generate(req);
  ASSERT_EQ(r.reductions.size(), 2u);
  EXPECT_EQ(r.reductions[0].media, MediaKind::kVideo);
  EXPECT_EQ(r.reductions[1].media, MediaKind::kImage);
  // the template places both when the question names neither: images first
  req.use_template = true;
  req.prompt = "Compare.";
  const auto templated = onevision().prepare(req);
  EXPECT_NE(templated.prompt.find("<image>\n<video>\nCompare."), std::string::npos) << templated.prompt;
  EXPECT_EQ(templated.media, (std::vector<MediaKind>{MediaKind::kImage, MediaKind::kVideo}));
}

void expect_error(const std::function<void()>& f, ErrorCode code, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(OnevisionVideo, BadVideoRequestsAreClearErrors) {
  // more frames than the context holds: refused before a frame is decoded, naming the way out
  Request longest = video_request(1);
  longest.videos = {Video::from_frames(std::vector<Image>(200, synthetic_video(1).frames()[0]), "long.mp4")};
  expect_error([&] { onevision().generate(longest); }, ErrorCode::kPrompt,
               {"prompt too long", "long.mp4: 200 frames", "--frames"});
  // a raw prompt without the video's placeholder
  Request raw = video_request(1);
  raw.use_template = false;
  raw.prompt = "<|im_start|>user\nWhat?<|im_end|>\n<|im_start|>assistant\n";
  expect_error([&] { onevision().generate(raw); }, ErrorCode::kPrompt, {"0 <video> placeholder(s) but 1 video(s)"});
  // an unreadable video file
  Request unreadable = video_request(1);
  const std::string bad = test::scratch_dir("onevision_video_bad") + "/clip.mp4";
  test::write_file(bad, "not a video");
  unreadable.videos = {Video::from_file(bad, 4)};
  expect_error([&] { onevision().generate(unreadable); }, ErrorCode::kImage, {"video " + bad});
  // a model without video input
  Session llava = Session::open(test::bundle_dir());
  expect_error([&] { llava.generate(video_request(1)); }, ErrorCode::kPrompt, {"synthetic", "takes no video"});
  // and to that model "<video>" is just text
  Request text_only;
  text_only.prompt = "Is <video> a tag?";
  text_only.max_new_tokens = 1;
  EXPECT_NO_THROW(llava.generate(text_only));
}

// pool_frames: every per-token tensor pooled the same way, [F, 729, .] -> [F, 196, .].
TEST(OnevisionVideo, PoolFramesPoolsTokensAndSaliencyAlike) {
  VisionOutput v;
  v.embeddings = torch::randn({3, 729, 8});
  v.features = torch::randn({3, 729, 5});
  v.cls_logits = torch::randn({3, 2, 729});
  v.cls_probs = torch::rand({3, 2, 729});
  v.mean_logits = torch::randn({3, 2, 729});
  v.mean_probs = torch::rand({3, 2, 729});
  const VisionOutput p = pool_frames(v, 1, 2, 27, 2);
  EXPECT_EQ(p.embeddings.sizes(), (std::vector<int64_t>{2, 196, 8}));
  EXPECT_EQ(p.mean_probs.sizes(), (std::vector<int64_t>{2, 2, 196}));
  // a constant grid stays constant; frame selection starts at `first`
  VisionOutput c = v;
  c.embeddings = torch::ones({3, 729, 8}) * torch::arange(3).view({3, 1, 1});
  EXPECT_TRUE(torch::allclose(pool_frames(c, 1, 2, 27, 2).embeddings[0], torch::ones({196, 8})));
  // the same interpolation for a map row as for an embedding channel
  c.embeddings = v.mean_probs.transpose(1, 2).contiguous();
  EXPECT_TRUE(torch::allclose(pool_frames(c, 0, 3, 27, 2).embeddings.transpose(1, 2), pool_frames(v, 0, 3, 27, 2).mean_probs));
}

}  // namespace
}  // namespace era
