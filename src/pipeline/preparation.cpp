#include "pipeline/preparation.h"

#include "era/error.h"
#include "reduce/registry.h"
#include "text/prompt.h"
#include "video/video_io.h"

namespace era {
namespace {

// An Image of a request as the contiguous RGB matrix load_rgb_image gives for a file, so every
// source goes through the same preprocessing.
cv::Mat rgb_of(const Image& image, const ImageLimits& limits) {
  switch (image.source()) {
    case Image::Source::kFile:
      return load_rgb_image(image.name(), limits);
    case Image::Source::kEncoded:
      return decode_rgb_image(image.data(), image.size_bytes(), image.name(), limits);
    case Image::Source::kPixels:
      return rgb_from_buffer(image.data(), image.width(), image.height(), 3, image.width() * 3, limits);
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown image source");
}

// A request's video as decoded RGB frames: sampled from its file (by count, or per second with the
// native families' rounding to whole temporal patches), or its frames decoded as images; with the
// rate they were sampled at (set on the Video > measured from the file > 0, the bundle's default).
VideoFrames video_frames(const Video& video, const Manifest& manifest, bool native, const ImageLimits& limits) {
  VideoFrames v;
  if (video.source() == Video::Source::kFile) {
    FrameSampling sampling;
    sampling.frames = video.frame_count();
    sampling.fps = video.sampling_fps();
    sampling.multiple = native ? manifest.video.native.temporal_patch_size : 1;
    // the bundle's video processor bounds a per-second sampling (manifest video.min_frames / max_frames)
    sampling.min_frames = native ? manifest.video.min_frames : 1;
    sampling.max_frames = native ? manifest.video.max_frames : Video::kMaxFrames;
    v = sample_video_frames(video.name(), sampling, limits);
  } else {
    for (const Image& frame : video.frames()) v.frames.push_back(rgb_of(frame, limits));
    if (v.frames.empty()) throw Error(ErrorCode::kImage, "video " + video.name() + ": has no frames");
  }
  if (video.sampled_fps() > 0) v.sampled_fps = video.sampled_fps();
  return v;
}

}  // namespace

int64_t native_time_step(const Manifest& manifest, double sampled_fps) {
  // transformers' get_rope_index: tokens_per_second x int(second_per_grid_t), with
  // second_per_grid_t = temporal_patch_size / fps (the int() truncates, as there)
  const double fps = sampled_fps > 0 ? sampled_fps : manifest.video.fps;
  const double seconds = static_cast<double>(manifest.video.native.temporal_patch_size) / fps;
  return manifest.vision.tokens_per_second * static_cast<int64_t>(seconds);
}

void check_fits(int64_t text_tokens, int64_t visual_tokens, const TextSpec& text, const std::string& hint) {
  const int64_t context = text.context_limit();
  if (text_tokens + visual_tokens < context) return;
  // A sliding-window model is limited to its window: era does not implement the window, and
  // within it full attention is the same computation.
  const std::string why = context < text.max_position_embeddings
                              ? " (its sliding attention window, manifest text.sliding_window; era attends to the "
                                "whole sequence, which is exact only within the window)"
                              : "";
  throw Error(ErrorCode::kPrompt, "prompt too long: " + std::to_string(text_tokens) + " text tokens + " +
                                      std::to_string(visual_tokens) + " image tokens = " +
                                      std::to_string(text_tokens + visual_tokens) + ", but the model's context is " +
                                      std::to_string(context) + " tokens" + why + " (one must be left to answer)" + hint);
}

std::string video_length_hint(const Request& request) {
  // a video's frame count is known before decoding: the frames asked of a file, or those given
  std::string frames;
  for (const Video& v : request.videos) {
    frames += (frames.empty() ? "" : ", ") + v.name() + ": " + std::to_string(v.frame_count()) + " frames";
  }
  return frames.empty() ? "" : "; video " + frames + " — sample fewer frames (--frames) or reduce them (--keep-ratio / --tokens)";
}

PreparedRequest prepare_request(const SessionState& impl, const Request& request) {
  const ModelFamily& family = *impl.family;
  const Manifest& manifest = impl.bundle.manifest;
  PreparedRequest out;
  PreparedInput& in = out.input;
  const int n_images = static_cast<int>(request.images.size() + request.image_buffers.size());
  const int n_videos = static_cast<int>(request.videos.size());
  if (n_videos > 0 && !family.takes_video()) {
    throw Error(ErrorCode::kPrompt, "video " + request.videos.front().name() + ": this model (arch " + manifest.arch +
                                        ") takes no video: its bundle has no \"video\" section");
  }
  if (request.use_template) {
    in.prompt = family.format_prompt(request.history, request.prompt, n_images, n_videos, request.system);
  } else {
    in.prompt = request.prompt;
    const auto check = [&](const std::string& placeholder, int given, const char* what) {
      const int found = count_placeholders(in.prompt, placeholder);
      if (found != given) {
        throw Error(ErrorCode::kPrompt, "the prompt has " + std::to_string(found) + " " + placeholder + " placeholder(s) but " +
                                            std::to_string(given) + " " + what + "(s) were given");
      }
    };
    check(family.image_placeholder(), n_images, "image");
    if (family.takes_video()) check(family.video_placeholder(), n_videos, "video");
  }
  in.image_token_id = manifest.tokens.image_token_id;
  in.video_token_id = family.takes_video() ? manifest.tokens.video_token_id : -1;
  in.token_ids = family.tokenize(*impl.bundle.tokenizer, in.prompt);

  // Fail before any image work when the text alone cannot fit; the full check, with the real
  // number of (reduced) visual tokens, runs once the sequence is built.
  const int64_t text_tokens = static_cast<int64_t>(in.token_ids.size()) - n_images - n_videos;
  check_fits(text_tokens, 0, manifest.text);

  // Methods that hand every visual token to the decoder (full, FastV, DART): a video's token count
  // is known from its frame count, so a video too long for the context fails before decoding.
  if (n_videos > 0 && find_method(request.reduction.method).stage != MethodStage::kBeforeDecoder) {
    int64_t video_tokens = 0;
    for (const Video& v : request.videos) video_tokens += family.max_video_tokens(v.frame_count());
    check_fits(text_tokens, video_tokens, manifest.text, video_length_hint(request));
  }

  std::vector<Image> images;
  for (const auto& path : request.images) images.push_back(Image::from_file(path));
  images.insert(images.end(), request.image_buffers.begin(), request.image_buffers.end());
  // Fixed-size crops stack into [crops, 3, S, S]; native-resolution items (Qwen2.5-VL) are
  // patches of their own size, concatenated, with their (t, h, w) grids.
  const bool native = family.native_resolution();
  const PixelRange range{request.min_pixels, request.max_pixels};
  std::vector<torch::Tensor> pixels;
  const auto add_crop = [&](const cv::Mat& crop, torch::Tensor normalized) {
    pixels.push_back(std::move(normalized));
    in.crops.push_back(Image::from_pixels(crop.data, crop.cols, crop.rows, static_cast<int>(crop.step), PixelFormat::kRGB8));
  };
  const auto add_native = [&](NativeItem item, int64_t time_step) {
    for (const cv::Mat& f : item.frames) in.crops.push_back(Image::from_pixels(f.data, f.cols, f.rows, static_cast<int>(f.step), PixelFormat::kRGB8));
    pixels.push_back(std::move(item.patches));
    in.grids.push_back({item.grid.t, item.grid.h, item.grid.w});
    out.time_steps.push_back(time_step);
    return static_cast<int64_t>(item.frames.size());
  };
  // The visual items in the order of their placeholders: the i-th image id takes the i-th image,
  // the j-th video id the j-th video.
  size_t next_image = 0, next_video = 0;
  for (const int64_t id : in.token_ids) {
    if (id == in.image_token_id && next_image < images.size()) {
      const Image& image = images[next_image++];
      const cv::Mat rgb = rgb_of(image, impl.image_limits);
      int64_t crops = 1;
      if (native) {
        crops = add_native(family.native_image(rgb, range, "image " + image.name()), 1);
      } else {
        const std::vector<cv::Mat> cut = family.crops_in_prompt(rgb, n_images);
        for (const cv::Mat& crop : cut) add_crop(crop, family.normalize(crop));
        crops = static_cast<int64_t>(cut.size());
      }
      in.media.push_back(MediaKind::kImage);
      in.image_sizes.push_back({rgb.rows, rgb.cols});
      in.crops_per_image.push_back(crops);
    } else if (in.video_token_id >= 0 && id == in.video_token_id && next_video < request.videos.size()) {
      const Video& video = request.videos[next_video++];
      const VideoFrames sampled = video_frames(video, manifest, native, impl.image_limits);
      const std::vector<cv::Mat>& frames = sampled.frames;
      if (native) {
        add_native(family.native_video(frames, range, "video " + video.name()), native_time_step(manifest, sampled.sampled_fps));
      } else {
        for (const cv::Mat& rgb : frames) {
          const cv::Mat frame = family.video_frame(rgb);
          add_crop(frame, family.normalize_frame(frame));
        }
      }
      in.media.push_back(MediaKind::kVideo);
      in.image_sizes.push_back({frames.front().rows, frames.front().cols});
      in.crops_per_image.push_back(static_cast<int64_t>(frames.size()));
    }
  }
  // Placeholders the text itself produced in another way than counted (a template's own tokens):
  // every image and video must have found its place.
  if (next_image != images.size() || next_video != request.videos.size()) {
    throw Error(ErrorCode::kPrompt, "the prompt's token ids hold " + std::to_string(next_image) + " image and " +
                                        std::to_string(next_video) + " video placeholder(s) but " +
                                        std::to_string(images.size()) + " image(s) and " +
                                        std::to_string(request.videos.size()) + " video(s) were given");
  }
  if (native) {
    const auto& n = manifest.image.native;
    out.pixel_values = pixels.empty() ? torch::empty({0, 3 * n.temporal_patch_size * n.patch_size * n.patch_size}) : torch::cat(pixels, 0);
    out.grid_thw = torch::empty({static_cast<int64_t>(in.grids.size()), 3}, torch::kLong);
    for (size_t i = 0; i < in.grids.size(); ++i)
      for (int64_t k = 0; k < 3; ++k) out.grid_thw[static_cast<int64_t>(i)][k] = in.grids[i][static_cast<size_t>(k)];
    return out;
  }
  const int64_t s = manifest.image.size;
  out.pixel_values = pixels.empty() ? torch::empty({0, 3, s, s}) : torch::stack(pixels);
  return out;
}

}  // namespace era
