#pragma once
// A video handed to a Request (Request::videos): a video file from which frames are sampled, or
// the frames themselves as images (files, encoded bytes or pixels, era/image.h). Either way each
// frame goes through the model's video preprocessing (LLaVA-OneVision: resized to the tower's
// square, normalised with the video processor's statistics), then the vision tower; the family
// pools and packs the frames (docs/models.md, "Video").
//
// Frame sampling from a file: `frames` indices spread uniformly over the whole video, exactly as
// lmms-eval samples LLaVA-OneVision inputs (numpy.linspace(0, n - 1, frames) cast to int; a video
// shorter than `frames` repeats frames, as there). Videos are read with OpenCV's video reader
// (its FFmpeg backend: MP4, AVI, MKV, WebM, ...); only regular files are opened (never a URL,
// a device or an image-sequence pattern).
//
// A Video is an immutable value: copies share the frames, and it may be passed between threads.
#include <memory>
#include <string>
#include <vector>

#include "era/image.h"

namespace era {

class Video {
 public:
  // The most frames one video may bring (a guard against a runaway --frames, not a model limit:
  // the model's context is checked once the frames' tokens are known).
  static constexpr int kMaxFrames = 1024;

  // A video file, read when the request runs; `frames` (1..kMaxFrames) are sampled from it.
  // Throws era::Error(kInvalidArgument) for a frame count out of range. A missing, unreadable or
  // frameless file makes the request throw era::Error(kImage) naming the path.
  static Video from_file(const std::string& path, int frames = 16);

  // A video file from which frames are sampled at `fps` (in (0, 1000]) frames per second of the
  // video's own time, as transformers' video processors sample with `fps` (Qwen2.5-VL: the count
  // n = duration x fps is clamped to [4, 768] and floored to a multiple of the temporal patch, 2;
  // other families: floored; indices arange(0, total, total / n)). The sampled rate
  // (n / total x the stream's rate) sets Qwen2.5-VL's temporal position step. A stream that
  // states no frame rate makes the request throw era::Error(kImage) naming the path.
  static Video from_file_at_fps(const std::string& path, double fps);

  // Frames given as images, in playback order (1..kMaxFrames of them, else kInvalidArgument).
  // `name` labels the video in messages and statistics.
  static Video from_frames(std::vector<Image> frames, const std::string& name = "<frames>");

  // A folder of frame images (.png, .jpg, .jpeg, .bmp, .webp, .tif, .tiff, .gif), in file-name
  // order (zero-pad the numbers: frame_0010.png after frame_0009.png); `frames` 0 takes them all,
  // else that many sampled uniformly as from a file. The folder is listed here: throws
  // era::Error(kImage) naming it when it is missing or holds no frame image, kInvalidArgument
  // for `frames` out of range.
  static Video from_folder(const std::string& dir, int frames = 0);

  // A path as tools take it: a folder -> from_folder(path, frames), else from_file(path, frames);
  // `frames` 0 means each one's default (a folder's every frame; 16 from a file).
  // `fps` > 0: a file is sampled at that rate (from_file_at_fps; a frame count as well is
  // kInvalidArgument, as in transformers), a folder's frames are taken as that rate's
  // (with_sampled_fps).
  static Video from_path(const std::string& path, int frames = 0, double fps = 0);

  enum class Source { kFile, kFrames };
  Source source() const;
  // The path (kFile) or the name given to from_frames.
  const std::string& name() const;
  // kFile: the frames to sample (0 when sampled per second); kFrames: the number of frames given.
  int frame_count() const;
  // kFile sampled per second (from_file_at_fps): the rate asked for; else 0.
  double sampling_fps() const;
  // kFrames: the frames; kFile: empty.
  const std::vector<Image>& frames() const;
  // Frames per second of the sampled frames, for models whose positions follow time (Qwen2.5-VL's
  // M-RoPE: temporal position step = tokens_per_second x int(2 / fps)); 0 (the default): a file's
  // is measured when it is sampled (n / total x the stream's rate), given frames take the bundle's
  // video.fps. A copy with it set (it wins over the measured one); throws kInvalidArgument outside
  // (0, 1000].
  double sampled_fps() const;
  Video with_sampled_fps(double fps) const;

 private:
  struct Data;
  explicit Video(std::shared_ptr<const Data> data);
  std::shared_ptr<const Data> data_;
};

}  // namespace era
