// Video input: lmms-eval's frame sampling, frames decoded with OpenCV's video reader in order, a
// folder of frame images, and a clear kImage error for every kind of bad video.
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>

#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <numeric>

#include "era/error.h"
#include "era/video.h"
#include "test_support.h"
#include "video/video_io.h"

namespace era {
namespace {

// numpy.linspace(0, n - 1, k, dtype=int), printed by numpy 2.x.
TEST(VideoIo, FrameIndicesAreNumpyLinspaceTruncated) {
  EXPECT_EQ(uniform_frame_indices(100, 16), (std::vector<int64_t>{0, 6, 13, 19, 26, 33, 39, 46, 52, 59, 66, 72, 79, 85, 92, 99}));
  EXPECT_EQ(uniform_frame_indices(10, 16), (std::vector<int64_t>{0, 0, 1, 1, 2, 3, 3, 4, 4, 5, 6, 6, 7, 7, 8, 9}));
  EXPECT_EQ(uniform_frame_indices(7, 3), (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(uniform_frame_indices(1, 4), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(uniform_frame_indices(5, 1), (std::vector<int64_t>{0}));
  EXPECT_EQ(uniform_frame_indices(1000, 7), (std::vector<int64_t>{0, 166, 333, 499, 666, 832, 999}));
  const auto i32 = uniform_frame_indices(300, 32);
  EXPECT_EQ(std::vector<int64_t>(i32.begin(), i32.begin() + 6), (std::vector<int64_t>{0, 9, 19, 28, 38, 48}));
  EXPECT_EQ(i32.back(), 299);
  EXPECT_TRUE(uniform_frame_indices(0, 4).empty());
}

// A 20-frame MJPEG AVI whose frame k is a flat grey of 10 * k: what is read back tells which
// frame it was (JPEG keeps a flat colour within a few levels).
std::string write_counting_video(const std::string& dir, int frames) {
  const std::string path = dir + "/counting.avi";
  cv::VideoWriter writer(path, cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), 10.0, cv::Size(64, 48));
  if (!writer.isOpened()) return "";
  for (int k = 0; k < frames; ++k) writer.write(cv::Mat(48, 64, CV_8UC3, cv::Scalar::all(10 * k)));
  writer.release();
  return path;
}

int frame_number(const cv::Mat& rgb) { return static_cast<int>(std::lround(cv::mean(rgb)[0] / 10.0)); }

TEST(VideoIo, ReadsTheSampledFramesInOrderAsRgb) {
  const std::string path = write_counting_video(test::scratch_dir("video_io_counting"), 20);
  if (path.empty()) GTEST_SKIP() << "this OpenCV cannot write MJPEG AVI";
  const auto frames = read_video_frames(path, 4);
  ASSERT_EQ(frames.size(), 4u);
  std::vector<int> seen;
  for (const auto& f : frames) {
    EXPECT_EQ(f.type(), CV_8UC3);
    EXPECT_EQ(f.cols, 64);
    EXPECT_EQ(f.rows, 48);
    seen.push_back(frame_number(f));
  }
  EXPECT_EQ(seen, (std::vector<int>{0, 6, 12, 19}));  // linspace(0, 19, 4)
  // more frames than the video has: repeats, as lmms-eval
  const auto many = read_video_frames(path, 25);
  ASSERT_EQ(many.size(), 25u);
  EXPECT_EQ(frame_number(many[0]), 0);
  EXPECT_EQ(frame_number(many[1]), 0);
  EXPECT_EQ(frame_number(many.back()), 19);
}

// transformers 5.17's Qwen2VLVideoProcessor.sample_frames(VideoMetadata(total, video_fps), fps=...)
// and VideoMetadata.sampled_fps, printed by it (temporal patch 2, min 4, max 768 frames).
TEST(VideoIo, FpsIndicesAreTransformersQwenSampleFrames) {
  struct Case {
    int64_t total;
    double video_fps, fps;
    std::vector<int64_t> indices;
  };
  const std::vector<Case> cases = {
      {30, 10, 2, {0, 5, 10, 15, 20, 25}},
      {100, 30, 2.2, {0, 16, 33, 50, 66, 83}},
      {7, 24, 2, {0, 1, 3, 5}},  // below min_frames: 4
      {1000, 30, 0.5, {0, 62, 125, 187, 250, 312, 375, 437, 500, 562, 625, 687, 750, 812, 875, 937}},
      {50, 30, 1.5, {0, 12, 25, 37}},
      {333, 29.97, 3, {0,   10,  20,  31,  41,  52,  62,  72,  83,  93,  104, 114, 124, 135, 145, 156,
                       166, 176, 187, 197, 208, 218, 228, 239, 249, 260, 270, 280, 291, 301, 312, 322}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(fps_frame_indices(c.total, c.video_fps, c.fps, 2, 4, 768), c.indices) << c.total << " " << c.fps;
  }
  // capped at 768 frames: transformers gives 768 indices summing to 1150128, the last 2996
  const auto capped = fps_frame_indices(3000, 30, 10, 2, 4, 768);
  ASSERT_EQ(capped.size(), 768u);
  EXPECT_EQ(std::accumulate(capped.begin(), capped.end(), int64_t{0}), 1150128);
  EXPECT_EQ(capped.back(), 2996);
  // transformers' arange makes 233 indices here, the last one (1001) past the video's end: era
  // keeps the 232 the count asks for
  const auto exact = fps_frame_indices(1001, 30, 7, 2, 4, 768);
  ASSERT_EQ(exact.size(), 232u);
  EXPECT_EQ(exact.back(), 996);
  // other families (multiple 1, no minimum): transformers' base rule, int(total / video_fps x fps)
  EXPECT_EQ(fps_frame_indices(20, 10, 1.5, 1, 1, 1024), (std::vector<int64_t>{0, 6, 13}));
  EXPECT_TRUE(fps_frame_indices(1, 10, 2, 2, 4, 768).empty());  // shorter than one temporal patch
  EXPECT_TRUE(fps_frame_indices(20, 0, 2, 2, 4, 768).empty());  // no frame rate
}

TEST(VideoIo, SamplesPerSecondOfTheVideosTime) {
  const std::string path = write_counting_video(test::scratch_dir("video_io_fps"), 20);  // 20 frames at 10 fps
  if (path.empty()) GTEST_SKIP() << "this OpenCV cannot write MJPEG AVI";
  FrameSampling sampling;
  sampling.fps = 4;  // 2 s x 4 = 8 frames, arange(0, 20, 2.5)
  sampling.multiple = 2;
  sampling.min_frames = 4;
  sampling.max_frames = 768;
  const VideoFrames v = sample_video_frames(path, sampling);
  std::vector<int> seen;
  for (const auto& f : v.frames) seen.push_back(frame_number(f));
  EXPECT_EQ(seen, (std::vector<int>{0, 2, 5, 7, 10, 12, 15, 17}));
  EXPECT_DOUBLE_EQ(v.sampled_fps, 4.0);  // 8 / 20 x 10
  // by count, the rate is measured as well (the Qwen2.5-VL time step follows it)
  FrameSampling count;
  count.frames = 5;
  EXPECT_DOUBLE_EQ(sample_video_frames(path, count).sampled_fps, 2.5);
}

TEST(VideoIo, FpsAndFrameCountExcludeEachOther) {
  const std::string dir = test::scratch_dir("video_io_fps_args");
  const std::string path = write_counting_video(dir, 20);
  if (path.empty()) GTEST_SKIP() << "this OpenCV cannot write MJPEG AVI";
  try {
    Video::from_path(path, 4, 2.0);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("exclude each other"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Video::from_file_at_fps(path, 0), Error);
  EXPECT_THROW(Video::from_file_at_fps(path, 2000), Error);
  const Video file = Video::from_path(path, 0, 2.0);
  EXPECT_EQ(file.source(), Video::Source::kFile);
  EXPECT_DOUBLE_EQ(file.sampling_fps(), 2.0);
  EXPECT_EQ(file.frame_count(), 0);
  // a folder's frames are taken as that rate's
  cv::imwrite(dir + "/frame_0.png", cv::Mat(8, 8, CV_8UC3, cv::Scalar::all(0)));
  const Video folder = Video::from_path(dir, 0, 3.0);
  EXPECT_EQ(folder.source(), Video::Source::kFrames);
  EXPECT_DOUBLE_EQ(folder.sampled_fps(), 3.0);
}

void expect_video_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kImage) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(VideoIo, BadVideosAreImageErrorsNamingThePath) {
  const std::string dir = test::scratch_dir("video_io_bad");
  expect_video_error([&] { read_video_frames(dir + "/missing.mp4", 4); }, "missing.mp4: no such file");
  expect_video_error([&] { read_video_frames(dir, 4); }, "not a regular file");
  test::write_file(dir + "/empty.mp4", "");
  expect_video_error([&] { read_video_frames(dir + "/empty.mp4", 4); }, "empty.mp4: the file is empty");
  test::write_file(dir + "/notes.mp4", "these are not video frames\n");
  expect_video_error([&] { read_video_frames(dir + "/notes.mp4", 4); }, "notes.mp4:");
  // a video container without a single frame
  {
    cv::VideoWriter writer(dir + "/zero.avi", cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), 10.0, cv::Size(64, 48));
    writer.release();
  }
  if (std::filesystem::exists(dir + "/zero.avi"))
    expect_video_error([&] { read_video_frames(dir + "/zero.avi", 4); }, "zero.avi: has no frames");
  // a URL is never opened (VideoCapture would)
  expect_video_error([&] { read_video_frames("http://127.0.0.1:9/stream.mp4", 4); }, "no such file");
}

TEST(VideoIo, FolderOfFramesIsReadInNameOrderAndSampled) {
  const std::string dir = test::scratch_dir("video_io_folder");
  for (int k : {3, 0, 2, 1, 4}) {
    cv::imwrite(dir + "/frame_000" + std::to_string(k) + ".png", cv::Mat(8, 8, CV_8UC3, cv::Scalar::all(k)));
  }
  test::write_file(dir + "/notes.txt", "not a frame");
  const Video all = Video::from_folder(dir);
  ASSERT_EQ(all.frame_count(), 5);
  for (int k = 0; k < 5; ++k) EXPECT_EQ(all.frames()[k].name(), dir + "/frame_000" + std::to_string(k) + ".png");
  const Video two = Video::from_folder(dir, 2);
  ASSERT_EQ(two.frame_count(), 2);
  EXPECT_EQ(two.frames()[1].name(), dir + "/frame_0004.png");
  EXPECT_EQ(Video::from_path(dir).frame_count(), 5);
  EXPECT_EQ(Video::from_path(dir + "/clip.mp4").frame_count(), 16);  // a file: 16 unless asked

  const std::string empty = test::scratch_dir("video_io_empty_folder");
  expect_video_error([&] { Video::from_folder(empty); }, "holds no frame image");
  expect_video_error([&] { Video::from_folder(empty + "/nope"); }, "not a folder");
  EXPECT_THROW(Video::from_file("a.mp4", 0), Error);
  EXPECT_THROW(Video::from_file("a.mp4", Video::kMaxFrames + 1), Error);
  EXPECT_THROW(Video::from_frames({}), Error);
}

// A baseline greyscale JPEG of w x h flat grey pixels, by hand: one Huffman code per table
// (DC difference 0, end of block), so each 8x8 block is 2 bits and a 16000 x 16000 image is 1 MB,
// as the hostile files are (encoding it with OpenCV would need 768 MB).
std::string flat_jpeg(int w, int h) {
  const auto be16 = [](std::string& s, int v) { s += static_cast<char>((v >> 8) & 255), s += static_cast<char>(v & 255); };
  std::string j = "\xFF\xD8\xFF\xDB";
  be16(j, 67);
  j += std::string(1, '\0') + std::string(64, '\1');  // quantisation table 0: all ones
  j += "\xFF\xC0";
  be16(j, 11);
  j += '\x08';
  be16(j, h);
  be16(j, w);
  j += std::string("\x01\x01\x11\x00", 4);     // one component, 1x1 sampling, table 0
  for (const char table : {'\x00', '\x10'}) {  // DC 0 and AC 0: one symbol (0), code "0"
    j += "\xFF\xC4";
    be16(j, 20);
    j += table;
    j += '\x01';
    j += std::string(16, '\0');
  }
  j += "\xFF\xDA";
  be16(j, 8);
  j += std::string("\x01\x01\x00\x00\x3F\x00", 6);
  const uint64_t blocks = static_cast<uint64_t>((w + 7) / 8) * static_cast<uint64_t>((h + 7) / 8);
  j += std::string((blocks * 2 + 7) / 8, '\0');
  return j + "\xFF\xD9";
}

// A one-frame MJPEG AVI written by hand: the container declares width x height (avih, strh and
// strf), whatever the JPEG frame holds.
std::string one_frame_avi(int width, int height, const std::string& frame) {
  const auto u16 = [](std::string& s, uint32_t v) { s += static_cast<char>(v & 255), s += static_cast<char>((v >> 8) & 255); };
  const auto u32 = [&](std::string& s, uint32_t v) { u16(s, v & 0xFFFF), u16(s, v >> 16); };
  const auto chunk = [&](const std::string& id, const std::string& data) {
    std::string c = id;
    u32(c, static_cast<uint32_t>(data.size()));
    return c + data + (data.size() % 2 ? std::string(1, '\0') : "");
  };
  const auto size = static_cast<uint32_t>(frame.size());
  const auto w = static_cast<uint32_t>(width), h = static_cast<uint32_t>(height);
  std::string avih;
  for (const uint32_t v : {100000u, 0u, 0u, 0x10u, 1u, 0u, 1u, size, w, h, 0u, 0u, 0u, 0u}) u32(avih, v);
  std::string strh = "vidsMJPG";
  for (const uint32_t v : {0u, 0u, 0u, 1u, 10u, 0u, 1u, size, 0xFFFFFFFFu, 0u}) u32(strh, v);  // 10 fps, 1 frame
  for (const uint32_t v : {0u, 0u, w, h}) u16(strh, v);
  std::string strf;
  for (const uint32_t v : {40u, w, h}) u32(strf, v);
  u16(strf, 1);
  u16(strf, 24);
  strf += "MJPG";
  for (const uint32_t v : {w * h * 3, 0u, 0u, 0u, 0u}) u32(strf, v);
  std::string idx1 = "00dc";
  for (const uint32_t v : {0x10u, 4u, size}) u32(idx1, v);
  const std::string strl = chunk("LIST", "strl" + chunk("strh", strh) + chunk("strf", strf));
  const std::string hdrl = chunk("LIST", "hdrl" + chunk("avih", avih) + strl);
  return chunk("RIFF", "AVI " + hdrl + chunk("LIST", "movi" + chunk("00dc", frame)) + chunk("idx1", idx1));
}

int64_t peak_rss_mib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;  // KiB on Linux
}

// The hand-made files are what they claim: a small one decodes to its flat grey.
TEST(VideoIo, AHandMadeMjpegAviDecodes) {
  const std::string path = test::scratch_dir("video_io_hand_made") + "/small.avi";
  test::write_file(path, one_frame_avi(64, 48, flat_jpeg(64, 48)));
  const auto frames = read_video_frames(path, 2);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].cols, 64);
  EXPECT_EQ(frames[0].rows, 48);
  EXPECT_NEAR(cv::mean(frames[0])[0], 128.0, 2.0);  // DC 0: the level-shifted middle grey
}

// One 16000 x 16000 MJPEG frame (a 1 MB file): refused from the stream's declared size, before
// the decoder allocates the frame (decoding it first cost 1.8 GB and 1.5 s here, 2 GB and 23 s for
// a colour one), with the file, the size and the limit in the message.
TEST(VideoIo, FramesDeclaredAboveThePixelLimitAreRefusedBeforeDecoding) {
  const std::string dir = test::scratch_dir("video_io_huge");
  const std::string frame = flat_jpeg(16000, 16000);
  // the container declares the huge size; then one that declares 64 x 48 around the same frame
  // (FFmpeg reads the size from the JPEG's own header as it opens the stream)
  for (const auto& [name, declared] : {std::pair{"huge.avi", 16000}, std::pair{"small_header.avi", 64}}) {
    const std::string path = dir + "/" + name;
    test::write_file(path, one_frame_avi(declared, declared == 64 ? 48 : declared, frame));
    const int64_t rss_before = peak_rss_mib();
    const auto started = std::chrono::steady_clock::now();
    expect_video_error([&] { read_video_frames(path, 4); }, path +
                                                                ": declares frames of 16000x16000 pixels, above the limit "
                                                                "of 67108864 pixels (refused before decoding)");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    EXPECT_LT(seconds, 1.0) << name << ": the refusal took " << seconds << " s";
    EXPECT_LT(peak_rss_mib() - rss_before, 256)
        << name << ": the refusal raised the peak memory by " << peak_rss_mib() - rss_before << " MiB";
  }
  // under a smaller limit, a modest declared size is refused the same way
  const std::string path = dir + "/modest.avi";
  test::write_file(path, one_frame_avi(640, 480, flat_jpeg(640, 480)));
  ImageLimits limits;
  limits.max_pixels = 100000;
  expect_video_error([&] { read_video_frames(path, 1, limits); }, "declares frames of 640x480 pixels, above the limit of 100000");
}

}  // namespace
}  // namespace era
