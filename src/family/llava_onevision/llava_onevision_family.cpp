#include "family/llava_onevision/llava_onevision_family.h"

#include <algorithm>

#include "era/error.h"
#include "family/anyres.h"
#include "family/anyres_reduction.h"
#include "family/frame_preprocess.h"
#include "family/llava_onevision/onevision_packing.h"
#include "family/vision_input.h"
#include "reduce/budget.h"
#include "text/prompt.h"

namespace era {

LlavaOnevisionFamily::LlavaOnevisionFamily(const ModelBundle& bundle)
    : LlavaFamilyBase(bundle), image_newline_(projector_parameter(bundle, "image_newline")) {
  require_layout({ImageLayout::kAnyres});
  if (sections_.image.grid_pinpoints.empty()) {
    throw Error(ErrorCode::kBundle, bundle_dir_ + "/manifest.json: image.grid_pinpoints is empty (LLaVA-OneVision needs them)");
  }
  if (!image_newline_.defined()) {
    throw Error(ErrorCode::kBundle,
                bundle_dir_ + "/" + manifest_.projector_file + ": no image_newline parameter (LLaVA-OneVision needs it)");
  }
  if (manifest_.vision.keeps_cls()) {
    throw Error(ErrorCode::kBundle, bundle_dir_ + "/manifest.json: vision.has_cls must be false for llava-onevision (SigLIP)");
  }
}

// Qwen2 has no BOS: the ids are the added tokens (ChatML markers) and the BPE pieces between them;
// a video placeholder is one id like the image's.
std::vector<int64_t> LlavaOnevisionFamily::tokenize(const Tokenizer& tokenizer, const std::string& prompt) const {
  std::vector<AddedToken> specials = manifest_.tokens.added_tokens;
  if (takes_video()) specials.push_back({manifest_.prompt.video_placeholder, manifest_.tokens.video_token_id});
  return tokenize_with_images(tokenizer, prompt, manifest_.prompt.image_placeholder, manifest_.tokens.image_token_id, specials);
}

std::vector<cv::Mat> LlavaOnevisionFamily::crops(const cv::Mat& rgb) const {
  return llava_next_crops(rgb, sections_.image.grid_pinpoints, clip_);
}

std::vector<cv::Mat> LlavaOnevisionFamily::crops_in_prompt(const cv::Mat& rgb, int images_in_prompt) const {
  // HF: only a prompt's single image is tiled; clip_ pads to a square (an anyres layout's mode is
  // kPad: HF pad_to_square, centred, in int(mean * 255)) before the resize
  if (images_in_prompt > 1) return {llava15_crop(rgb, clip_)};
  return crops(rgb);
}

// The base crop plus the largest grid after the anyres_max downscale, with its newlines (unpad
// only removes tokens, so the unpadded grids are bounded by the padded ones).
int64_t LlavaOnevisionFamily::max_visual_tokens() const {
  const LlavaImageSpec& im = sections_.image;
  const int64_t n = tokens_per_crop(), p = im.size / manifest_.vision.patch_size;
  int64_t most = n + 1;  // one image of several: its crop and a newline
  for (const auto& r : im.grid_pinpoints) {
    const auto [h, w] = anyres_max_grid(r.height / im.size * p, r.width / im.size * p, im.anyres_max_tiles, p);
    most = std::max(most, n + h * (w + 1));
  }
  return most;
}

ReducedTokens LlavaOnevisionFamily::reduce_image(const ImageTokens& image, const MethodSpec& method, const Reducer& reducer,
                                                 const ReductionRequest& request) const {
  if (image.count > 1) return reduce_tiled(image, method, reducer, request);
  // One image of several: its square crop, reduced with the image's budget, then one newline.
  ReductionInput in = crop_input(*image.vision, image.first, resolve_budget(request, tokens_per_crop(), request.tokens));
  in.instruction_embeddings = image.instruction;
  return append_newline(reducer.reduce(in), image_newline_);
}

ReducedTokens LlavaOnevisionFamily::reduce_tiled(const ImageTokens& image, const MethodSpec& method, const Reducer& reducer,
                                                 const ReductionRequest& request) const {
  const AnyresGeometry geometry = anyres_geometry(sections_.image, manifest_.vision.patch_size, image.size);
  if (geometry.rows * geometry.cols + 1 != image.count) {
    throw Error(ErrorCode::kRuntime, "llava-onevision: " + std::to_string(image.count) + " crops for a " +
                                         std::to_string(geometry.rows) + "x" + std::to_string(geometry.cols) + " tile grid");
  }
  const int64_t max_tiles = sections_.image.anyres_max_tiles;
  const torch::Tensor crops = image.vision->embeddings.slice(0, image.first, image.first + image.count);
  if (method.name == unreduced_method().name) return pack_anyres_max(crops, geometry, max_tiles, image_newline_);
  if (method.capabilities.selects_packed_sequence) {  // DivPrune: over what the decoder would see
    return select_over_packed(pack_anyres_max(crops, geometry, max_tiles, image_newline_), image, reducer, request);
  }
  // the image's budget spread evenly over its crops (at least 1 each)
  const int64_t per_crop = request.tokens > 0 ? std::max<int64_t>(1, request.tokens / image.count) : 0;
  return pack_anyres(reduce_crops(image, method, reducer, request, tokens_per_crop(), per_crop), geometry, image_newline_);
}

cv::Mat LlavaOnevisionFamily::video_frame(const cv::Mat& rgb) const {
  if (!takes_video()) throw no_video();
  return resize_video_frame(rgb, *sections_.video);
}

torch::Tensor LlavaOnevisionFamily::normalize_frame(const cv::Mat& frame) const {
  if (!takes_video()) throw no_video();
  return normalize_video_frame(frame, *sections_.video);
}

int64_t LlavaOnevisionFamily::tokens_per_frame() const {
  if (!takes_video()) throw no_video();
  const int64_t side = sections_.image.size / manifest_.vision.patch_size, stride = sections_.video->pool_stride;
  const int64_t out = (side + stride - 1) / stride;
  return out * out;
}

ReducedTokens LlavaOnevisionFamily::reduce_video(const ImageTokens& video, const MethodSpec& method, const Reducer& reducer,
                                                 const ReductionRequest& request) const {
  if (!takes_video()) throw no_video();
  const int64_t side = sections_.image.size / manifest_.vision.patch_size;
  const VisionOutput pooled = pool_frames(*video.vision, video.first, video.count, side, sections_.video->pool_stride);
  ImageTokens frames = video;
  frames.vision = &pooled;
  frames.first = 0;
  const auto every_token = [&] { return FullReducer().reduce(joint_input(pooled, 0, video.count, 0)); };
  if (method.name == unreduced_method().name) return append_newline(every_token(), image_newline_);
  if (method.capabilities.selects_packed_sequence) {  // DivPrune: over what the decoder would see
    return select_over_packed(append_newline(every_token(), image_newline_), frames, reducer, request);
  }
  // the video's budget spread evenly over its frames (at least 1 each), or one global selection
  const int64_t per_frame = request.tokens > 0 ? std::max<int64_t>(1, request.tokens / video.count) : 0;
  return append_newline(reduce_crops(frames, method, reducer, request, tokens_per_frame(), per_frame), image_newline_);
}

}  // namespace era
