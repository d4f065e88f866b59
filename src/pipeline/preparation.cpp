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
    case Image::Source::kFile: return load_rgb_image(image.name(), limits);
    case Image::Source::kEncoded: return decode_rgb_image(image.data(), image.size_bytes(), image.name(), limits);
    case Image::Source::kPixels:
      return rgb_from_buffer(image.data(), image.width(), image.height(), 3, image.width() * 3, limits);
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown image source");
}

// A request's video as decoded RGB frames: sampled from its file (by count, or per second, within
// the family's bounds), or its frames decoded as images; with the rate they were sampled at (set on
// the Video > measured from the file > 0, the bundle's default).
VideoFrames video_frames(const Video& video, const VisualProcessor& processor, const ImageLimits& limits) {
  VideoFrames v;
  if (video.source() == Video::Source::kFile) {
    v = sample_video_frames(video.name(), processor.video_sampling(video.frame_count(), video.sampling_fps()), limits);
  } else {
    for (const Image& frame : video.frames()) v.frames.push_back(rgb_of(frame, limits));
    if (v.frames.empty()) throw Error(ErrorCode::kImage, "video " + video.name() + ": has no frames");
  }
  if (video.sampled_fps() > 0) v.sampled_fps = video.sampled_fps();
  return v;
}

}  // namespace

void check_fits(int64_t text_tokens, int64_t visual_tokens, const TextSpec& text, const std::string& hint) {
  const int64_t context = text.context_limit();
  if (text_tokens + visual_tokens < context) return;
  // A sliding-window model is limited to its window: era does not implement the window, and
  // within it full attention is the same computation.
  const std::string why = context < text.max_position_embeddings
                              ? " (its sliding attention window, manifest text.sliding_window; era attends to the "
                                "whole sequence, which is exact only within the window)"
                              : "";
  throw Error(ErrorCode::kPrompt,
              "prompt too long: " + std::to_string(text_tokens) + " text tokens + " + std::to_string(visual_tokens) +
                  " image tokens = " + std::to_string(text_tokens + visual_tokens) + ", but the model's context is " +
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
  const PromptFormat& format = impl.family->prompt();
  const VisualProcessor& processor = impl.family->processor();
  const Manifest& manifest = impl.bundle.manifest;
  PreparedRequest out;
  PreparedInput& in = out.input;
  const int n_images = static_cast<int>(request.images.size() + request.image_buffers.size());
  const int n_videos = static_cast<int>(request.videos.size());
  if (n_videos > 0 && !processor.takes_video()) {
    throw no_video_error(manifest.arch, request.videos.front().name());
  }
  if (request.use_template) {
    in.prompt = format.format_prompt(request.history, request.prompt, n_images, n_videos, request.system);
  } else {
    in.prompt = request.prompt;
    const auto check = [&](const std::string& placeholder, int given, const char* what) {
      const int found = count_placeholders(in.prompt, placeholder);
      if (found != given) {
        throw Error(ErrorCode::kPrompt, "the prompt has " + std::to_string(found) + " " + placeholder + " placeholder(s) but " +
                                            std::to_string(given) + " " + what + "(s) were given");
      }
    };
    check(format.image_placeholder(), n_images, "image");
    if (processor.takes_video()) check(format.video_placeholder(), n_videos, "video");
  }
  in.image_token_id = manifest.tokens.image_token_id;
  in.video_token_id = processor.takes_video() ? manifest.tokens.video_token_id : -1;
  in.token_ids = format.tokenize(*impl.bundle.tokenizer, in.prompt);

  // Fail before any image work when the text alone cannot fit; the full check, with the real
  // number of (reduced) visual tokens, runs once the sequence is built.
  const int64_t text_tokens = static_cast<int64_t>(in.token_ids.size()) - n_images - n_videos;
  check_fits(text_tokens, 0, manifest.text);

  // Methods that hand every visual token to the decoder (full, FastV, DART): a video's token count
  // is known from its frame count, so a video too long for the context fails before decoding.
  if (n_videos > 0 && find_method(request.reduction.method).stage != MethodStage::kBeforeDecoder) {
    int64_t video_tokens = 0;
    for (const Video& v : request.videos) video_tokens += processor.max_video_tokens(v.frame_count());
    check_fits(text_tokens, video_tokens, manifest.text, video_length_hint(request));
  }

  std::vector<Image> images;
  for (const auto& path : request.images) images.push_back(Image::from_file(path));
  images.insert(images.end(), request.image_buffers.begin(), request.image_buffers.end());
  // Each item as the family's processor makes it (fixed-size crops or native-resolution patches;
  // the pipeline does not need to know which), then all of them as one vision pass.
  std::vector<VisualItem> items;
  const auto add = [&](VisualItem item, MediaKind media, std::array<int64_t, 2> size) {
    for (const cv::Mat& v : item.views) {
      in.crops.push_back(Image::from_pixels(v.data, v.cols, v.rows, static_cast<int>(v.step), PixelFormat::kRGB8));
    }
    if (item.grid) in.grids.push_back({item.grid->t, item.grid->h, item.grid->w});
    ImageTokens shape;
    shape.media = media;
    shape.count = static_cast<int64_t>(item.views.size());
    shape.size = size;
    shape.grid = item.grid.value_or(GridThw{});
    shape.time_step = item.time_step;
    out.items.push_back(shape);
    in.media.push_back(media);
    in.image_sizes.push_back(size);
    in.crops_per_image.push_back(shape.count);
    items.push_back(std::move(item));
  };
  ItemContext context;
  context.images_in_prompt = n_images;
  context.min_pixels = request.min_pixels;
  context.max_pixels = request.max_pixels;
  // The visual items in the order of their placeholders: the i-th image id takes the i-th image,
  // the j-th video id the j-th video.
  size_t next_image = 0, next_video = 0;
  for (const int64_t id : in.token_ids) {
    if (id == in.image_token_id && next_image < images.size()) {
      const Image& image = images[next_image++];
      const cv::Mat rgb = rgb_of(image, impl.image_limits);
      context.name = "image " + image.name();
      add(processor.image(rgb, context), MediaKind::kImage, {rgb.rows, rgb.cols});
    } else if (in.video_token_id >= 0 && id == in.video_token_id && next_video < request.videos.size()) {
      const Video& video = request.videos[next_video++];
      const VideoFrames sampled = video_frames(video, processor, impl.image_limits);
      context.name = "video " + video.name();
      add(processor.video(sampled.frames, sampled.sampled_fps, context), MediaKind::kVideo,
          {sampled.frames.front().rows, sampled.frames.front().cols});
    }
  }
  // Placeholders the text itself produced in another way than counted (a template's own tokens):
  // every image and video must have found its place.
  if (next_image != images.size() || next_video != request.videos.size()) {
    throw Error(ErrorCode::kPrompt, "the prompt's token ids hold " + std::to_string(next_image) + " image and " +
                                        std::to_string(next_video) + " video placeholder(s) but " +
                                        std::to_string(images.size()) + " image(s) and " + std::to_string(request.videos.size()) +
                                        " video(s) were given");
  }
  out.pixels = processor.batch(items);
  return out;
}

}  // namespace era
