// era::Video (era/video.h): the public video type. Frames are decoded when the request runs
// (video/video_io.h), like an Image from a file.
#include "era/video.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "era/error.h"
#include "video/video_io.h"

namespace era {

struct Video::Data {
  Source source = Source::kFile;
  std::string name;
  int frame_count = 0;
  std::vector<Image> frames;
  double sampled_fps = 0;
  double sampling_fps = 0;
};

Video::Video(std::shared_ptr<const Data> data) : data_(std::move(data)) {}

namespace {
void check_fps(double fps, const std::string& name, const char* what) {
  if (!(fps > 0 && fps <= 1000)) {
    throw Error(ErrorCode::kInvalidArgument, "video " + name + ": " + what + " " + std::to_string(fps) + " is not in (0, 1000]");
  }
}

void check_frame_count(int n, const std::string& name, const char* what) {
  if (n < 1 || n > Video::kMaxFrames) {
    throw Error(ErrorCode::kInvalidArgument, "video " + name + ": " + what + " " + std::to_string(n) + " is not between 1 and " +
                                                 std::to_string(Video::kMaxFrames));
  }
}
}  // namespace

Video Video::from_file(const std::string& path, int frames) {
  check_frame_count(frames, path, "frame count");
  auto d = std::make_shared<Data>();
  d->source = Source::kFile;
  d->name = path;
  d->frame_count = frames;
  return Video(std::move(d));
}

Video Video::from_file_at_fps(const std::string& path, double fps) {
  check_fps(fps, path, "sampling fps");
  auto d = std::make_shared<Data>(*from_file(path, 1).data_);  // a file, sampled per second instead
  d->frame_count = 0;
  d->sampling_fps = fps;
  return Video(std::move(d));
}

Video Video::from_frames(std::vector<Image> frames, const std::string& name) {
  check_frame_count(static_cast<int>(std::min<size_t>(frames.size(), static_cast<size_t>(kMaxFrames) + 1)), name,
                    "number of frames");
  auto d = std::make_shared<Data>();
  d->source = Source::kFrames;
  d->name = name;
  d->frame_count = static_cast<int>(frames.size());
  d->frames = std::move(frames);
  return Video(std::move(d));
}

Video Video::from_folder(const std::string& dir, int frames) {
  if (frames != 0) check_frame_count(frames, dir, "frame count");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw Error(ErrorCode::kImage, "video " + dir + ": not a folder");
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string ext = entry.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    static const char* const kImageExtensions[] = {".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff", ".gif"};
    if (entry.is_regular_file(ec) &&
        std::find(std::begin(kImageExtensions), std::end(kImageExtensions), ext) != std::end(kImageExtensions)) {
      files.push_back(entry.path().string());
    }
  }
  if (ec) throw Error(ErrorCode::kImage, "video " + dir + ": cannot list the folder (" + ec.message() + ")");
  if (files.empty()) throw Error(ErrorCode::kImage, "video " + dir + ": the folder holds no frame image (.png, .jpg, ...)");
  std::sort(files.begin(), files.end());
  std::vector<Image> images;
  if (frames == 0) {
    for (const auto& f : files) images.push_back(Image::from_file(f));
  } else {
    for (const int64_t i : uniform_frame_indices(static_cast<int64_t>(files.size()), frames)) {
      images.push_back(Image::from_file(files[static_cast<size_t>(i)]));
    }
  }
  return from_frames(std::move(images), dir);
}

Video Video::from_path(const std::string& path, int frames, double fps) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    Video folder = from_folder(path, frames);
    return fps != 0 ? folder.with_sampled_fps(fps) : folder;
  }
  if (fps != 0) {
    if (frames != 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  "video " + path + ": a frame count and a sampling fps exclude each other (give one)");
    }
    return from_file_at_fps(path, fps);
  }
  return from_file(path, frames == 0 ? 16 : frames);
}

Video::Source Video::source() const { return data_->source; }
const std::string& Video::name() const { return data_->name; }
int Video::frame_count() const { return data_->frame_count; }
const std::vector<Image>& Video::frames() const { return data_->frames; }
double Video::sampled_fps() const { return data_->sampled_fps; }
double Video::sampling_fps() const { return data_->sampling_fps; }

Video Video::with_sampled_fps(double fps) const {
  check_fps(fps, name(), "sampled fps");
  auto d = std::make_shared<Data>(*data_);
  d->sampled_fps = fps;
  return Video(std::move(d));
}

}  // namespace era
