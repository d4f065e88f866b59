#include "family/model_family.h"

namespace era {

FrameSampling VisualProcessor::video_sampling(int frames, double fps) const {
  if (!takes_video()) throw no_video();
  FrameSampling sampling;
  sampling.frames = frames;
  sampling.fps = fps;
  sampling.multiple = 1;
  sampling.min_frames = 1;
  sampling.max_frames = Video::kMaxFrames;
  return sampling;
}

VisualItem VisualProcessor::video(const std::vector<cv::Mat>&, double, const ItemContext&) const { throw no_video(); }

int64_t VisualProcessor::max_video_tokens(int64_t) const { throw no_video(); }

Error no_video_error(const std::string& arch, const std::string& video) {
  return Error(ErrorCode::kPrompt, (video.empty() ? "" : "video " + video + ": ") + "this model (arch " + arch +
                                       ") takes no video: its bundle has no \"video\" section");
}

PromptTemplate request_template(const PromptTemplate& base, const std::optional<std::string>& system, int num_videos,
                                bool takes_video, const Error& no_video) {
  PromptTemplate tmpl = base;
  if (system) tmpl.system = *system;
  if (!takes_video) {
    if (num_videos > 0) throw no_video;
    tmpl.video_placeholder.clear();
  }
  return tmpl;
}

}  // namespace era
