// Video input: lmms-eval's frame sampling, frames decoded with OpenCV's video reader in order, a
// folder of frame images, and a clear kImage error for every kind of bad video.
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>

#include <filesystem>

#include "era/error.h"
#include "era/video.h"
#include "test_support.h"
#include "video/video_io.h"

namespace era {
namespace {

// numpy.linspace(0, n - 1, k, dtype=int), printed by numpy 2.x.
TEST(VideoIo, FrameIndicesAreNumpyLinspaceTruncated) {
  EXPECT_EQ(uniform_frame_indices(100, 16),
            (std::vector<int64_t>{0, 6, 13, 19, 26, 33, 39, 46, 52, 59, 66, 72, 79, 85, 92, 99}));
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
  if (std::filesystem::exists(dir + "/zero.avi")) expect_video_error([&] { read_video_frames(dir + "/zero.avi", 4); }, "zero.avi: has no frames");
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

}  // namespace
}  // namespace era
