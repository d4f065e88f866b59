#pragma once
// Video decoding for the vision pipeline: the frames a request's video brings, as the RGB
// matrices a decoded image gives, so frames and images share every later step.
//
// Every problem with a video (missing, not a regular file, not readable as a video, no frames,
// frames too large) is an era::Error(ErrorCode::kImage) whose message starts with "video PATH".
#include <opencv2/core.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "image/image_io.h"

namespace era {

// lmms-eval's frame indices for LLaVA-OneVision: numpy.linspace(0, total - 1, frames) cast to int
// (truncation; the last index is total - 1 exactly; repeats when total < frames).
std::vector<int64_t> uniform_frame_indices(int64_t total, int64_t frames);

// The frames at uniform_frame_indices(total, frames) of the video file at `path`, in order, as
// contiguous CV_8UC3 RGB matrices. `total` is the stream's frame count from its header; when the
// header has none, or overstates it, the frames are counted by decoding.
std::vector<cv::Mat> read_video_frames(const std::string& path, int frames, const ImageLimits& limits = {});

}  // namespace era
