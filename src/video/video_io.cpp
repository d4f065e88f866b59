#include "video/video_io.h"

#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>
#include <opencv2/videoio/registry.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "era/error.h"

namespace era {
namespace {

[[noreturn]] void fail_video(const std::string& path, const std::string& why) {
  throw Error(ErrorCode::kImage, "video " + path + ": " + why);
}

cv::VideoCapture open_video(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail_video(path, "no such file");
  // VideoCapture also opens URLs, devices and printf-style image sequences: a path must be a file.
  if (!std::filesystem::is_regular_file(path, ec)) fail_video(path, "not a regular file");
  if (std::filesystem::file_size(path, ec) == 0) fail_video(path, "the file is empty");
  // FFmpeg where OpenCV has it: CAP_ANY would also try GStreamer, which prints errors of its own
  // for every file it cannot open
  const int backend = cv::videoio_registry::hasBackend(cv::CAP_FFMPEG) ? cv::CAP_FFMPEG : cv::CAP_ANY;
  cv::VideoCapture capture(path, backend);
  if (!capture.isOpened()) fail_video(path, "cannot be read as a video (OpenCV's video reader opens no stream in it)");
  return capture;
}

// Refuses a stream whose declared frame size is above the pixel limit, before any frame is
// decoded: decoding one 16000x16000 MJPEG frame (a 1 MB file) costs about 2 GB and seconds before the
// check on the decoded frame could refuse it. FFmpeg takes the size from the codec's own header
// (the first JPEG's SOF, not only the AVI's BITMAPINFOHEADER) while it opens the stream, without
// decoding it. A size of 0 (unknown) leaves the check to the decoded frames (decode_at).
void check_declared_size(const cv::VideoCapture& capture, const std::string& path, const ImageLimits& limits) {
  const double width = capture.get(cv::CAP_PROP_FRAME_WIDTH);
  const double height = capture.get(cv::CAP_PROP_FRAME_HEIGHT);
  if (!(width >= 1 && height >= 1)) return;  // unknown (0, negative or NaN): checked once decoded
  if (width * height > static_cast<double>(limits.max_pixels)) {
    const auto w = static_cast<int64_t>(width), h = static_cast<int64_t>(height);
    fail_video(path, "declares frames of " + std::to_string(w) + "x" + std::to_string(h) + " pixels, above the limit of " +
                         std::to_string(limits.max_pixels) + " pixels (refused before decoding)");
  }
}

// Frames a stream really holds, by decoding through it (headers may omit or overstate the count).
int64_t count_frames(const std::string& path) {
  cv::VideoCapture capture = open_video(path);
  int64_t n = 0;
  while (capture.grab()) ++n;
  return n;
}

// Decodes the frames `wanted` (ascending, repeats allowed) of an open capture in one pass; false
// if the stream ends before the last of them.
bool decode_at(cv::VideoCapture& capture, const std::string& path, const std::vector<int64_t>& wanted, const ImageLimits& limits,
               std::vector<cv::Mat>& out) {
  std::map<int64_t, cv::Mat> decoded;
  const int64_t last = wanted.empty() ? -1 : wanted.back();
  for (int64_t index = 0; index <= last; ++index) {
    if (!capture.grab()) return false;
    if (!std::binary_search(wanted.begin(), wanted.end(), index)) continue;
    cv::Mat bgr;
    if (!capture.retrieve(bgr) || bgr.empty()) fail_video(path, "frame " + std::to_string(index) + " cannot be decoded");
    if (static_cast<int64_t>(bgr.cols) * bgr.rows > limits.max_pixels) {
      fail_video(path, "frames of " + std::to_string(bgr.cols) + "x" + std::to_string(bgr.rows) + " pixels exceed the limit of " +
                           std::to_string(limits.max_pixels) + " pixels");
    }
    cv::Mat rgb;
    if (bgr.type() == CV_8UC3) {
      cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
    } else if (bgr.type() == CV_8UC1) {
      cv::cvtColor(bgr, rgb, cv::COLOR_GRAY2RGB);
    } else {
      fail_video(path, "frame " + std::to_string(index) + " is not 8-bit grey or colour");
    }
    decoded[index] = rgb;
  }
  out.clear();
  for (const int64_t index : wanted) out.push_back(decoded.at(index));
  return true;
}

}  // namespace

std::vector<int64_t> uniform_frame_indices(int64_t total, int64_t frames) {
  std::vector<int64_t> out;
  if (total <= 0 || frames <= 0) return out;
  if (frames == 1) return {0};
  // numpy.linspace: step = (stop - start) / (num - 1), y = arange(num) * step, y[-1] = stop
  const double step = static_cast<double>(total - 1) / static_cast<double>(frames - 1);
  for (int64_t i = 0; i + 1 < frames; ++i) out.push_back(static_cast<int64_t>(static_cast<double>(i) * step));
  out.push_back(total - 1);
  return out;
}

std::vector<int64_t> fps_frame_indices(int64_t total, double video_fps, double fps, int64_t multiple, int64_t min_frames,
                                       int64_t max_frames) {
  std::vector<int64_t> out;
  if (total <= 0 || !(video_fps > 0) || !(fps > 0) || multiple < 1) return out;
  const double cap = static_cast<double>(std::min(max_frames, total) / multiple * multiple);
  double n = static_cast<double>(total) / video_fps * fps;
  n = std::min(std::max(n, static_cast<double>(min_frames)), cap);  // cap <= total
  const auto count = static_cast<int64_t>(std::floor(n / static_cast<double>(multiple))) * multiple;
  if (count <= 0) return out;
  // torch.arange(0, total, total / n): start + i x step in double, stored as float32, then .int()
  // truncates. Exactly n of them (arange's own length can round up to n + 1, one past the end).
  const double step = static_cast<double>(total) / static_cast<double>(count);
  for (int64_t i = 0; i < count; ++i) out.push_back(static_cast<int64_t>(static_cast<float>(static_cast<double>(i) * step)));
  return out;
}

VideoFrames sample_video_frames(const std::string& path, const FrameSampling& sampling, const ImageLimits& limits) {
  const auto pick = [&](int64_t total, double video_fps) {
    if (!(sampling.fps > 0)) return uniform_frame_indices(total, sampling.frames);
    if (!(video_fps > 0))
      fail_video(path, "states no frame rate, so frames cannot be sampled per second (give a frame count instead)");
    std::vector<int64_t> indices =
        fps_frame_indices(total, video_fps, sampling.fps, sampling.multiple, sampling.min_frames, sampling.max_frames);
    if (indices.empty()) {
      fail_video(path, "has " + std::to_string(total) + " frame(s), fewer than the " + std::to_string(sampling.multiple) +
                           " one sampled step needs");
    }
    return indices;
  };
  VideoFrames out;
  cv::VideoCapture capture = open_video(path);
  check_declared_size(capture, path, limits);  // before count_frames or decode_at decode anything
  const double video_fps = capture.get(cv::CAP_PROP_FPS);
  int64_t total = static_cast<int64_t>(capture.get(cv::CAP_PROP_FRAME_COUNT));
  if (!(total > 0 && decode_at(capture, path, pick(total, video_fps), limits, out.frames))) {
    // no count in the header, or an overstated one: count by decoding, then sample what is there
    total = count_frames(path);
    if (total <= 0) fail_video(path, "has no frames");
    cv::VideoCapture again = open_video(path);
    if (!decode_at(again, path, pick(total, video_fps), limits, out.frames)) fail_video(path, "frames vanished while reading");
  }
  // transformers' VideoMetadata.sampled_fps
  if (video_fps > 0) out.sampled_fps = static_cast<double>(out.frames.size()) / static_cast<double>(total) * video_fps;
  return out;
}

std::vector<cv::Mat> read_video_frames(const std::string& path, int frames, const ImageLimits& limits) {
  FrameSampling sampling;
  sampling.frames = frames;
  return sample_video_frames(path, sampling, limits).frames;
}

}  // namespace era
