#pragma once
// Video decoding for the vision pipeline: the frames a request's video brings, as the RGB
// matrices a decoded image gives, so frames and images share every later step.
//
// Every problem with a video (missing, not a regular file, not readable as a video, no frames,
// frames too large) is an era::Error(ErrorCode::kImage) whose message starts with "video PATH".
// Frames above limits.max_pixels are refused from the stream's declared size before any frame is
// decoded, and every decoded frame is checked again (a stream may declare no size, or change it).
#include <opencv2/core.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "image/image_io.h"

namespace era {

// lmms-eval's frame indices for LLaVA-OneVision: numpy.linspace(0, total - 1, frames) cast to int
// (truncation; the last index is total - 1 exactly; repeats when total < frames).
std::vector<int64_t> uniform_frame_indices(int64_t total, int64_t frames);

// transformers' sample_frames with `fps` (Qwen2VLVideoProcessor's rule): n = total / video_fps x fps,
// clamped to [min_frames, max_frames'] with max_frames' = min(max_frames, total) floored to a
// multiple of `multiple` (the temporal patch), then floored to that multiple; the indices are
// arange(0, total, total / n) truncated. Empty when total, video_fps or fps is not positive, or
// when n comes out 0 (a video shorter than one temporal patch).
std::vector<int64_t> fps_frame_indices(int64_t total, double video_fps, double fps, int64_t multiple, int64_t min_frames,
                                       int64_t max_frames);

// How frames are picked from a file: `frames` by uniform_frame_indices, or, when fps > 0, at fps
// frames per second of the video's time by fps_frame_indices (multiple/min/max as there).
struct FrameSampling {
  int frames = 16;
  double fps = 0;
  int64_t multiple = 1;
  int64_t min_frames = 1;
  int64_t max_frames = 1024;
};

struct VideoFrames {
  std::vector<cv::Mat> frames;
  // frames per second of what was sampled (transformers' VideoMetadata.sampled_fps:
  // n / total x the stream's fps); 0 when the stream states no frame rate.
  double sampled_fps = 0;
};

// The frames the sampling picks from the video file at `path`, in order, as contiguous CV_8UC3 RGB
// matrices. `total` is the stream's frame count from its header; when the header has none, or
// overstates it, the frames are counted by decoding.
VideoFrames sample_video_frames(const std::string& path, const FrameSampling& sampling, const ImageLimits& limits = {});

// The frames at uniform_frame_indices(total, frames): sample_video_frames with a frame count.
std::vector<cv::Mat> read_video_frames(const std::string& path, int frames, const ImageLimits& limits = {});

}  // namespace era
